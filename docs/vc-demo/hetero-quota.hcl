# Quota-only VCs on a 3-type cluster (docs/virtual-clusters.md, "VCs in the
# one simulator"): no cells; each VC at most its share of each GPU type over
# the whole cluster, with its own policy. The shares are hetero-cells.hcl's
# quotas in GPUs; run with --cluster v100=16,p100=16,k80=16
# --gpus-per-server 8 (the same cluster: one k80 server in no share).
vc "prod" {
  gpus   = { v100 = 8, p100 = 8, k80 = 8 }
  policy = "max_min_fairness_perf"
}
vc "research" {
  gpus   = { v100 = 8, p100 = 8 }
  policy = "fifo"
}

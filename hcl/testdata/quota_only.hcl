# Quota-only VCs: no cells; each VC a share of GPUs per type over the whole
# cluster, with its own policy.
vc "research" {
  gpus   = { v100 = 8, k80 = 4 }
  policy = "max_min_fairness_perf"
}
vc "prod" {
  gpus   = { "v100" = 2 }
  policy = "fifo"
  weight = 2
  space_sharing = false
}

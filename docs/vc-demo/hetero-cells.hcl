# VCs of cells on a 3-type cluster (docs/virtual-clusters.md, "VCs in the
# one simulator"): two 8-GPU nodes of each of v100, p100 and k80, named by
# nomad_node; one k80 node is in no VC's quota (opportunistic work only).
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 8
  node  = true
}
cell_type "p100" {
  gpu_type = "p100"
}
cell_type "p100-node" {
  child = "p100"
  count = 8
  node  = true
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 8
  node  = true
}
cell "v100-node" "v0" {
  nomad_node = "v100-0"
}
cell "v100-node" "v1" {
  nomad_node = "v100-1"
}
cell "p100-node" "p0" {
  nomad_node = "p100-0"
}
cell "p100-node" "p1" {
  nomad_node = "p100-1"
}
cell "k80-node" "k0" {
  nomad_node = "k80-0"
}
cell "k80-node" "k1" {
  nomad_node = "k80-1"
}
vc "prod" {
  quota  = { "v100-node" = 1, "p100-node" = 1, "k80-node" = 1 }
  policy = "max_min_fairness_perf"
}
vc "research" {
  quota  = { "v100-node" = 1, "p100-node" = 1 }
  policy = "fifo"
}

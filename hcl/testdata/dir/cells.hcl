nomad {
  address   = "http://127.0.0.1:4646"
  namespace = "ml"
  region    = "global"
}
round_seconds = 120

cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 4
  node  = true
}
cell_type "k80-rack" {
  child = "k80-node"
  count = 2
}
cell "k80-rack" "r0" {
  nomad_nodes = ["k0", "k1"]
  bad         = ["1/3"]
}
cell "k80-node" "k2" {
  node_pool = "gpu"
  gpu_type  = "k80"
  pinned    = "vision"
}

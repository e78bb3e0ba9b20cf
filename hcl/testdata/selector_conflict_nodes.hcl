cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 1
  node  = true
}
cell_type "v100-rack" {
  child = "v100-node"
  count = 2
}
cell "v100-rack" "r0" {
  nomad_nodes = ["a", "b"]
  node_pool   = "gpu"
}

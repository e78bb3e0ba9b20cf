cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 1
  node  = true
}
cell "v100-node" "n0" {
  nomad_node = "gpu-node-0"
  node_class = "dgx"
}

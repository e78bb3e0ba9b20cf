cell_type "g" {
  gpu_type = "a100"
}
cell_type "node" {
  child = "gpu"
  count = 8
  node  = true
}

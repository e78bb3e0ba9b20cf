cell_type "g" {
  gpu_type = "a100"
}
cell_type "node" {
  child = "g"
  count = 0
  node  = true
}

cell_type "g" {
  gpu_type = "a100"
}
cell_type "node" {
  child = "g"
  count = "eight"
  node  = true
}

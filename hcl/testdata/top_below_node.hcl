cell_type "g" {
  gpu_type = "a100"
}
cell_type "pair" {
  child = "g"
  count = 2
}
cell_type "node" {
  child = "pair"
  count = 4
  node  = true
}
cell "pair" "p0" {
  nomad_node = "a"
}

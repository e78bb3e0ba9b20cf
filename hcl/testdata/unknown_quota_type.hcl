cell_type "g" {
  gpu_type = "a100"
}
cell_type "node" {
  child = "g"
  count = 8
  node  = true
}
cell "node" "n0" {
  nomad_node = "a"
}
vc "a" {
  quota = {
    "nod" = 1
  }
}

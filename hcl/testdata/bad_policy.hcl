cell_type "g" {
  gpu_type = "a100"
  node     = true
}
cell "g" "n0" {
  nomad_node = "a"
}
vc "a" {
  quota  = { "g" = 1 }
  policy = "max_min_fairnes"
}

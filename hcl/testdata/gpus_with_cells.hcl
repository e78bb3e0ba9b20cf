cell_type "g" { gpu_type = "v100" }
cell_type "node" {
  child = "g"
  count = 4
  node  = true
}
cell "node" "n0" { nomad_node = "a" }
vc "a" {
  gpus = { v100 = 2 }
}

cells_from_topology {
  node_pool = "gpu"
}
vc "a" {
  gpus = { v100 = 8 }
}

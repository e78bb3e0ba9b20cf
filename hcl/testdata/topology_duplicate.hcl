cells_from_topology {
  node_pool = "gpu"
}
cells_from_topology {
  node_pool = "gpu"
}

cells_from_topology {
  node_pool = ""
}

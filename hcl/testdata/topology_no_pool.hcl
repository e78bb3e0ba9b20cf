cells_from_topology {
  node_class = "dgx"
}

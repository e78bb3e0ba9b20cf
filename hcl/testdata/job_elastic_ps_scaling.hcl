policy {
  vc = "research"
  elastic {
    min     = 1
    max     = 4
    scaling = "restart"
  }
}

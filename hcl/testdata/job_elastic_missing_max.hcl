policy {
  vc = "research"
  elastic {
    min = 1
  }
}

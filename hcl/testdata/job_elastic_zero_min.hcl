policy {
  vc = "research"
  elastic {
    min = 0
    max = 2
  }
}

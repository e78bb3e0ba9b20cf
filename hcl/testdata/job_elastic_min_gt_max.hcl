policy {
  vc = "research"
  elastic {
    min = 3
    max = 2
  }
}

policy {
  vc = "research"
  elastic {
    min = 1
    max = 2.5
  }
}

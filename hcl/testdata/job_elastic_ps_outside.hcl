policy {
  vc     = "research"
  epochs = 30
  elastic {
    min = 1
    max = 4
  }
}

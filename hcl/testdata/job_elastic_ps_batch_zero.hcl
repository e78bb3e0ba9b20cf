policy {
  vc = "research"
  elastic {
    min        = 1
    max        = 4
    batch_size = 0
  }
}

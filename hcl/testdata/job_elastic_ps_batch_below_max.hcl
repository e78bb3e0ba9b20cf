policy {
  vc = "research"
  elastic {
    min        = 2
    max        = 8
    batch_size = 4
  }
}

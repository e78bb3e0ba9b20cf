policy {
  vc = "research"
  elastic {
    epochs     = 30
    batch_size = 256
  }
}

policy {
  vc = "research"
  ps {
    group = "ps"
    min   = 1
    max   = 2
  }
}

policy {
  vc = "research"
  elastic {
    min = 1
    max = 4
    ps {
      group = "ps"
      min   = 1
      max   = 2
    }
    ps {
      group = "ps2"
      min   = 1
      max   = 2
    }
  }
}

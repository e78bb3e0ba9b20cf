vc "a" {
  gpus = {
    v100 = 8
    v100 = 4
  }
}

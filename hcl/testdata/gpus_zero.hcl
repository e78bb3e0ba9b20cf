vc "a" {
  gpus = { v100 = 4, k80 = 0 }
}

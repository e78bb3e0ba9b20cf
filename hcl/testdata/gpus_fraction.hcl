vc "a" {
  gpus = { v100 = 1.5 }
}

vc "a" {
  gpus = { v100 = -2 }
}

vc "a" {
  gpus = { v100 = "8" }
}

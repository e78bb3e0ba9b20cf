vc "a" {
  gpus = { V100 = 8 }
}

vc "a" {
  gpus = 8
}

vc "a" {
  gpus      = { v100 = 8 }
  placement = "tuned"
}

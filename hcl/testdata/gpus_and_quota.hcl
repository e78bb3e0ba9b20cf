vc "a" {
  quota = { "g" = 1 }
  gpus  = { v100 = 8 }
}

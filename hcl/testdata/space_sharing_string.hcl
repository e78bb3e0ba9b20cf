vc "a" {
  gpus          = { v100 = 2 }
  space_sharing = "yes"
}

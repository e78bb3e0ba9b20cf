vc "research" {
  gpus          = { v100 = 8 }
  reserve_after = "-10m"
}

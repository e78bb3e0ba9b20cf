placement = "tune"
profiles  = "profiles.json"

vc "research" {
  gpus      = { v100 = 8 }
  placement = "opt"
}

vc "prod" {
  gpus = { v100 = 8 }
}

placement = "tune"
profiles  = "profiles.json"
learn_profiles = true

vc "research" {
  gpus      = { v100 = 8 }
  placement = "opt"
}

vc "prod" {
  gpus = { v100 = 8 }
}

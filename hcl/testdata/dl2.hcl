round_seconds = 1200
vc "ml" {
  gpus   = { v100 = 8 }
  policy = "dl2"
  dl2 {
    model = "models/dl2.json"
  }
}
vc "base" {
  gpus   = { v100 = 4 }
  policy = "dl2"
  dl2 {
    sizer = "optimus"
  }
}
vc "plain" {
  gpus   = { v100 = 4 }
  policy = "dl2"
}

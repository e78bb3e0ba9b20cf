job "resnet" {
  type = "batch"
  policy {
    vc       = "research"
    user     = "alice"
    priority = "opportunistic"
    weight   = 2
    steps    = 200000
    model    = "resnet50"
    profile  = "res50"
    slo      = "12h"
  }
  group "train" {}
}

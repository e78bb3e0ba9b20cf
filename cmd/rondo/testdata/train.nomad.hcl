job "resnet" {
  type = "batch"

  policy {
    vc       = "research"
    user     = "alice"
    priority = "guaranteed"
    weight   = 2
    steps    = 200000
    model    = "ResNet-50 (batch size 64)"
    slo      = "12h"
  }

  group "train" {
    task "trainer" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}

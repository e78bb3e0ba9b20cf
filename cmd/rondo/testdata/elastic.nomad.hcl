job "trainer" {
  type = "batch"

  policy {
    vc    = "research"
    model = "ResNet-50 (batch size 64)"
    elastic {
      min = 1
      max = 4
    }
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

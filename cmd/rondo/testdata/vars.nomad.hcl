variable "vc" {
  type = string
}

variable "gpus" {
  type    = number
  default = 1
}

job "vars" {
  type = "batch"
  meta = {
    "rondo.vc"    = var.vc
    "rondo.model" = "ResNet-50 (batch size 64)"
  }

  group "train" {
    task "trainer" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        device "nvidia/gpu" {
          count = var.gpus
        }
      }
    }
  }
}

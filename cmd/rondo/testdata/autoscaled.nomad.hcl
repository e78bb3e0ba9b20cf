# The Nomad Autoscaler targets the GPU group (enabled, with a policy), and
# rondo.elastic disagrees with the block: both are warned about.
job "autoscaled" {
  type = "service"
  meta = {
    "rondo.vc"      = "research"
    "rondo.elastic" = "1:4"
  }

  group "train" {
    count = 1

    scaling {
      enabled = true
      min     = 1
      max     = 8

      policy {
        cooldown = "1m"
        check "busy" {
          source = "prometheus"
          query  = "avg(gpu_busy)"
          strategy "target-value" {
            target = 80
          }
        }
      }
    }

    task "trainer" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}

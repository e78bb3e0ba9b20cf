# Elastic bounds from Nomad's own scaling block: no rondo.elastic meta, so
# the job runs 2 to 6 workers of one GPU each.
job "scaled" {
  type = "batch"
  meta = {
    "rondo.vc" = "research"
  }

  group "train" {
    count = 2

    scaling {
      min = 2
      max = 6
    }

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

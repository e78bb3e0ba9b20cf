# A DL2 two-role job: up to 8 GPU workers and up to 8 CPU parameter servers.
job "dl2-resnet" {
  type = "batch"
  policy {
    vc    = "research"
    model = "resnet-50"
    elastic {
      min        = 1     # workers, as today
      max        = 8
      epochs     = 30    # total epochs to train
      batch_size = 256   # total batch size, split over the workers
      scaling    = "live"
      ps {
        group = "ps"     # the task group holding the PS tasks
        min   = 1
        max   = 8
      }
    }
  }
  group "worker" {
    task "train" {
      driver = "docker"
    }
  }
  group "ps" {
    task "ps" {
      driver = "docker"
    }
  }
}

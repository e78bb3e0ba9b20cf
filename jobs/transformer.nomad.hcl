# A fake training job (rondo-trainer) that opted in to Rondo: the meta keys
# carry its policy; it names no node pool, so it waits in "default" until
# Rondo admits it. `rondo demo` submits it with -var trainer=... and
# -var checkpoint_root=...
variable "trainer" {
  type    = string
  default = "rondo-trainer"
}

variable "lease_addr" {
  type        = string
  default     = "127.0.0.1:4701"
  description = "the allocator's lease/progress API (rondo agent -lease-addr)"
}

variable "checkpoint_root" {
  type    = string
  default = "/tmp/rondo-checkpoints"
}

job "transformer" {
  type = "batch"

  meta = {
    "rondo.vc"    = "research"
    "rondo.user"  = "alice"
    "rondo.model" = "Transformer (batch size 32)"
    "rondo.steps" = "3000"
  }

  group "train" {
    restart {
      attempts = 1
      mode     = "fail"
    }

    task "train" {
      driver       = "raw_exec"
      kill_timeout = "20s"

      config {
        command = var.trainer
      }

      # The lease API authenticates the task with this workload identity.
      identity {
        name = "rondo"
        aud  = ["rondo-lease"]
        file = true
      }

      env {
        # A host path: the alloc dir is lost when Rondo moves the job.
        RONDO_CHECKPOINT_DIR = "${var.checkpoint_root}/${NOMAD_JOB_ID}"
        RONDO_GPU_TYPE       = "${meta.rondo_gpu_type}"
        RONDO_LEASE_ADDR     = var.lease_addr
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 2
        }
      }
    }
  }
}

# A real PyTorch job under Rondo: jobs/python/train_mlp.py trains a small
# MLP on CPU (Debian's python3-torch, /usr/bin/python3) on a deterministic
# synthetic regression, reports progress and its measured steps/s to the
# lease API (the rondo Python package beside it), checkpoints model,
# optimizer, step and RNG state to RONDO_CHECKPOINT_DIR when Rondo suspends
# it (SIGTERM) and every 500 steps, and resumes from there. It asks for one
# GPU (a fake one in the demo) only so that Rondo schedules it; it computes
# on the CPU. `rondo demo` submits it with the other jobs
# (-var trainer=... -var checkpoint_root=... -var lease_addr=...).
variable "python" {
  type        = string
  default     = "/usr/bin/python3"
  description = "an interpreter with torch (Debian: python3-torch; a pyenv python3 on PATH may lack it)"
}

variable "python_dir" {
  type        = string
  default     = ""
  description = "the directory holding train_mlp.py and the rondo package; default jobs/python under the directory `nomad job run` runs in"
}

variable "steps" {
  type    = number
  default = 3000
}

variable "report_interval" {
  type        = string
  default     = "2s"
  description = "how often the job reports progress and asks for its lease (RONDO_REPORT_INTERVAL)"
}

variable "debug" {
  type        = string
  default     = "0"
  description = "1: the job logs every progress report it sends (RONDO_DEBUG)"
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

variable "trainer" {
  type        = string
  default     = ""
  description = "unused: rondo demo passes it to every job of jobs/"
}

locals {
  dir = var.python_dir != "" ? var.python_dir : abspath("jobs/python")
}

job "pytorch-cpu" {
  type = "batch"

  meta = {
    "rondo.vc"    = "research"
    "rondo.user"  = "alice"
    "rondo.model" = "MLP (synthetic regression, CPU)"
    "rondo.steps" = "${var.steps}"
  }

  group "train" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "train" {
      driver = "raw_exec"
      # Rondo suspends the job by stopping the task: SIGTERM, then the job
      # has kill_timeout to checkpoint and exit 0.
      kill_signal  = "SIGTERM"
      kill_timeout = "20s"

      config {
        command = var.python
        args    = ["-u", "${local.dir}/train_mlp.py"]
      }

      # The lease API authenticates the task with this workload identity.
      identity {
        name = "rondo"
        aud  = ["rondo-lease"]
        file = true
      }

      env {
        # A host path: the alloc dir is lost when Rondo moves the job.
        RONDO_CHECKPOINT_DIR  = "${var.checkpoint_root}/${NOMAD_JOB_ID}"
        RONDO_GPU_TYPE        = "${meta.rondo_gpu_type}"
        RONDO_LEASE_ADDR      = var.lease_addr
        RONDO_REPORT_INTERVAL = var.report_interval
        RONDO_TORCH_THREADS   = "1"
        RONDO_DEBUG           = var.debug
      }

      resources {
        cpu    = 500
        memory = 512

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}

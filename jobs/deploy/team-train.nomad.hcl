# A team's training job as it runs under a Rondo deployed with
# jobs/deploy/rondo-agent.nomad.hcl: it opts in with rondo.* meta, names no node
# pool (it waits until Rondo admits it) and finds the lease API through
# Nomad's service discovery (the agents' "rondo-lease" service) with a
# template instead of a fixed address. docs/operations.md submits it.
#
#   nomad job run -var-file=team-train.vars.hcl jobs/deploy/team-train.nomad.hcl

variable "command" {
  type        = string
  default     = "rondo-trainer"
  description = "the training program (here Rondo's fake trainer)"
}

variable "vc" {
  type    = string
  default = "research"
}

variable "steps" {
  type    = string
  default = "20000"
}

job "team-train" {
  type = "batch"

  meta = {
    "rondo.vc"    = var.vc
    "rondo.user"  = "alice"
    "rondo.model" = "ResNet-18 (batch size 64)"
    "rondo.steps" = var.steps
  }

  group "train" {
    restart {
      attempts = 1
      mode     = "fail"
    }

    task "train" {
      driver       = "raw_exec"
      kill_timeout = "20s" # time to checkpoint when Rondo suspends it

      config {
        command = var.command
      }

      # The lease API authenticates the task with this identity.
      identity {
        name = "rondo"
        aud  = ["rondo-lease"]
        file = true
        ttl  = "1h" # Nomad renews the file
      }

      # RONDO_LEASE_ADDR: one of the agents' lease APIs, chosen stably per
      # allocation; a standby forwards to the leader, so any instance
      # serves. noop: a new agent allocation must not restart training
      # (the trainer logs and ignores lease errors meanwhile); Nomad
      # re-renders the file, and the lease client re-reads it on every call
      # (RONDO_LEASE_ADDR_FILE, below), so the reports follow the agents
      # when an upgrade or a rollback replaces them all.
      template {
        data        = <<-EOT
          {{- range nomadService 1 (env "NOMAD_ALLOC_ID") "rondo-lease" }}
          RONDO_LEASE_ADDR=http://{{ .Address }}:{{ .Port }}
          {{- end }}
        EOT
        destination = "local/rondo-lease.env"
        env         = true
        change_mode = "noop"
      }

      # RONDO_CHECKPOINT_DIR comes from the cluster config's
      # tasks { checkpoint_root } when Rondo admits the job.
      env {
        RONDO_GPU_TYPE        = "${meta.rondo_gpu_type}" # what the fake trainer reads
        RONDO_LEASE_ADDR_FILE = "${NOMAD_TASK_DIR}/rondo-lease.env"
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}

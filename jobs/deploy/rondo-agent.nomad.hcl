# Rondo's allocator (`rondo agent`) as a Nomad service job: two instances
# behind the leader lock (a Nomad variable lock); one schedules, the other
# waits and takes over when the leader's lock expires. docs/operations.md
# walks through deploying it.
#
#   nomad acl policy apply -namespace default -job rondo-agent \
#     rondo-allocator jobs/acl/rondo-allocator.policy.hcl
#   nomad var put -force nomad/jobs/rondo-agent cluster_hcl=@cluster.hcl
#   nomad job run -var-file=rondo-agent.vars.hcl jobs/deploy/rondo-agent.nomad.hcl
#
# Its Nomad token is the task's workload identity (identity { env = true }):
# the policy applied with -job is attached to it, so no secret is handed out.

variable "rondo_binary" {
  type        = string
  default     = "/usr/local/bin/rondo"
  description = "path of the rondo binary on the agent hosts; ignored when artifact_url is set"
}

variable "artifact_url" {
  type        = string
  default     = ""
  description = "a URL (go-getter) of an archive holding rondo, fetched into local/bin instead of rondo_binary"
}

variable "namespace" {
  type        = string
  default     = "default"
  description = "the namespace of this job, of the jobs Rondo schedules and of its state variables"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "node_pool" {
  type        = string
  default     = "default"
  description = "where the agents run: not the GPU pool, whose nodes Rondo hands out"
}

variable "driver" {
  type        = string
  default     = "raw_exec"
  description = "raw_exec or exec (the binary needs libClp/libCbc on the host)"
}

variable "count" {
  type        = number
  default     = 2
  description = "instances: one leader, the others standbys"
}

variable "distinct_hosts" {
  type        = bool
  default     = true
  description = "place the instances on different nodes (needs count nodes in node_pool)"
}

variable "nomad_addr" {
  type = string
  # The Task API: the local Nomad agent's socket, which accepts the task's
  # workload identity. An http(s):// address of the servers works too.
  default     = "unix://$${NOMAD_SECRETS_DIR}/api.sock"
  description = "the Nomad API the agent uses"
}

variable "leader_ttl" {
  type        = string
  default     = "15s"
  description = "TTL of the leader lock; a standby takes over within TTL + 15 s (Nomad's lock delay)"
}

variable "extra_args" {
  type        = list(string)
  default     = []
  description = "more rondo agent flags (e.g. [\"-pool\", \"gpu\"])"
}

job "rondo-agent" {
  namespace   = var.namespace
  type        = "service"
  datacenters = var.datacenters
  node_pool   = var.node_pool

  dynamic "constraint" {
    for_each = var.distinct_hosts ? [1] : []
    content {
      operator = "distinct_hosts"
      value    = "true"
    }
  }

  # One instance at a time: the standby keeps scheduling going while the
  # other is replaced (an upgrade costs at most one failover).
  update {
    max_parallel     = 1
    min_healthy_time = "10s"
    healthy_deadline = "3m"
    auto_revert      = true
  }

  group "agent" {
    count = var.count

    network {
      port "http" {}  # status API, /metrics, /v1/health
      port "lease" {} # lease/progress API for training tasks
    }

    # A crashed instance comes back after the standby has taken the lock
    # (TTL + 15 s lock delay), so it does not race the standby for it.
    restart {
      attempts = 3
      interval = "10m"
      delay    = "45s"
      mode     = "delay"
    }

    # The status API of every instance; a standby answers too (leader=false
    # and the leader's address).
    service {
      name     = "rondo"
      provider = "nomad"
      port     = "http"

      check {
        type     = "http"
        path     = "/v1/health"
        interval = "5s"
        timeout  = "2s"
      }
    }

    # The lease API, found by training jobs with a template
    # ({{ range nomadService "rondo-lease" }}, jobs/deploy/team-train.nomad.hcl).
    # Nomad's own service discovery lists failing instances too, so a
    # standby forwards lease calls to the leader; the check shows which
    # instance leads (503 on a standby) and is left out of deployments.
    service {
      name     = "rondo-lease"
      provider = "nomad"
      port     = "lease"

      check {
        name      = "leader"
        type      = "http"
        port      = "http"
        path      = "/v1/health?leader"
        interval  = "5s"
        timeout   = "2s"
        on_update = "ignore"
      }
    }

    task "agent" {
      driver = var.driver

      # A SIGINT lets the leader release its lock at once.
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = var.artifact_url == "" ? var.rondo_binary : "local/bin/rondo"
        args = concat([
          "agent",
          "-config", "$${NOMAD_TASK_DIR}/rondo",
          "-address", var.nomad_addr,
          "-namespace", var.namespace,
          "-bind-addr", "$${NOMAD_ADDR_http}",
          "-lease-addr", "$${NOMAD_ADDR_lease}",
          "-advertise", "http://$${NOMAD_ADDR_http}",
          "-leader-ttl", var.leader_ttl,
        ], var.extra_args)
      }

      dynamic "artifact" {
        for_each = var.artifact_url == "" ? [] : [var.artifact_url]
        content {
          source      = artifact.value
          destination = "local/bin"
        }
      }

      # NOMAD_TOKEN = this task's workload identity, which carries the
      # rondo-allocator policy (nomad acl policy apply -job rondo-agent).
      identity {
        env = true
      }

      # The cluster config from the Nomad variable nomad/jobs/rondo-agent
      # (item cluster_hcl), readable by this job's identity without any
      # policy. A change is applied with SIGHUP (the agent reloads it; a
      # config that does not validate is logged and the old one kept).
      template {
        data          = "{{ with nomadVar \"nomad/jobs/rondo-agent\" }}{{ .cluster_hcl }}{{ end }}\n"
        destination   = "local/rondo/cluster.hcl"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}

# Minimal ACL policy for the token of `rondo agent` (the allocator).
#
#   nomad acl policy apply -description "Rondo allocator" rondo-allocator rondo-allocator.policy.hcl
#   nomad acl token create -name rondo-allocator -policy rondo-allocator
#
# Namespaces. The agent keeps its state in its own namespace ("default", or
# nomad { namespace }) and schedules the jobs of that namespace, of every
# namespace a VC lists (vc "x" { namespaces = [...] }), or of all of them
# with nomad { namespace = "*" }. The `namespace "*"` block below grants the
# job capabilities in every namespace, which is what namespace = "*" needs.
# Least privilege: when the agent watches only the VCs' namespaces, replace
# it with one block per namespace, each with the same capabilities and no
# variables block:
#
#   namespace "team-a" {
#     capabilities = ["list-jobs", "read-job", "submit-job", "scale-job", "read-job-scaling"]
#   }
#
# A namespace the token cannot read is not watched (Nomad leaves it out of
# the `*` listings). An exact-name rule replaces a glob rule for that
# namespace rather than adding to it: the "default" block below must keep
# the job capabilities beside its variables.

namespace "*" {
  capabilities = ["list-jobs", "read-job", "submit-job", "scale-job", "read-job-scaling"]
}

namespace "default" {
  # Observe and rewrite the jobs it schedules: register with EnforceIndex
  # (submit-job), read jobs, their allocations and evaluations (read-job,
  # list-jobs; also what the event stream's Job/Allocation/Evaluation topics
  # need), and suspend or resume by scaling groups (scale-job,
  # read-job-scaling).
  capabilities = ["list-jobs", "read-job", "submit-job", "scale-job", "read-job-scaling"]

  # Durable allocator state and the leader lock, and nothing else. They live
  # in the agent's home namespace: for an agent whose home is not "default"
  # (nomad { namespace }, -namespace), move this variables block to that
  # namespace's block (docs/operations.md, step 2).
  variables {
    path "rondo/*" {
      capabilities = ["read", "write", "list", "destroy"]
    }
  }
}

# Nodes, their GPUs (device instances) and health; the event stream's Node topic.
node {
  policy = "read"
}

# Read the scheduler configuration to check that preemption is enabled.
# Setting it (SchedulerSetConfiguration) needs "write"; an operator does that
# once (`nomad operator scheduler set-config -preempt-batch-scheduler=true`)
# so the allocator's token does not carry cluster-wide write power.
operator {
  policy = "read"
}

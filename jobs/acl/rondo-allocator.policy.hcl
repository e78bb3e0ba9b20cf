# Minimal ACL policy for the token of `rondo agent` (the allocator).
#
#   nomad acl policy apply -description "Rondo allocator" rondo-allocator rondo-allocator.policy.hcl
#   nomad acl token create -name rondo-allocator -policy rondo-allocator
#
# Repeat the namespace block (without the variables block) for every other
# namespace Rondo manages. A `namespace "*"` rule would be shorter but grants
# those capabilities in namespaces Rondo does not manage, and an exact-name
# rule replaces a glob rule for that namespace rather than adding to it.

namespace "default" {
  # Observe and rewrite the jobs it schedules: register with EnforceIndex
  # (submit-job), read jobs, their allocations and evaluations (read-job,
  # list-jobs; also what the event stream's Job/Allocation/Evaluation topics
  # need), and suspend or resume by scaling groups (scale-job,
  # read-job-scaling).
  capabilities = ["list-jobs", "read-job", "submit-job", "scale-job", "read-job-scaling"]

  # Durable allocator state and the leader lock, and nothing else.
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

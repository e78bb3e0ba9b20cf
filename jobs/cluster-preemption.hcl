# The demo cluster with preemption that respects the work (#21,
# hcl/README.md "Preemption that respects the work"): the same three
# clients as jobs/cluster.hcl, 4 GPUs each, no cells, one virtual cluster.
#
# A started job keeps its GPUs for at least 2 minutes (6 rounds); when a
# round must stop one for a waiting job, it picks the one that loses least
# and gives it a round's notice (its lease answer says checkpoint_now); a
# gang waiting 1 minute gets GPUs reserved for it.
agent {
  round = "20s"
}

nomad {
  address = "http://127.0.0.1:4646" # `rondo demo` passes the real address with -address
}

# The top level's: the default of VCs that set none, and the opportunistic
# engine's (jobs with priority = "opportunistic").
min_runtime      = "2m"
checkpoint_aware = true
reserve_after    = "1m"

vc "research" {
  policy = "max_min_fairness_perf"
  # min_runtime = "0s"       # a VC may override each attribute on its own
}

# The demo cluster: three Nomad clients in node pool "rondo", one per GPU
# type, 4 GPUs each (the fake device plugin), one virtual cluster.
agent {
  round = "20s"
}

nomad {
  address = "http://127.0.0.1:4646" # `rondo demo` passes the real address with -address
}

cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 4
  node  = true
}
cell_type "p100" {
  gpu_type = "p100"
}
cell_type "p100-node" {
  child = "p100"
  count = 4
  node  = true
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 4
  node  = true
}

cell "v100-node" "v100-0" {
  nomad_node = "v100-0"
}
cell "p100-node" "p100-0" {
  nomad_node = "p100-0"
}
cell "k80-node" "k80-0" {
  nomad_node = "k80-0"
}

# Preemption that respects the work (#21, docs/preemption.md): a started
# job keeps its GPUs for at least 2 minutes (6 rounds) instead of being
# moved almost every round; a round that must stop one for a waiting job
# stops the one that loses least and gives it a round's notice (its lease
# answer says checkpoint_now); a gang waiting 2 minutes gets GPUs reserved.
min_runtime      = "2m"
checkpoint_aware = true
reserve_after    = "2m"

vc "research" {
  quota  = { "v100-node" = 1, "p100-node" = 1, "k80-node" = 1 }
  policy = "max_min_fairness_perf"
}

# The demo cluster with space sharing (`rondo demo -space-sharing`): the
# same three clients, every GPU also advertised as two MPS shares; no
# cells, one virtual cluster whose packed policy pairs jobs on one GPU
# when Gavel measured the pair (docs/space-sharing.md).
agent {
  round = "20s"
}

nomad {
  address = "http://127.0.0.1:4646" # `rondo demo` passes the real address with -address
}

vc "research" {
  policy        = "max_min_fairness_packed"
  space_sharing = true
}

tasks {
  lease_address = "10.0.0.5"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

round_seconds = 60

tasks {
  checkpoint_root = "/mnt/shared/rondo/"
  lease_address   = "http://10.0.0.5:4701"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

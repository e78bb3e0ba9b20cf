tasks {
  checkpoint_root = "/mnt/ckpt"
  lease_address   = "http://0.0.0.0:4701"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

tasks {
  checkpoint_root = "/mnt/a"
}

tasks {
  checkpoint_root = "/mnt/b"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

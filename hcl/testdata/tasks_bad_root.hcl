tasks {
  checkpoint_root = "ckpt"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

vc "a" {
  policy = "fifo"
}
vc "b" {
  policy = "max_min_fairness_perf"
}

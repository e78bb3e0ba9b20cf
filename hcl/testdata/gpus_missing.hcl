vc "a" {
  gpus = { v100 = 2 }
}
vc "b" {
  policy = "fifo"
}

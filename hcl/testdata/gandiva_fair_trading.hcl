vc "research" {
  policy  = "fifo"
  trading = true
}

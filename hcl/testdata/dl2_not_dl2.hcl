vc "ml" {
  policy = "fifo"
  dl2 {
    sizer = "drf"
  }
}

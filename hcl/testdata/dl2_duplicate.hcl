vc "ml" {
  policy = "dl2"
  dl2 {
    sizer = "drf"
  }
  dl2 {
    sizer = "fifo"
  }
}

vc "ml" {
  policy = "dl2"
  dl2 {
    sizer = "dl2"
  }
}

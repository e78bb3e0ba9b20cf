vc "ml" {
  policy = "dl2"
  dl2 {
    sizer = "drf"
    model = "models/dl2.json"
  }
}

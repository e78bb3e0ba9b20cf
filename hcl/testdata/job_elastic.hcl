job "trainer" {
  type = "batch"
  policy {
    vc    = "research"
    model = "ResNet-50 (batch size 64)"
    elastic {
      min = 1
      max = 4
    }
  }
  group "train" {}
}

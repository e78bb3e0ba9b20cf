policy {
  vc       = "research"
  priority = "urgent"
}

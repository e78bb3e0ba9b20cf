round_seconds = 360
vc "research" {
  policy  = "gandiva_fair"
  quantum = "5m"
}

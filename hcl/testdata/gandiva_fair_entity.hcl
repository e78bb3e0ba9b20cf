vc "research" {
  policy = "gandiva_fair"
  user "alice" { tickets = 2 }
  entity "team-a" { weight = 2 }
}

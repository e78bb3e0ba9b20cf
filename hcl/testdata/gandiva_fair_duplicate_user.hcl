vc "research" {
  policy = "gandiva_fair"
  user "alice" { tickets = 200 }
  user "bob" {}
  user "alice" { tickets = 50 }
}

# Gandiva-fair (#15): a VC whose users share its GPUs of each generation by
# tickets and trade shares between generations; beside it an ordinary VC.
round_seconds = 360

vc "research" {
  gpus           = { v100 = 8, k80 = 8 }
  policy         = "gandiva_fair"
  trading        = true
  quantum        = "12m"  # two rounds
  max_migrations = 4
  trade_margin   = 0.05
  user "alice" {
    tickets = 200
  }
  user "bob" {}           # DefaultTickets (100)
}

vc "prod" {
  gpus   = { v100 = 2 }
  policy = "fifo"
}

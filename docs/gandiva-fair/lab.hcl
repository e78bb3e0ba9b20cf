# One gandiva_fair VC over the whole cluster, trading on; every user at
# the default 100 tickets (docs/gandiva-fair.md's speed benchmark).
agent {
  round = "6m"
}
vc "lab" {
  policy  = "gandiva_fair"
  trading = true
}

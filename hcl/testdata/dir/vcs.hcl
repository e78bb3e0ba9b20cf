vc "vision" {
  quota  = { "k80-rack/k80-node" = 1 }
  policy = "las"
  weight = 2
  entity "team-a" {
    weight = 3
    policy = "fifo"
  }
  entity "team-b" {}
}
vc "nlp" {
  quota = { "k80-rack/k80" = 4 }
}

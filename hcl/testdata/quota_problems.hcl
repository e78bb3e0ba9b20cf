cell_type "g" { gpu_type = "x" }
cell_type "pair" {
  child = "g"
  count = 2
}
cell_type "node" {
  child = "pair"
  count = 2
  node  = true
}
cell_type "big" {
  child = "pair"
  count = 4
  node  = true
}
cell "node" "n0" { nomad_node = "a" }
cell "node" "n1" { nomad_node = "b" }
cell "big" "b0" {
  nomad_node = "c"
  pinned = "v"
}
vc "u" {
  quota = { "pair" = 1, "node/g" = 9, "zz" = 1, "big/node" = 1 }
}
vc "v" {
  quota = { "node" = 1, "big/pair" = 1 }
}
vc "w" {
  quota = { "node/pair" = 3 }
  pinned = ["n1"]
}

cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 1
  node  = true
}
cell_type "v100-rack" {
  child = "v100-node"
  count = 2
}
cell "v100-rack" "east" {          # the first two nodes of pool gpu-east, by name
  node_pool = "gpu-east"
}
cell "v100-node" "big" {           # the first node of class dgx in pool gpu-west
  node_pool  = "gpu-west"
  node_class = "dgx"
}
cell "v100-node" "any-dgx" {       # the next dgx node, whatever its pool
  node_class = "dgx"
}
vc "research" {
  quota = { "v100-rack" = 1, "v100-node/v100-node" = 2 }
}

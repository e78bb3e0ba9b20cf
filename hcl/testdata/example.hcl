cell_type "v100" {                 # a leaf: one GPU
  gpu_type = "v100"
}
cell_type "v100-pair" {
  child = "v100"
  count = 2
}
cell_type "v100-quad" {
  child = "v100-pair"
  count = 2
}
cell_type "v100-node" {
  child = "v100-quad"
  count = 2
  node  = true
}
cell "v100-node" "n0" {            # a physical top-level cell
  nomad_node = "gpu-node-0"
}
cell "v100-node" "n1" {
  nomad_node = "gpu-node-1"
}
vc "research" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_perf"
}
vc "product" {
  quota = { "v100" = 8 }
}

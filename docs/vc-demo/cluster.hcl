# Cluster for the virtual-cluster demonstration (docs/virtual-clusters.md):
# 16 nodes of 8 V100s (128 GPUs) and four VCs of unequal quota, in whole
# nodes, summing to the cluster.
cell_type "v100" {
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
cell "v100-node" "n0" {
  nomad_node = "gpu-node-0"
}
cell "v100-node" "n1" {
  nomad_node = "gpu-node-1"
}
cell "v100-node" "n2" {
  nomad_node = "gpu-node-2"
}
cell "v100-node" "n3" {
  nomad_node = "gpu-node-3"
}
cell "v100-node" "n4" {
  nomad_node = "gpu-node-4"
}
cell "v100-node" "n5" {
  nomad_node = "gpu-node-5"
}
cell "v100-node" "n6" {
  nomad_node = "gpu-node-6"
}
cell "v100-node" "n7" {
  nomad_node = "gpu-node-7"
}
cell "v100-node" "n8" {
  nomad_node = "gpu-node-8"
}
cell "v100-node" "n9" {
  nomad_node = "gpu-node-9"
}
cell "v100-node" "n10" {
  nomad_node = "gpu-node-10"
}
cell "v100-node" "n11" {
  nomad_node = "gpu-node-11"
}
cell "v100-node" "n12" {
  nomad_node = "gpu-node-12"
}
cell "v100-node" "n13" {
  nomad_node = "gpu-node-13"
}
cell "v100-node" "n14" {
  nomad_node = "gpu-node-14"
}
cell "v100-node" "n15" {
  nomad_node = "gpu-node-15"
}
vc "prod" {
  quota  = { "v100-node" = 7 }
  policy = "fifo"
}
vc "research" {
  quota  = { "v100-node" = 5 }
  policy = "fifo"
}
vc "dev" {
  quota  = { "v100-node" = 3 }
  policy = "fifo"
}
vc "intern" {
  quota  = { "v100-node" = 1 }
  policy = "fifo"
}

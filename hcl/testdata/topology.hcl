# Cells of pool "gpu" derived from the device plugin's topology; a written
# cell (n0) beside them, and quotas on derived types no node needs to
# provide at load.
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 4
  node  = true
}
cell "k80-node" "n0" {
  nomad_node = "k80-host"
}
cells_from_topology {
  node_pool = "gpu"
}
cells_from_topology {
  node_pool  = "gpu"
  node_class = "dgx"
}
vc "research" {
  quota = { "v100-node" = 1, "v100-pcie-switch" = 2 }
}
vc "prod" {
  quota = { "k80-node" = 1 }
}

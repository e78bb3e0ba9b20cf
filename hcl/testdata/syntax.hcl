cell_type "g" {
  gpu_type = "a100
}

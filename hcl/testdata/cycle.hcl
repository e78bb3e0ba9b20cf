cell_type "a" {
  child = "b"
  count = 2
}
cell_type "b" {
  child = "a"
  count = 2
}

cell_type "g" {
}

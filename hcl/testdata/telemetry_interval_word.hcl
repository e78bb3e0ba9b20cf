telemetry {
  collection_interval = "soon"
}

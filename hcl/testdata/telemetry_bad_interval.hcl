telemetry {
  collection_interval = "0s"
}

telemetry {
  statsd_address = "localhost"
}

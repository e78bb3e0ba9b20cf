telemetry {
  statsd_address = "localhost:http"
}

telemetry {
  statsd = "h:8125"
}

telemetry {
  disable_hostname = true
}

telemetry {
  statsd_address = "h:8125"
}

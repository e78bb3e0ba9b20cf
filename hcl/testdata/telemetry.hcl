telemetry {
  prometheus_metrics  = true
  statsd_address      = "127.0.0.1:8125"
  disable_hostname    = true
  collection_interval = "10s"
}

vc "default" {
  policy = "fifo"
}

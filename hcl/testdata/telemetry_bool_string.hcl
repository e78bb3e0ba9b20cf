telemetry {
  prometheus_metrics = "yes"
}

package hcl

import (
	"testing"
	"time"
)

func TestTelemetryBlock(t *testing.T) {
	cfg, diags := LoadPath("testdata/telemetry.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	want := Telemetry{PrometheusMetrics: true, StatsdAddress: "127.0.0.1:8125", DisableHostname: true, CollectionInterval: 10 * time.Second}
	got := cfg.Telemetry
	got.Range = want.Range
	if got != want {
		t.Errorf("telemetry = %+v, want %+v", got, want)
	}
	// No block: Prometheus on, no statsd, the host name kept, 1 s.
	cfg, diags = LoadPath("testdata/example.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	got = cfg.Telemetry
	if got != (Telemetry{PrometheusMetrics: true, CollectionInterval: time.Second}) {
		t.Errorf("example: telemetry = %+v", got)
	}
	cfg, diags = Parse(Source{Name: "off.hcl", Src: []byte("telemetry {\n  prometheus_metrics = false\n}\n")})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Telemetry.PrometheusMetrics {
		t.Error("prometheus_metrics = false kept /metrics on")
	}
	// Malformed blocks: TestMalformed.
}

func TestCheckStatsdAddress(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8125", "statsd.example.com:8125", "[fd00::1]:8125"} {
		if err := CheckStatsdAddress(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "h", ":8125", "h:0", "h:70000", "h:x", "udp://h:8125"} {
		if err := CheckStatsdAddress(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

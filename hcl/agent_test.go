package hcl

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

func TestAgentBlocks(t *testing.T) {
	cfg, diags := Parse(Source{Name: "/etc/rondo/a.hcl", Src: []byte(`
nomad {
  address = "https://nomad:4646"
  ca_file = "ca.pem"
  cert_file = "/abs/cli.pem"
  key_file = "cli-key.pem"
  tls_server_name = "server.global.nomad"
}
agent {
  bind_addr = "0.0.0.0:4700"
  lease_addr = ":4701"
  advertise = "https://rondo:4700"
  pool = "gpu"
  log_level = "debug"
  log_json = true
  round = "6m"
}
tls {
  cert_file = "agent.pem"
  key_file = "agent-key.pem"
}
high_availability {
  lock_path = "rondo/leader"
  lock_ttl = "30s"
  lease_file = "run/leader-lease"
}
`)})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if len(diags) != 0 {
		t.Fatalf("warnings: %s", FormatDiagnostics(diags))
	}
	n := cfg.Nomad
	if n.CAFile != filepath.FromSlash("/etc/rondo/ca.pem") || n.CertFile != "/abs/cli.pem" || n.KeyFile != "/etc/rondo/cli-key.pem" ||
		n.TLSServerName != "server.global.nomad" || n.Address != "https://nomad:4646" {
		t.Errorf("nomad = %+v", n)
	}
	a := cfg.Agent
	if a.BindAddr != "0.0.0.0:4700" || a.LeaseAddr != ":4701" || a.Pool != "gpu" || a.LogLevel != "debug" || !a.LogJSON ||
		a.Round != 6*time.Minute || cfg.RoundSeconds != 360 || a.Advertise != "https://rondo:4700" {
		t.Errorf("agent = %+v, round_seconds %d", a, cfg.RoundSeconds)
	}
	if !cfg.TLS.Enabled() || cfg.TLS.KeyFile != "/etc/rondo/agent-key.pem" {
		t.Errorf("tls = %+v", cfg.TLS)
	}
	if cfg.HA.LockPath != "rondo/leader" || cfg.HA.LockTTL != 30*time.Second || cfg.HA.LeaseFile != filepath.FromSlash("/etc/rondo/run/leader-lease") {
		t.Errorf("ha = %+v", cfg.HA)
	}
}

func TestRoundSecondsDeprecated(t *testing.T) {
	cfg, diags := Parse(Source{Name: "a.hcl", Src: []byte("round_seconds = 360\n")})
	if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning ||
		!strings.Contains(FormatDiagnostics(diags), `a.hcl:1:1: Deprecated round_seconds; round_seconds is deprecated; write agent { round = "6m" }`) {
		t.Fatalf("diags = %q", FormatDiagnostics(diags))
	}
	if cfg.RoundSeconds != 360 {
		t.Errorf("round_seconds %d", cfg.RoundSeconds)
	}
}

func TestAgentBlockErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"round_seconds = 60\nagent {\n  round = \"2m\"\n}\n", `a.hcl:1:1: Conflicting round`},
		{"agent {\n  round = \"90ms\"\n}\n", `a.hcl:2:11: Invalid round; round = 90ms must be a whole number of seconds`},
		{"agent {\n  round = \"soon\"\n}\n", `a.hcl:2:11: Invalid round; round = "soon" must be a positive duration`},
		{"agent {\n  bind_addr = \"4700\"\n}\n", `a.hcl:2:15: Invalid bind_addr`},
		{"agent {\n  log_level = \"loud\"\n}\n", `a.hcl:2:15: Invalid log_level`},
		{"agent {}\nagent {}\n", `a.hcl:2:1: Duplicate agent block`},
		{"tls {\n  cert_file = \"a.pem\"\n}\n", `a.hcl:1:1: Incomplete tls block`},
		{"tls {\n  cert_file = \"a.pem\"\n  key_file = \"k.pem\"\n  verify_https_client = true\n}\n", `a.hcl:4:25: Invalid verify_https_client`},
		{"high_availability {\n  lock_ttl = \"5s\"\n}\n", `a.hcl:2:14: Invalid lock_ttl`},
		{"high_availability {\n  lease_file = \" \"\n}\n", `a.hcl:2:16: Invalid lease_file`},
		{"nomad {\n  cert_file = \"c.pem\"\n}\n", `a.hcl:1:1: Incomplete client certificate`},
		{"nomad {\n  address = \"nomad:4646\"\n}\n", `a.hcl:2:13: Invalid address`},
		{"nomad {}\nnomad {}\n", `a.hcl:2:1: Duplicate nomad block`},
	} {
		_, diags := Parse(Source{Name: "a.hcl", Src: []byte(tc.src)})
		if got := FormatDiagnostics(diags); !diags.HasErrors() || !strings.Contains(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
}

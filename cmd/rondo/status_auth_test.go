package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/telemetry"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// TestStatusTokenAndLeader: rondo status sends -token (else NOMAD_TOKEN) and
// prints whether the agent leads.
func TestStatusTokenAndLeader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Nomad-Token") != "secret" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "a Nomad ACL token is required"})
			return
		}
		json.NewEncoder(w).Encode(agent.Status{Cluster: "c", Policy: "fifo", LeaderAddr: "http://10.0.0.2:4700"})
	}))
	defer srv.Close()
	t.Setenv("NOMAD_TOKEN", "")
	if code, _, errOut := runCaptured(t, "status", "-rondo-addr", srv.URL); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("no token: %d %s", code, errOut)
	}
	code, out, errOut := runCaptured(t, "status", "-rondo-addr", srv.URL, "-token", "secret")
	if code != 0 || !strings.Contains(out, "Leader:     standby; leader at http://10.0.0.2:4700") {
		t.Errorf("-token: %d %s\n%s", code, errOut, out)
	}
	t.Setenv("NOMAD_TOKEN", "secret")
	if code, out, errOut := runCaptured(t, "status", "-rondo-addr", srv.URL); code != 0 || !strings.Contains(out, "Leader:") {
		t.Errorf("NOMAD_TOKEN: %d %s\n%s", code, errOut, out)
	}
	if got := leaderLine(&agent.Status{Leader: true}); got != "yes" {
		t.Errorf("leader: %q", got)
	}
}

// TestVCQuotas: quota-only shares as written; cell quotas through the
// cell type chain to GPUs per type.
func TestVCQuotas(t *testing.T) {
	cells, diags := rhcl.Parse(rhcl.Source{Name: "cells.hcl", Src: []byte(`
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 4
  node  = true
}
cell_type "v100-rack" {
  child = "v100-node"
  count = 2
}
cell "v100-rack" "r0" {
  nomad_nodes = ["a", "b"]
}
cell "v100-rack" "r1" {
  nomad_nodes = ["c", "d"]
}
vc "research" {
  quota = { "v100-rack" = 1, "v100-node" = 1 }
}
vc "prod" {
  quota = { "v100-node" = 1 }
}
`)})
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	want := []telemetry.VCQuota{{Name: "research", GPUs: map[string]int{"v100": 12}}, {Name: "prod", GPUs: map[string]int{"v100": 4}}}
	if got := vcQuotas(cells); !reflect.DeepEqual(got, want) {
		t.Errorf("cells: %+v, want %+v", got, want)
	}
	quota, diags := rhcl.Parse(rhcl.Source{Name: "quota.hcl", Src: []byte(`
vc "a" {
  gpus   = { v100 = 2, k80 = 1 }
  policy = "fifo"
}
vc "b" {
  gpus   = { v100 = 1 }
  policy = "fifo"
}
`)})
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	want = []telemetry.VCQuota{{Name: "a", GPUs: map[string]int{"v100": 2, "k80": 1}}, {Name: "b", GPUs: map[string]int{"v100": 1}}}
	if got := vcQuotas(quota); !reflect.DeepEqual(got, want) {
		t.Errorf("quota-only: %+v, want %+v", got, want)
	}
}

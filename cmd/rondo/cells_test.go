package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCaptured runs the CLI in-process with stdout and stderr sent to temp files.
func runCaptured(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, _ := os.Create(filepath.Join(dir, "out"))
	errF, _ := os.Create(filepath.Join(dir, "err"))
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	code = run(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// runSimJSON runs a command that prints one JSON object (simulate --json),
// fails the test unless it exits 0 with valid JSON, and drops the keys
// that vary from run to run (wall time, solve times).
func runSimJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := runCaptured(t, args...)
	if code != 0 {
		t.Fatalf("%v: code %d: %s", args, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	for _, k := range []string{"wall_s", "solve_ms_p50", "solve_ms_max"} {
		delete(m, k)
	}
	return m
}

func TestConfigValidate(t *testing.T) {
	code, out, _ := runCaptured(t, "config", "validate", "testdata/cluster.hcl")
	if code != 0 || out != "testdata/cluster.hcl: ok (4 cell types, 2 cells, 16 GPUs, 2 VCs, round 360s)\n" {
		t.Fatalf("code %d, out %q", code, out)
	}
	code, out, _ = runCaptured(t, "config", "validate", "testdata/quota_only.hcl")
	if code != 0 || out != "testdata/quota_only.hcl: ok (2 quota-only VCs asking k80 4, v100 10 GPUs, round 360s)\n" {
		t.Fatalf("quota-only: code %d, out %q", code, out)
	}
	code, out, errOut := runCaptured(t, "config", "validate", "testdata/bad_cluster.hcl")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "testdata/bad_cluster.hcl:16:13: Quota exceeds cluster; vc \"b\"") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
}

func TestCellsPlan(t *testing.T) {
	code, out, errOut := runCaptured(t, "cells", "plan", "--config", "testdata/cluster.hcl", "--requests", "testdata/requests.json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	n0 := `"n0/0/0/0", "n0/0/0/1", "n0/0/1/0", "n0/0/1/1", "n0/1/0/0", "n0/1/0/1", "n0/1/1/0", "n0/1/1/1"`
	n1 := strings.ReplaceAll(n0, "n0", "n1")
	want := []string{
		// o1 takes the first free node; research's node binds the other.
		`{"step": 1, "request": "o1", "vc": "", "status": "placed", "cells": [` + n0 + `]}`,
		`{"step": 2, "request": "r1", "vc": "research", "status": "placed", "cells": [` + n1 + `]}`,
		// product's GPU can only come from n0: o1 is preempted whole, and waits.
		`{"step": 3, "request": "p1", "vc": "product", "status": "placed", "cells": ["n0/0/0/0"], "preempted": ["o1"]}`,
		`{"step": 3, "request": "o1", "vc": "", "status": "preempted", "cells": [` + n0 + `]}`,
		// 2 GPUs in one node never fit product's single-GPU cells.
		`{"step": 4, "request": "p2", "vc": "product", "status": "waiting", "cells": []}`,
		`{"step": 5, "request": "r1", "vc": "research", "status": "released", "cells": [` + n1 + `]}`,
		// o1 is retried after the release and lands on the freed node.
		`{"step": 5, "request": "o1", "vc": "", "status": "placed", "cells": [` + n1 + `]}`,
		`{"step": 6, "request": "p2", "vc": "product", "status": "released", "cells": []}`,
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(got), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestCellsPlanBadRequests(t *testing.T) {
	code, out, errOut := runCaptured(t, "cells", "plan", "--config", "testdata/cluster.hcl", "--requests", "testdata/bad_requests.json")
	if code != 1 || out != "" {
		t.Fatalf("code %d, out %q", code, out)
	}
	if !strings.Contains(errOut, "request 1") || !strings.Contains(errOut, "gpus") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("error %q must be one line naming request 1 and gpus", errOut)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		`field "vc"`:        `[{"id": "a", "members": [{"gpus": 1}]}]`,
		`field "op"`:        `[{"id": "a", "vc": "x", "op": "free", "members": [{"gpus": 1}]}]`,
		`field "id"`:        `[{"vc": "research", "members": [{"gpus": 1}]}]`,
		`"members[0].gpus"`: `[{"id": "a", "vc": "research", "members": [{"gpus": 0}]}]`,
		`unknown field`:     `[{"id": "a", "vc": "research", "member": [{"gpus": 1}]}]`,
	} {
		p := filepath.Join(dir, "r.json")
		os.WriteFile(p, []byte(body), 0o644)
		code, _, errOut := runCaptured(t, "cells", "plan", "--config", "testdata/cluster.hcl", "--requests", p)
		if code != 1 || !strings.Contains(errOut, "request 0") || !strings.Contains(errOut, name) {
			t.Errorf("%s: code %d, err %q", body, code, errOut)
		}
	}
}

// --topology: the plugin's fingerprint report of a 2-socket PCIe box
// (testdata/pcie-box.plugin.hcl) derives the v100 chain, printed before
// the requests replay on it; a 4-GPU gang lands in one NUMA cell.
func TestCellsPlanTopology(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.hcl")
	if err := os.WriteFile(cfg, []byte("cells_from_topology {\n  node_pool = \"gpu\"\n}\nvc \"a\" {\n  quota = { \"v100-numa\" = 1 }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := filepath.Join(dir, "r.json")
	if err := os.WriteFile(req, []byte(`[{"id":"g","vc":"a","members":[{"gpus":4}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCaptured(t, "cells", "plan", "--config", cfg, "--topology", "testdata/pcie-0.json", "--requests", req)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"# type v100-pcie-switch = 2 × v100\n",
		"# type v100-numa = 2 × v100-pcie-switch\n",
		"# type v100-node = 2 × v100-numa (node)\n",
		"# cell pcie-0 (v100-node, node pcie-0): [[GPU-p0 GPU-p4] [GPU-p1 GPU-p5]] [[GPU-p2 GPU-p6] [GPU-p3 GPU-p7]]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// Leaves 0-3 or 4-7 of pcie-0: one NUMA cell.
	if !strings.Contains(out, `"pcie-0/0/0/0", "pcie-0/0/0/1", "pcie-0/0/1/0", "pcie-0/0/1/1"`) &&
		!strings.Contains(out, `"pcie-0/1/0/0", "pcie-0/1/0/1", "pcie-0/1/1/0", "pcie-0/1/1/1"`) {
		t.Errorf("4-GPU gang not in one NUMA cell:\n%s", out)
	}
}

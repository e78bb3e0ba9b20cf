package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimulatePlacementFlags(t *testing.T) {
	const tr = "../../allocator/synergy/data/traces/static-100.csv"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "fifo", "--cpus-per-server", "24"}, "--cpus-per-server needs --placement"},
		{[]string{"--policy", "fifo", "--synergy-compat"}, "--synergy-compat needs --placement"},
		{[]string{"--policy", "fifo", "--placement", "tuned"}, `--placement "tuned": want proportional, tune, greedy or opt`},
		{[]string{"--policy", "fifo", "--placement", "tune", "--cpus-per-server", "0"}, "--cpus-per-server 0: want a positive number of cores"},
		{[]string{"--policy", "fifo", "--placement", "tune", "--mem-per-server", "-5"}, "--mem-per-server -5: want a positive number of GB"},
		{[]string{"--policy", "fifo", "--trace", tr, "--trace-format", "csv"}, `--trace-format "csv": want gavel or synergy`},
		{[]string{"--policy", "fifo", "--trace", "continuous", "--trace-format", "synergy"}, "--trace-format synergy reads a trace FILE"},
		{[]string{"--policy", "fifo", "--trace", "testdata/faults.csv", "--trace-format", "synergy"}, "testdata/faults.csv: line 1:"},
	} {
		code, _, errOut := runCaptured(t, append([]string{"simulate"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: code %d, %q; want one line with %q", c.args, code, errOut, c.want)
		}
	}
	code, out, errOut := runCaptured(t, "simulate", "--trace", tr, "--trace-format", "synergy", "--cluster", "v100=32", "--gpus-per-server", "8",
		"--cpus-per-server", "24", "--mem-per-server", "500", "--round", "300", "--policy", "fifo", "--placement", "proportional", "--synergy-compat", "--json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var r struct {
		AvgJCTS   float64 `json:"avg_jct_s"`
		MakespanS float64 `json:"makespan_s"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// Synergy's reference: 20271.9505 s and 54901 s (docs/synergy/reference.json).
	if r.AvgJCTS < 20271.95*0.98 || r.AvgJCTS > 20271.95*1.02 || r.MakespanS < 54901*0.98 || r.MakespanS > 54901*1.02 {
		t.Errorf("static FIFO proportional: %+v", r)
	}
}

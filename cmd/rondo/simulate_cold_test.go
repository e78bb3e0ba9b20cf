package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateColdSolve: --cold-solve runs aware LAS with a from-scratch
// solve at every recompute; both paths finish every job with the same
// number of jobs measured, and --cold-solve is refused with --vc-config
// (whose engines it would not reach).
func TestSimulateColdSolve(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness_perf", "--cluster", "v100=4,p100=4,k80=4", "--rate", "2",
		"--jobs", "60", "--window", "10:40", "--json"}
	var res [2]map[string]any
	for i, extra := range [][]string{nil, {"--cold-solve"}} {
		code, out, errOut := runCaptured(t, append(args, extra...)...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", extra, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &res[i]); err != nil {
			t.Fatalf("%v: %v: %s", extra, err, out)
		}
		if res[i]["finished"] != true || res[i]["jobs_done"] != 30.0 {
			t.Errorf("%v: %v", extra, res[i])
		}
	}
	if code, _, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/cluster.hcl", "--cold-solve"); code != 1 ||
		!strings.Contains(errOut, "--cold-solve is for single-policy runs") {
		t.Errorf("--vc-config with --cold-solve: code %d, %q", code, errOut)
	}
}

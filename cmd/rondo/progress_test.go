package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateProgress: -progress draws the bar (percent, ETA) on stderr
// and --json's stdout stays one JSON object; without it (stderr no
// terminal) stderr stays empty.
func TestSimulateProgress(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness_perf", "--cluster", "v100=2,k80=2", "--trace", "static", "--jobs", "6", "--json"}
	code, out, errOut := runCaptured(t, append(args, "-progress")...)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, "simulate [") || !strings.Contains(errOut, "/6 eta ") || strings.Contains(out, "eta") {
		t.Fatalf("stderr %q", errOut)
	}
	code, _, errOut = runCaptured(t, args...)
	if code != 0 || errOut != "" {
		t.Fatalf("no terminal: code %d, stderr %q", code, errOut)
	}
}

// TestSweepProgress: the sweep's bar counts the runs with an ETA under the
// per-run lines.
func TestSweepProgress(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := runCaptured(t, "simulate", "sweep", "--cluster", "v100=2,k80=2", "--policies", "max_min_fairness_perf",
		"--rates", "0.3", "--seeds", "0,1", "--window", "2:8", "--max-active", "200", "--out", dir, "-progress")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "sweep [##############################] 100% 2/2 eta 0s") || strings.Count(errOut, "avg JCT") != 2 {
		t.Fatalf("stderr %q", errOut)
	}
}

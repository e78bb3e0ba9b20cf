package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateFaults: --faults replays a fault file (its counters appear
// in the JSON, and only with --faults); a malformed file or a target
// outside the cluster exits 1 with a one-line error naming file and line.
func TestSimulateFaults(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness_perf", "--cluster", "v100=2,k80=2", "--trace", "static", "--jobs", "4", "--json"}
	for _, tc := range []struct {
		file, want string
	}{
		{"testdata/bad_faults.csv", "rondo simulate: testdata/bad_faults.csv:3: kind: \"gpu-reboot\" is not gpu-fail, gpu-recover, node-fail or node-recover\n"},
		{"testdata/bad_faults_target.csv", "rondo simulate: testdata/bad_faults_target.csv:2: target: \"gpu:v100:5\": index 5 out of range: v100 has 2 GPUs\n"},
		{"testdata/no_such_faults.csv", "rondo simulate: open testdata/no_such_faults.csv: no such file or directory\n"},
	} {
		code, out, errOut := runCaptured(t, append(args, "--faults", tc.file)...)
		if code != 1 || errOut != tc.want || out != "" {
			t.Errorf("%s: code %d, stderr %q, stdout %q: want 1, %q", tc.file, code, errOut, out, tc.want)
		}
	}
	if code, _, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/cluster.hcl", "--faults", "testdata/faults.csv"); code != 1 ||
		!strings.Contains(errOut, "--faults with --vc-config needs a Gavel trace") {
		t.Errorf("--vc-config (Philly trace) with --faults: code %d, %q", code, errOut)
	}

	var plain, faulty map[string]any
	for _, run := range []struct {
		extra []string
		into  *map[string]any
	}{{nil, &plain}, {[]string{"--faults", "testdata/faults.csv"}, &faulty}} {
		code, out, errOut := runCaptured(t, append(args, run.extra...)...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", run.extra, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), run.into); err != nil {
			t.Fatalf("%v: %v: %s", run.extra, err, out)
		}
	}
	if _, ok := plain["gpu_failures"]; ok {
		t.Errorf("gpu_failures without --faults: %v", plain)
	}
	if _, ok := plain["fault_interruptions"]; ok {
		t.Errorf("fault_interruptions without --faults: %v", plain)
	}
	// Four jobs on four GPUs: v100-0 is busy when it fails at 100 s.
	if faulty["gpu_failures"] != 1.0 || faulty["fault_interruptions"] != 1.0 || faulty["finished"] != true {
		t.Errorf("with --faults: %v", faulty)
	}
}

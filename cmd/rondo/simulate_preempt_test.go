package main

import (
	"strings"
	"testing"
)

// TestSimulatePreemptionFlags: --preemption-cost takes SECONDS (as
// before: no new JSON field), realistic or a CSV FILE (the restart
// metrics in the JSON; a bad file is one error naming file, line and
// field); --min-runtime, --checkpoint-aware and --reserve-after are
// validated and refused where no single engine runs.
func TestSimulatePreemptionFlags(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness", "--cluster", "v100=8,p100=8,k80=8", "--trace", "static", "--jobs", "12", "--multi-gpu", "--json"}
	runJSON := func(extra ...string) map[string]any { t.Helper(); return runSimJSON(t, append(args, extra...)...) }
	newFields := []string{"lost_gpu_s", "restarts", "migrations", "large_gang_wait_p99_s", "large_gang_wait_avg_s", "noticed", "reserved"}
	scalar := runJSON("--preemption-cost", "30")
	for _, f := range newFields {
		if _, ok := scalar[f]; ok {
			t.Errorf("--preemption-cost 30: %s in the JSON", f)
		}
	}
	for _, extra := range [][]string{{"--preemption-cost", "realistic"}, {"--preemption-cost", "../../allocator/sim/costs/realistic.csv"}} {
		m := runJSON(extra...)
		if m["restarts"] == nil || m["lost_gpu_s"] == nil || m["finished"] != true {
			t.Errorf("%v: %v", extra, m)
		}
	}
	pinned := runJSON("--preemption-cost", "realistic", "--min-runtime", "1800", "--checkpoint-aware", "--reserve-after", "3600")
	plain := runJSON("--preemption-cost", "realistic")
	if !(pinned["preemptions"].(float64) < plain["preemptions"].(float64)) {
		t.Errorf("--min-runtime 1800: %v preemptions, without: %v", pinned["preemptions"], plain["preemptions"])
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--preemption-cost", "testdata/bad_costs.csv"}, `rondo simulate: --preemption-cost: testdata/bad_costs.csv:4: restore_s "sixty": want a finite number of seconds ≥ 0` + "\n"},
		{[]string{"--preemption-cost", "testdata/no_such_costs.csv"}, `rondo simulate: --preemption-cost "testdata/no_such_costs.csv": not SECONDS, realistic, nor a CSV FILE (open testdata/no_such_costs.csv: no such file or directory)` + "\n"},
		{[]string{"--preemption-cost", "-5"}, "rondo simulate: --preemption-cost -5: want SECONDS ≥ 0, realistic, or a CSV FILE\n"},
		{[]string{"--preemption-cost", "realistic", "--ideal"}, "rondo simulate: --preemption-cost realistic: restart costs per job type need the round-based mechanism, not --ideal\n"},
		{[]string{"--min-runtime", "-1"}, "rondo simulate: --min-runtime -1: want a finite number of seconds ≥ 0\n"},
		{[]string{"--reserve-after", "+Inf"}, "rondo simulate: --reserve-after +Inf: want a finite number of seconds ≥ 0\n"},
		{[]string{"--min-runtime", "60", "--ideal"}, "rondo simulate: --min-runtime, --checkpoint-aware and --reserve-after need the round-based mechanism, not --ideal\n"},
		{[]string{"--checkpoint-aware", "--vc-config", "testdata/cluster.hcl"}, "rondo simulate: --min-runtime, --checkpoint-aware and --reserve-after are for a single engine: with --vc-config each VC's settings come from testdata/cluster.hcl\n"},
	} {
		code, out, errOut := runCaptured(t, append(args, tc.extra...)...)
		if code != 1 || errOut != tc.want || out != "" {
			t.Errorf("%v: code %d, stderr %q, stdout %q: want 1, %q", tc.extra, code, errOut, out, tc.want)
		}
	}
	code, _, errOut := runCaptured(t, "simulate", "--policy", "gandiva_fair", "--trace", "static", "--jobs", "2", "--min-runtime", "60")
	if code != 1 || !strings.Contains(errOut, "not of gandiva_fair's") {
		t.Errorf("gandiva_fair with --min-runtime: code %d, %q", code, errOut)
	}
	code, _, errOut = runCaptured(t, "simulate", "--trace-format", "dl2", "--policy", "drf", "--jobs", "2", "--preemption-cost", "realistic")
	if code != 1 || !strings.Contains(errOut, "not modelled for DL2's jobs") {
		t.Errorf("dl2 with --preemption-cost realistic: code %d, %q", code, errOut)
	}
}

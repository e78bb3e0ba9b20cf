package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulateSweepCommand(t *testing.T) {
	dir := t.TempDir()
	args := []string{"simulate", "sweep", "--cluster", "v100=3,p100=3,k80=3", "--policies", "max_min_fairness_perf,max_min_fairness+compat",
		"--rates", "0.15:0.3:0.15", "--seeds", "0,1", "--window", "5:25", "--max-active", "200", "--out", dir}
	code, out, errOut := runCaptured(t, args...)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	for _, f := range []string{"runs.csv", "summary.csv", "results.json", "runs.jsonl", "jct_vs_rate.svg", "jct_cdf.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out, "max_min_fairness+compat") || !strings.Contains(out, "8 runs") || strings.Count(errOut, "avg JCT") != 8 {
		t.Errorf("output:\n%s\nstderr:\n%s", out, errOut)
	}
	// Plot-only reads the journal back and runs nothing.
	code, out2, errOut := runCaptured(t, append(args, "--plot-only")...)
	if code != 0 || !strings.Contains(out2, "8 journaled runs") || strings.Contains(errOut, "avg JCT") {
		t.Errorf("plot-only: code %d\n%s\n%s", code, out2, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "sweep", "--out", dir}, "--policies and --out are required"},
		{[]string{"simulate", "sweep", "--policies", "las", "--out", dir, "--rates", "1:0:1"}, "LO <= HI"},
		{[]string{"simulate", "sweep", "--policies", "las+turbo", "--out", dir}, "unknown modifier"},
		{[]string{"simulate", "sweep", "--policies", "las", "--out", dir, "--trace", "static"}, "needs --jobs"},
		{[]string{"simulate", "sweep", "--policies", "fifo", "--out", dir, "--cpus-per-server", "24"}, "--cpus-per-server needs a +PLACEMENT policy spec"},
		{[]string{"simulate", "sweep", "--policies", "fifo+tune", "--out", dir, "--mem-per-server", "0"}, "--mem-per-server 0: want a positive number"},
		{[]string{"simulate", "sweep", "--policies", "fifo", "--out", dir, "--class-split", "20/70/10"}, "--class-split needs --trace-format synergy"},
		{[]string{"simulate", "sweep", "--policies", "fifo", "--out", dir, "--trace-format", "csv"}, `--trace-format "csv"`},
		{[]string{"simulate", "sweep", "--policies", "fifo", "--out", dir, "--trace-format", "synergy", "--class-split", "1/2"}, "want IMAGE/LANGUAGE/SPEECH"},
	} {
		code, _, errOut := runCaptured(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestSimulateSweepSynergy: placement specs on Synergy's workload, both
// models; the figure's note names the servers, the model and the trace.
func TestSimulateSweepSynergy(t *testing.T) {
	for _, compat := range []string{"", "--synergy-compat"} {
		dir := t.TempDir()
		args := []string{"simulate", "sweep", "--trace-format", "synergy", "--cluster", "v100=16", "--gpus-per-server", "8", "--cpus-per-server", "24",
			"--mem-per-server", "500", "--round", "300", "--policies", "fifo+proportional,fifo+tune", "--rates", "1,1.5", "--seeds", "42",
			"--window", "20:60", "--out", dir}
		if compat != "" {
			args = append(args, compat)
		}
		code, out, errOut := runCaptured(t, args...)
		if code != 0 {
			t.Fatalf("%s: code %d: %s", compat, code, errOut)
		}
		if !strings.Contains(out, "fifo+tune") || !strings.Contains(out, "4 runs") || strings.Count(errOut, "avg JCT") != 4 {
			t.Errorf("%s: output:\n%s\nstderr:\n%s", compat, out, errOut)
		}
		svg, err := os.ReadFile(filepath.Join(dir, "jct_vs_rate.svg"))
		model := map[string]string{"": "Rondo&#39;s model", "--synergy-compat": "Synergy-compat model"}[compat]
		if err != nil || !strings.Contains(string(svg), "24 cores, 500 GB") || !strings.Contains(string(svg), model) ||
			!strings.Contains(string(svg), "Synergy trace 20/70/10") {
			t.Errorf("%s: figure note: %v\n%s", compat, err, svg)
		}
	}
}

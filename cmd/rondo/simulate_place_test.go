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
		{[]string{"--policy", "fifo", "--trace", tr, "--trace-format", "csv"}, `--trace-format "csv": want gavel, synergy or dl2`},
		{[]string{"--policy", "fifo", "--trace", "philly", "--trace-format", "synergy"}, "not --trace philly"},
		{[]string{"--policy", "fifo", "--class-split", "20/70/10"}, "--class-split needs --trace-format synergy"},
		{[]string{"--policy", "fifo", "--trace", tr, "--trace-format", "synergy", "--class-split", "20/70/10"}, "--class-split needs --trace continuous or static"},
		{[]string{"--policy", "fifo", "--trace-format", "synergy", "--class-split", "20/70"}, "--class split \"20/70\": want IMAGE/LANGUAGE/SPEECH"},
		{[]string{"--policy", "fifo", "--trace-format", "synergy", "--class-split", "60/60/0"}, "at most 100"},
		{[]string{"--policy", "fifo", "--trace", "static", "--trace-format", "synergy"}, "--trace static needs --jobs N"},
		{[]string{"--policy", "fifo", "--trace-format", "synergy", "--rate", "0"}, "--rate 0: want a positive number"},
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

// TestSimulateSynergyContinuous: --trace continuous --trace-format synergy
// draws Synergy's synthetic workload (seeded by --seed, split by
// --class-split, single- or --multi-gpu) and runs it with placement; TUNE
// is faster than proportional; --trace static --jobs N too.
func TestSimulateSynergyContinuous(t *testing.T) {
	run := func(extra ...string) (avg float64, done int) {
		t.Helper()
		args := append([]string{"simulate", "--trace-format", "synergy", "--seed", "42", "--cluster", "v100=16", "--gpus-per-server", "8",
			"--cpus-per-server", "24", "--mem-per-server", "500", "--round", "300", "--policy", "fifo", "--json"}, extra...)
		code, out, errOut := runCaptured(t, args...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", extra, code, errOut)
		}
		var r struct {
			AvgJCTS  float64 `json:"avg_jct_s"`
			JobsDone int     `json:"jobs_done"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.AvgJCTS, r.JobsDone
	}
	cont := []string{"--trace", "continuous", "--rate", "1.5", "--window", "20:80"}
	prop, n := run(append(cont, "--placement", "proportional")...)
	tune, _ := run(append(cont, "--placement", "tune")...)
	if n != 60 || !(tune < prop) {
		t.Errorf("continuous: %d jobs, proportional %.0f s, TUNE %.0f s", n, prop, tune)
	}
	compat, _ := run(append(cont, "--placement", "tune", "--synergy-compat")...)
	split, _ := run(append(cont, "--placement", "tune", "--class-split", "50/0/50")...)
	multi, _ := run(append(cont, "--placement", "tune", "--multi-gpu")...)
	if compat == tune || split == tune || multi == tune {
		t.Errorf("compat %.0f, 50/0/50 %.0f, multi-GPU %.0f: one equals the default's %.0f", compat, split, multi, tune)
	}
	if _, n := run("--trace", "static", "--jobs", "30", "--placement", "tune"); n != 30 {
		t.Errorf("static: %d jobs done", n)
	}
}

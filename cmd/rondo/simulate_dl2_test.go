package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/policies/dl2"
)

// TestSimulateDL2Generated: a small generated DL2 run with drf prints
// avg_jct_s, every job done, and equals dl2.Env.Run on the same trace
// (DL2's testbed, 1200 s slots, noise 0.1 seeded by --seed).
func TestSimulateDL2Generated(t *testing.T) {
	code, out, errOut := runCaptured(t, "simulate", "--trace-format", "dl2", "--policy", "drf", "--jobs", "12", "--seed", "5", "--json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var r struct {
		Policy    string   `json:"policy"`
		AvgJCTS   *float64 `json:"avg_jct_s"`
		MakespanS float64  `json:"makespan_s"`
		JobsDone  int      `json:"jobs_done"`
		Finished  bool     `json:"finished"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.AvgJCTS == nil || !(*r.AvgJCTS > 0) || r.JobsDone != 12 || !r.Finished || r.Policy != "drf" {
		t.Fatalf("%s", out)
	}
	models := dl2.Table1()
	env := dl2.Env{Servers: dl2.Servers(13, 2, 16), SlotS: 1200, Models: models, Noise: 0.1, Seed: 5}
	want, err := env.Run(dl2.Generate(dl2.GenOptions{Jobs: 12, Seed: 5, SlotS: 1200}, models), dl2.DRF{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(want.AvgJCTS-*r.AvgJCTS) > 1e-9*want.AvgJCTS || math.Abs(want.MakespanS-r.MakespanS) > 1e-9*want.MakespanS {
		t.Fatalf("simulate: avg JCT %v, makespan %v; dl2.Env: %v, %v", *r.AvgJCTS, r.MakespanS, want.AvgJCTS, want.MakespanS)
	}
}

// TestSimulateDL2TraceFile: a trace file runs (text output; --policy dl2
// with a model file, silent: the model is used), a bad line is one error
// line naming file:line: field.
func TestSimulateDL2TraceFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	if err := os.WriteFile(good, []byte("id,model,arrival_s,epochs\na,ctc,0,20\nb,resnet-50,100,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCaptured(t, "simulate", "--trace-format", "dl2", "--trace", good, "--policy", "optimus", "--round", "600", "--speed-noise", "0")
	if code != 0 || !strings.Contains(out, "policy optimus: 2/2 jobs in window done") {
		t.Fatalf("code %d: %s%s", code, out, errOut)
	}
	model := filepath.Join(dir, "model.json")
	if err := dl2.NewModel(4, dl2.Table1().Names(), 1, []int{8}, 1).Save(model); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCaptured(t, "simulate", "--trace-format", "dl2", "--trace", good, "--policy", "dl2", "--dl2-model", model, "--json")
	if code != 0 || !strings.Contains(out, `"policy":"dl2"`) || errOut != "" {
		t.Fatalf("code %d: %s%s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("id,model,arrival_s,epochs\na,ctc,0,20\nb,ctc,5,-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCaptured(t, "simulate", "--trace-format", "dl2", "--trace", bad, "--policy", "drf")
	if code != 1 || !strings.Contains(errOut, bad+":3: epochs:") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Fatalf("code %d: %q", code, errOut)
	}
}

// TestSimulateDL2Errors: a policy that is not a sizer lists the valid
// ones; dl2 without a model, flags of other formats, DL2's flags without
// the format and a job that fits nowhere are one error line each.
func TestSimulateDL2Errors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "las"}, `unknown sizing policy "las" (known: dl2, drf, fifo, optimus, srtf, tetris)`},
		{[]string{}, "--policy is required (with --trace-format dl2: dl2, drf, fifo, optimus, srtf, tetris)"},
		{[]string{"--policy", "dl2"}, "--policy dl2 needs a model: --dl2-model FILE"},
		{[]string{"--policy", "drf", "--dl2-model", "m.json"}, "--dl2-model is for --policy dl2"},
		{[]string{"--policy", "drf", "--ideal"}, "--ideal is not supported with --trace-format dl2"},
		{[]string{"--policy", "drf", "--trace", "static"}, "not --trace static"},
		{[]string{"--policy", "drf", "--cpus-per-server", "2.5"}, "--cpus-per-server 2.5: want a whole number of CPUs ≥ 1"},
		{[]string{"--policy", "drf", "--cpus-per-server", "3"}, "does not fit the empty cluster"},
		{[]string{"--policy", "drf", "--speed-noise", "-1"}, "--speed-noise -1: want a finite SIGMA ≥ 0"},
		{[]string{"--policy", "drf", "--speeds", "nope.csv"}, "nope.csv"},
	} {
		args := append([]string{"simulate", "--trace-format", "dl2", "--jobs", "3"}, c.args...)
		code, _, errOut := runCaptured(t, args...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: code %d, %q; want one line with %q", c.args, code, errOut, c.want)
		}
	}
	code, _, errOut := runCaptured(t, "simulate", "--policy", "fifo", "--speed-noise", "0.2", "--jobs", "3", "--trace", "static")
	if code != 1 || !strings.Contains(errOut, "--speed-noise needs --trace-format dl2") {
		t.Errorf("code %d: %q", code, errOut)
	}
}

package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/trace"
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
// ones; flags of other formats, DL2's flags without the format and a job
// that fits nowhere are one error line each. --policy dl2 without
// --dl2-model is no error: the shipped model decides, silently.
func TestSimulateDL2Errors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "las"}, `unknown sizing policy "las" (known: dl2, drf, fifo, optimus, srtf, tetris)`},
		{[]string{}, "--policy is required (with --trace-format dl2: dl2, drf, fifo, optimus, srtf, tetris)"},
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
	code, out, errOut := runCaptured(t, "simulate", "--trace-format", "dl2", "--jobs", "3", "--policy", "dl2", "--json")
	if code != 0 || !strings.Contains(out, `"policy":"dl2"`) || errOut != "" {
		t.Errorf("--policy dl2 without --dl2-model: code %d: %s%s", code, out, errOut)
	}
	code, _, errOut = runCaptured(t, "simulate", "--policy", "fifo", "--speed-noise", "0.2", "--jobs", "3", "--trace", "static")
	if code != 1 || !strings.Contains(errOut, "--speed-noise needs --trace-format dl2") {
		t.Errorf("code %d: %q", code, errOut)
	}
}

// TestDL2VC: a config's dl2 VC runs allocator/sizer with the sizer of its
// dl2 block. With dl2 { sizer = "drf" }, alone over the cluster or as a
// quota-only VC of 26 GPUs beside another VC's plain job, its two-role
// jobs (a JSON-lines trace) finish with the average JCT that
// --trace-format dl2 --policy drf gives the same jobs on DL2's testbed;
// without a dl2 block, the learned sizer with the shipped model, with
// that of --trace-format dl2 --policy dl2. Nothing is written to stderr.
func TestDL2VC(t *testing.T) {
	dir := t.TempDir()
	// Eight generated jobs: enough contention that the shipped model and
	// DRF decide differently (on fewer they may agree).
	jobs := dl2.Generate(dl2.GenOptions{Jobs: 8, Seed: 5, SlotS: 1200}, dl2.Table1())
	csvPath, jsonl := filepath.Join(dir, "t.csv"), filepath.Join(dir, "t.jsonl")
	f, _ := os.Create(csvPath)
	if err := dl2.WriteTrace(f, jobs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tj, err := sim.DL2Jobs(dl2.Table1(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tj {
		tj[i].VC = "ml"
	}
	plain := trace.Job{ID: len(tj), Model: "ResNet-18 (batch size 64)", ScaleFactor: 1, TotalSteps: 1000, Priority: 1, ArrivalS: 0, VC: "other"}
	f, _ = os.Create(jsonl)
	if err := trace.WriteJSONL(f, append(tj, plain)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	alone, quota := filepath.Join(dir, "alone.hcl"), filepath.Join(dir, "quota.hcl")
	learned := filepath.Join(dir, "learned.hcl")
	drf := "  dl2 {\n    sizer = \"drf\"\n  }\n"
	os.WriteFile(alone, []byte("round_seconds = 1200\nvc \"ml\" {\n  policy = \"dl2\"\n"+drf+"}\n"), 0o644)
	os.WriteFile(quota, []byte("round_seconds = 1200\nvc \"ml\" {\n  policy = \"dl2\"\n"+drf+"  gpus = { v100 = 26 }\n}\nvc \"other\" {\n  policy = \"fifo\"\n  gpus = { v100 = 4 }\n}\n"), 0o644)
	os.WriteFile(learned, []byte("round_seconds = 1200\nvc \"ml\" {\n  policy = \"dl2\"\n}\n"), 0o644)

	want := map[string]sim.Result{}
	for _, policy := range []string{"drf", "dl2"} {
		code, out, errOut := runCaptured(t, "simulate", "--trace-format", "dl2", "--trace", csvPath, "--policy", policy, "--speed-noise", "0", "--json")
		if code != 0 {
			t.Fatalf("--policy %s: code %d: %s", policy, code, errOut)
		}
		var r sim.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		want[policy] = r
	}
	if want["drf"].AvgJCTS == want["dl2"].AvgJCTS {
		t.Fatalf("the shipped model and DRF give the same avg JCT %v: the comparison tells them apart by nothing", want["drf"].AvgJCTS)
	}
	for _, c := range []struct {
		cfg, cluster, policy string
		n                    int
	}{{alone, "v100=26", "drf", 8}, {quota, "v100=30", "drf", 9}, {learned, "v100=26", "dl2", 8}} {
		trPath := jsonl
		if c.n == len(tj) { // the plain job has no VC alone
			trPath = filepath.Join(dir, "alone.jsonl")
			f, _ := os.Create(trPath)
			trace.WriteJSONL(f, tj)
			f.Close()
		}
		code, out, errOut := runCaptured(t, "simulate", "--vc-config", c.cfg, "--trace", trPath, "--cluster", c.cluster,
			"--gpus-per-server", "2", "--round", "1200", "--json")
		if code != 0 || errOut != "" {
			t.Fatalf("%s: code %d: %s", c.cfg, code, errOut)
		}
		var r sim.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if !r.Finished || r.JobsDone != c.n || len(r.VCs) == 0 || r.VCs[0].Name != "ml" {
			t.Fatalf("%s: %s", c.cfg, out)
		}
		if got, w := r.VCs[0].AvgJCTS, want[c.policy].AvgJCTS; math.Abs(got-w) > 1e-9*w {
			t.Errorf("%s: vc ml avg JCT %v, --trace-format dl2 --policy %s %v", c.cfg, got, c.policy, w)
		}
	}
	code, _, errOut := runCaptured(t, "simulate", "--policy", "dl2", "--trace", jsonl)
	if code != 1 || !strings.Contains(errOut, "--policy dl2 sizes DL2 jobs") {
		t.Fatalf("code %d: %s", code, errOut)
	}
}

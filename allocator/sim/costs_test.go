package sim

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// scripted is a decider that runs job "0" on both v100 GPUs or stops it,
// round by round, as its script says (run, checkpoint on notice); it
// keeps the snapshots' job 0.
type scripted struct {
	script func(r int, snap *engine.Snapshot) (run, checkpoint bool)
	r      int
	seen   []engine.Job
	times  []float64
}

func (d *scripted) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	p := &engine.Plan{TimeS: snap.TimeS}
	run, ck := d.script(d.r, snap)
	d.r++
	d.seen = append(d.seen, snap.Jobs[0])
	d.times = append(d.times, snap.TimeS)
	if run {
		p.Assignments = []engine.Assignment{{Jobs: []string{"0"}, Type: "v100", GPUs: []string{"v100-0", "v100-1"},
			Servers: []string{"v100-s0", "v100-s1"}}}
	} else if len(snap.Running) > 0 {
		p.Suspend = []string{"0"}
	}
	engine.Annotate(snap, p, nil)
	if ck {
		p.Intents[0].Checkpoint = true
	}
	return p, nil
}

// oneJob: job 0, model M on 2 GPUs at 1 step/s, 2000 steps, arriving at
// t = 100; M starts in 30 s, restores in 50, checkpoints in 10 every 900 s
// of training; 360 s rounds.
func oneJob(t *testing.T, d *scripted, f func(*Options)) *Result {
	t.Helper()
	costs, err := ParseCosts(strings.NewReader("model,start_s,restore_s,checkpoint_s,interval_s\nM,30,50,10,900\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2}}, Engine: engine.Config{Policy: "script", RoundS: 360},
		Decider: d, Costs: costs}
	if f != nil {
		f(&o)
	}
	src := &SliceSource{Jobs: []trace.Job{{ID: 0, Model: "M", ScaleFactor: 2, TotalSteps: 2000, ArrivalS: 100, Priority: 1,
		StepsPerS: map[string]float64{"v100": 1}}}}
	r, err := Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Finished || r.JobsDone != 1 {
		t.Fatalf("not finished: %+v", r)
	}
	return r
}

func stopAt(rounds ...int) func(int, *engine.Snapshot) (bool, bool) {
	return func(r int, _ *engine.Snapshot) (bool, bool) {
		for _, s := range rounds {
			if r == s {
				return false, false
			}
		}
		return true, false
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A stop without notice loses the work since the last checkpoint; the
// resume loses restore_s; periodic checkpoints bound what is lost.
func TestCostsStopWithoutNotice(t *testing.T) {
	// r0 t=100 admit: 30 s start, 330 steps; r1 t=460 keep: 360 steps;
	// r2 t=820 suspend: the 690 steps since the start (its checkpoint)
	// are lost; r3 t=1180 (an idle round later) resume: 50 s, 310 steps;
	// r4 1540, r5 1900: 670 → 1030 s of training since the restore, a
	// periodic checkpoint 900 s in (t = 1230 + 900 = 2130), 130 steps
	// after it; r6 t=2260 suspend: those 130 are lost; r7 t=2620 resume;
	// it finishes at 3770.
	d := &scripted{script: stopAt(2, 6)}
	r := oneJob(t, d, nil)
	wantT := []float64{100, 460, 820, 1180, 1540, 1900, 2260, 2620, 2980, 3340, 3700}
	wantRem := []float64{2000, 1670, 1310, 2000, 1690, 1330, 970, 970 + 130, 790, 430, 70}
	if len(d.seen) != len(wantT) {
		t.Fatalf("%d rounds at %v, want %d", len(d.seen), d.times, len(wantT))
	}
	for i := range wantT {
		if d.times[i] != wantT[i] || d.seen[i].RemainingSteps != wantRem[i] {
			t.Errorf("round %d: t=%v remaining %v, want t=%v remaining %v", i, d.times[i], d.seen[i].RemainingSteps, wantT[i], wantRem[i])
		}
	}
	// The snapshot's fields: not running before the start and while
	// suspended; the run's start, the last checkpoint.
	type fields struct{ run, ckpt, restore float64 }
	want := map[int]fields{0: {0, 0, 30}, 1: {100, 100, 50}, 2: {100, 100, 50}, 3: {0, 100, 50}, 4: {1180, 1180, 50},
		6: {1180, 2130, 50}, 7: {0, 2130, 50}, 8: {2620, 2620, 50}}
	for i, w := range want {
		j := d.seen[i]
		if got := (fields{j.RunSinceS, j.CheckpointAtS, j.RestoreS}); got != w || j.CheckpointS != 10 {
			t.Errorf("round %d: run since %v, checkpoint at %v, restore %v, checkpoint %v; want %+v, 10", i, got.run, got.ckpt, got.restore, j.CheckpointS, w)
		}
	}
	// Lost: (690 + 130 steps of 1 s rolled back, 2 × 50 s restores) × 2 GPUs.
	if !near(r.LostGPUS, (690+130+100)*2) || r.Restarts != 2 || r.Preemptions != 2 || r.Noticed != 0 {
		t.Errorf("lost %v GPU-s, %d restarts, %d preemptions, %d noticed; want 1840, 2, 2, 0", r.LostGPUS, r.Restarts, r.Preemptions, r.Noticed)
	}
	if jct := r.Jobs[0].JCTS; !near(jct, 3770-100) {
		t.Errorf("JCT %v, want 3670", jct)
	}
	if r.LargeGangWaitAvgS != 0 || r.LargeGangWaitP99S != 0 {
		t.Errorf("a 2-GPU job is no large gang: wait %v", r.LargeGangWaitAvgS)
	}
}

// With a notice the job checkpoints at the end of its last round: the
// stop loses nothing but checkpoint_s and the restore.
func TestCostsNoticeLosesOnlyCheckpointAndRestore(t *testing.T) {
	// r0 t=100 admit: 330 steps; r1 t=460 keep with notice: 350 steps and
	// a 10 s checkpoint, ending at 820; r2 t=820 suspend: nothing lost;
	// r3 t=1180 resume: 50 s, 310 steps.
	d := &scripted{script: func(r int, _ *engine.Snapshot) (bool, bool) { return r != 2, r == 1 }}
	r := oneJob(t, d, nil)
	if got := d.seen[2]; got.RemainingSteps != 2000-330-350 || got.CheckpointAtS != 820 || got.RunSinceS != 100 {
		t.Errorf("round 2: remaining %v, checkpoint at %v, run since %v; want 1320, 820, 100", got.RemainingSteps, got.CheckpointAtS, got.RunSinceS)
	}
	if got := d.seen[4].RemainingSteps; got != 2000-330-350-310 {
		t.Errorf("round 4: remaining %v, want 1010", got)
	}
	if !near(r.LostGPUS, (10+50)*2) || r.Noticed != 1 || r.Restarts != 1 {
		t.Errorf("lost %v GPU-s, %d noticed, %d restarts; want 120, 1, 1", r.LostGPUS, r.Noticed, r.Restarts)
	}
}

// A first start loses start_s (--start-cost a floor), and is no restart.
func TestCostsFirstStart(t *testing.T) {
	d := &scripted{script: stopAt()}
	r := oneJob(t, d, nil)
	if got := d.seen[1].RemainingSteps; got != 2000-330 {
		t.Errorf("after the first round: remaining %v, want 1670", got)
	}
	if r.LostGPUS != 0 || r.Restarts != 0 {
		t.Errorf("lost %v, restarts %d; want 0, 0", r.LostGPUS, r.Restarts)
	}
	d = &scripted{script: stopAt()}
	oneJob(t, d, func(o *Options) { o.StartCostS = 40 })
	if got := d.seen[1].RemainingSteps; got != 2000-320 || d.seen[0].RestoreS != 40 || d.seen[1].RestoreS != 50 {
		t.Errorf("start cost 40: remaining %v, restore %v then %v; want 1680, 40, 50", got, d.seen[0].RestoreS, d.seen[1].RestoreS)
	}
}

// A GPU failure is an unplanned stop: the job loses the work since its
// last checkpoint, the steps of the cut round included.
func TestCostsFaultLosesSinceCheckpoint(t *testing.T) {
	// r0 t=100: 330 steps; r1 t=460: cut at 700 after 240 steps: all 570
	// lost; idle until the recovery at 1000; resume there.
	sched, err := faults.Parse("f.csv", strings.NewReader("700,gpu-fail,gpu:v100:0\n1000,gpu-recover,gpu:v100:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := &scripted{script: func(_ int, snap *engine.Snapshot) (bool, bool) {
		for _, g := range snap.GPUs {
			if g.Failed {
				return false, false
			}
		}
		return true, false
	}}
	r := oneJob(t, d, func(o *Options) { o.Faults = sched })
	if d.times[2] != 700 || d.seen[2].RemainingSteps != 2000 || d.seen[2].RunSinceS != 0 {
		t.Errorf("after the cut: t=%v remaining %v run since %v; want 700, 2000, 0", d.times[2], d.seen[2].RemainingSteps, d.seen[2].RunSinceS)
	}
	if d.times[3] != 1000 || d.seen[4].RemainingSteps != 2000-310 {
		t.Errorf("resume at t=%v, then remaining %v; want 1000, 1690", d.times[3], d.seen[4].RemainingSteps)
	}
	if !near(r.LostGPUS, (570+50)*2) || r.Restarts != 1 {
		t.Errorf("lost %v GPU-s, %d restarts; want 1240, 1", r.LostGPUS, r.Restarts)
	}
}

// A 4-GPU job's waiting time is its JCT less the time it held GPUs.
func TestCostsLargeGangWait(t *testing.T) {
	costs, _ := ParseCosts(strings.NewReader("model,start_s,restore_s,checkpoint_s,interval_s\n*,0,0,0,0\n"), "zero")
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 4}}, Engine: engine.Config{Policy: "fifo", RoundS: 360}, Costs: costs}
	// Two 4-GPU jobs at t=0: the second waits for the first (FIFO).
	jobs := []trace.Job{{ID: 0, Model: "A", ScaleFactor: 4, TotalSteps: 1000, Priority: 1, StepsPerS: map[string]float64{"v100": 1}},
		{ID: 1, Model: "A", ScaleFactor: 4, TotalSteps: 1000, Priority: 1, StepsPerS: map[string]float64{"v100": 1}}}
	res, err := Run(&SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	var waits []float64
	for _, j := range res.Jobs {
		waits = append(waits, j.JCTS-1000)
	}
	if waits[0] != 0 || waits[1] != 1000 || !near(res.LargeGangWaitAvgS, 500) || !near(res.LargeGangWaitP99S, 990) {
		t.Errorf("waits %v: avg %v, p99 %v; want 0 and 1000: 500, 990", waits, res.LargeGangWaitAvgS, res.LargeGangWaitP99S)
	}
}

// Without Options.Costs every result is what it was before restart costs
// per job type existed (testdata/costs_nil_golden.json, written by the
// simulator of commit 419d7d6 on the same runs).
func TestCostsNilUnchanged(t *testing.T) {
	b, err := os.ReadFile("testdata/costs_nil_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]json.RawMessage
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	for name, o := range goldenRuns() {
		r := goldenRun(t, o)
		got, _ := json.Marshal(r)
		var a, w bytes.Buffer
		_ = json.Compact(&a, got)
		_ = json.Compact(&w, golden[name])
		if a.String() != w.String() {
			t.Errorf("%s: costs nil changed the result:\n got %s\nwant %s", name, a.String(), w.String())
		}
	}
}

// A table whose rows cost what the scalars cost, with a checkpoint at
// every instant (nothing to lose), is the scalar path.
func TestCostsTableAsScalars(t *testing.T) {
	o := goldenRuns()["mmf_scalar"] // --start-cost 30 --preemption-cost 60
	want := goldenRun(t, o)
	c, err := ParseCosts(strings.NewReader("model,start_s,restore_s,checkpoint_s,interval_s\n*,30,60,0,1e-6\n"), "scalars")
	if err != nil {
		t.Fatal(err)
	}
	o.StartCostS, o.PreemptionCostS, o.Costs = 0, 0, c
	got := goldenRun(t, o)
	if got.Restarts == 0 || got.LostGPUS <= 0 {
		t.Errorf("restarts %d, lost %v: want some", got.Restarts, got.LostGPUS)
	}
	got.LostGPUS, got.Restarts, got.Migrations, got.LargeGangWaitAvgS, got.LargeGangWaitP99S = 0, 0, 0, 0, 0
	a, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(a) != string(w) {
		t.Errorf("table as scalars:\n got %s\nwant %s", a, w)
	}
}

func goldenRuns() map[string]Options {
	c := Cluster{Types: map[string]int{"v100": 8, "p100": 8, "k80": 8}}
	return map[string]Options{
		"mmf_scalar": {Cluster: c, Engine: engine.Config{Policy: "max_min_fairness", RoundS: 360}, WindowStart: 10, WindowEnd: 50,
			StartCostS: 30, PreemptionCostS: 60},
		// Solved cold as when the golden file was written: a packed
		// recompute started from the last one's basis reaches another
		// optimum of the same value (TestWarmPackedMatchesCold).
		"packed": {Cluster: c, Engine: engine.Config{Policy: "max_min_fairness_packed", RoundS: 360, ColdSolve: true}, WindowStart: 10, WindowEnd: 50},
		// Solved cold as when the golden file was written: the engine's
		// incremental LAS solve reaches another optimum of the same value
		// (docs/performance.md, "Simulator: the Figure 8 point").
		"las_start": {Cluster: c, Engine: engine.Config{Policy: "las", RoundS: 360, ColdSolve: true}, WindowStart: 10, WindowEnd: 50,
			StartCostS: 30},
	}
}

// goldenRun: Gavel's continuous multi-GPU trace, seed 3, 4 jobs/h, 60
// jobs; the wall-clock fields zeroed.
func goldenRun(t *testing.T, o Options) *Result {
	t.Helper()
	g, err := trace.NewGenerator(trace.Options{Seed: 3, Rate: 4, MultiGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(&GeneratorSource{G: g, Limit: 60}, o)
	if err != nil {
		t.Fatal(err)
	}
	r.WallS, r.SolveMSP50, r.SolveMSMax = 0, 0, 0
	return r
}

func TestParseCostsErrors(t *testing.T) {
	const head = "# a comment\nmodel,start_s,restore_s,checkpoint_s,interval_s\n"
	for _, tc := range []struct{ in, want string }{
		{"", "f.csv: no header"},
		{"model,start_s,restore_s,checkpoint_s\nA,1,2,3\n", "f.csv:1: no column interval_s"},
		{head + "A,1,2,3,4\nB,1,x,3,4\n", `f.csv:4: restore_s "x": want a finite number of seconds ≥ 0`},
		{head + "A,1,2,-3,4\n", `f.csv:3: checkpoint_s "-3"`},
		{head + "A,1,2,3,Inf\n", `f.csv:3: interval_s "Inf"`},
		{head + "A,1,2,3,4\nA,1,2,3,4\n", `f.csv:4: model "A": also on line 3`},
		{head + "A,1,2,3\n", "f.csv:3: 4 fields, the header has 5"},
		{head + ",1,2,3,4\n", "f.csv:3: model: empty"},
		{head, "f.csv: no rows"},
		{head + "A,\"1,2,3,4\n", "f.csv:3:"},
	} {
		_, err := ParseCosts(strings.NewReader(tc.in), "f.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	// A model without a row and no default row fails the run.
	c, err := ParseCosts(strings.NewReader("model,start_s,restore_s,checkpoint_s,interval_s,note\nB,1,2,3,4,x\n"), "f.csv")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(&SliceSource{Jobs: []trace.Job{{Model: "A", ScaleFactor: 1, TotalSteps: 1, Priority: 1}}},
		Options{Cluster: Cluster{Types: map[string]int{"v100": 1}}, Engine: engine.Config{Policy: "fifo"}, Costs: c})
	if err == nil || !strings.Contains(err.Error(), `no row for model "A"`) {
		t.Errorf("model without a row: %v", err)
	}
	for _, o := range []Options{{PreemptionCostS: 1}, {Ideal: true}} {
		o.Cluster, o.Engine, o.Costs = Cluster{Types: map[string]int{"v100": 1}}, engine.Config{Policy: "fifo"}, c
		if _, err := Run(&SliceSource{}, o); err == nil {
			t.Errorf("%+v with costs: no error", o)
		}
	}
}

// The shipped table: every Gavel model family has its row (the longest
// prefix wins), and each value follows from its notes as README.md
// derives it: 16 B per parameter, 200 MB/s, restore = start + reading.
func TestRealisticCosts(t *testing.T) {
	c := RealisticCosts()
	for model, want := range map[string]string{"ResNet-18 (batch size 64)": "ResNet-18", "ResNet-50 (batch size 16)": "ResNet-50",
		"Transformer (batch size 128)": "Transformer", "LM (batch size 80)": "LM", "Recommendation (batch size 8192)": "Recommendation",
		"A3C": "A3C", "CycleGAN": "CycleGAN", "gnmt": "*"} {
		if jc, ok := c.For(model); !ok || jc.Model != want {
			t.Errorf("%s: row %q, want %q", model, jc.Model, want)
		}
	}
	r := csv.NewReader(bytes.NewReader(realisticCSV))
	r.Comment = '#'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, h := range recs[0] {
		idx[h] = i
	}
	for _, rec := range recs[1:] {
		v := func(col string) float64 {
			x, err := strconv.ParseFloat(rec[idx[col]], 64)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		mb := v("checkpoint_mb")
		if math.Abs(mb-16*v("params_m")) > 0.5 {
			t.Errorf("%s: %v MB, want 16 B × %vM parameters", rec[0], mb, v("params_m"))
		}
		if math.Abs(v("checkpoint_s")-mb/200) > 0.05 || math.Abs(v("restore_s")-v("start_s")-mb/200) > 0.05 || v("interval_s") != 900 {
			t.Errorf("%s: checkpoint %v s, restore %v s, interval %v s do not follow from %v MB at 200 MB/s and a %v s start",
				rec[0], v("checkpoint_s"), v("restore_s"), v("interval_s"), mb, v("start_s"))
		}
	}
}

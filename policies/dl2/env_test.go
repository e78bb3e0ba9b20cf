package dl2

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func testbed() []Server { return Servers(13, 2, 16) }

// Every baseline finishes every job of a 60-job trace, and every slot's
// decision passes Check.
func TestEnvBaselinesFinish(t *testing.T) {
	jobs := Generate(GenOptions{Jobs: 60, Seed: 11}, nil)
	for name, sz := range Baselines() {
		e := &Env{Servers: testbed(), Noise: 0.1, Seed: 1}
		res, err := e.Run(jobs, sz, func(r *SlotRecord) {
			if err := Check(e.Servers, r.Slot); err != nil {
				t.Errorf("%s: slot %d: %v", name, r.Index, err)
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.JCTs) != len(jobs) {
			t.Errorf("%s: %d of %d jobs finished", name, len(res.JCTs), len(jobs))
		}
		for id, v := range res.JCTs {
			if !(v > 0) {
				t.Errorf("%s: job %s JCT %g", name, id, v)
			}
		}
		// Eq. 1 normalises each job's epochs: the rewards add up to the jobs.
		if math.Abs(res.Reward-float64(len(jobs))) > 1e-6 {
			t.Errorf("%s: total reward %g, want %d", name, res.Reward, len(jobs))
		}
		if !(res.AvgJCTS > 0) || res.MakespanS < res.AvgJCTS {
			t.Errorf("%s: %+v", name, res)
		}
	}
}

// Baselines' average JCT on the default 200-job trace (seed 1) on the
// testbed, no noise (go test -v -run TestEnvBaselineTable):
//
//	optimus  3.15 h   (makespan 41.1 h, 123 slots)
//	drf      3.44 h   (42.7 h, 128)
//	fifo     4.10 h   (43.0 h, 129)
//	tetris   4.14 h   (43.3 h, 130)
//	srtf     4.32 h   (44.8 h, 134)
//
// SRTF, FIFO and Tetris give a job all 8 workers and 8 PSs before the
// next one: with decreasing returns that wastes GPUs. Not asserted
// beyond every job finishing.
func TestEnvBaselineTable(t *testing.T) {
	jobs := Generate(GenOptions{Seed: 1}, nil)
	var lines []string
	for name, sz := range Baselines() {
		e := &Env{Servers: testbed()}
		res, err := e.Run(jobs, sz, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.JCTs) != len(jobs) || !(res.AvgJCTS > 0) {
			t.Errorf("%s: %d jobs finished, avg JCT %g", name, len(res.JCTs), res.AvgJCTS)
		}
		lines = append(lines, fmt.Sprintf("%-8s %.2f h   (makespan %.1f h, %d slots)", name, res.AvgJCTS/3600, res.MakespanS/3600, res.Slots))
	}
	sort.Strings(lines)
	t.Log("avg JCT, 200 jobs, seed 1:\n" + strings.Join(lines, "\n"))
}

func TestEnvDeterministic(t *testing.T) {
	jobs := Generate(GenOptions{Jobs: 40, Seed: 4}, nil)
	run := func(seed int64) Result {
		e := &Env{Servers: testbed(), Noise: 0.3, Seed: seed}
		res, err := e.Run(jobs, Optimus{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(9), run(9), run(10)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different results")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("different noise seeds, same result")
	}
}

// Two sizers see the same noise factor for the same job in the same slot.
func TestEnvPairedNoise(t *testing.T) {
	jobs := Generate(GenOptions{Jobs: 40, Seed: 4}, nil)
	factors := func(sz Sizer, seed int64) map[string]float64 {
		e := &Env{Servers: testbed(), Noise: 0.3, Seed: seed}
		out := map[string]float64{}
		_, err := e.Run(jobs, sz, func(r *SlotRecord) {
			fin := map[string]bool{}
			for _, id := range r.Finished {
				fin[id] = true
			}
			for a, j := range r.Slot.Jobs {
				al := r.Slot.Alloc[a]
				if al.Workers == 0 || fin[j.ID] {
					continue
				}
				v := r.Slot.SpeedOf(a, al.PS, al.Workers)
				out[fmt.Sprintf("%s@%d", j.ID, r.Index)] = r.Trained[a] / (v * 1200)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	drf, fifo, other := factors(DRF{}, 5), factors(FIFO{}, 5), factors(DRF{}, 6)
	common, varied := 0, false
	for k, v := range drf {
		if w, ok := fifo[k]; ok {
			common++
			if math.Abs(v-w) > 1e-9 {
				t.Fatalf("%s: factor %g under drf, %g under fifo", k, v, w)
			}
		}
		if math.Abs(v-1) > 1e-3 {
			varied = true
		}
		if v < 0.5-1e-9 || v > 1.5+1e-9 {
			t.Errorf("%s: factor %g outside [0.5, 1.5]", k, v)
		}
	}
	if common < 100 || !varied {
		t.Errorf("%d common (job, slot) pairs, varied %v", common, varied)
	}
	same := 0
	for k, v := range drf {
		if w, ok := other[k]; ok && v == w {
			same++
		}
	}
	if same > 0 {
		t.Errorf("seed 6 repeats %d of seed 5's factors", same)
	}
}

// The clock: slots on the grid, a job arriving inside a slot waits for
// the next, an idle cluster jumps to the next arrival's slot; JCT of a
// job finishing inside a slot is exact.
func TestEnvClock(t *testing.T) {
	ms := Table1()
	m := ms["ctc"]
	v := m.EpochsPerS(1, 1)
	// One server with one GPU: every job runs at one worker and one PS.
	jobs := []TraceJob{
		{"b", "ctc", 100000, 1},
		{"a", "ctc", 100, 3},
	}
	e := &Env{Servers: Servers(1, 1, 4)}
	var starts []float64
	res, err := e.Run(jobs, FIFO{}, func(r *SlotRecord) {
		starts = append(starts, r.StartS)
		if r.StartS != float64(r.Index)*1200 {
			t.Errorf("slot %d starts at %g", r.Index, r.StartS)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// a starts at 1200 and needs 3/v = 414 s; b arrives at 100000 and
	// starts at 100800 (slot 84).
	wantA := 1200 + 3/v - 100
	wantB := 100800 + 1/v - 100000
	if math.Abs(res.JCTs["a"]-wantA) > 1e-6 || math.Abs(res.JCTs["b"]-wantB) > 1e-6 {
		t.Errorf("JCTs %v, want a %g, b %g", res.JCTs, wantA, wantB)
	}
	if !reflect.DeepEqual(starts, []float64{1200, 100800}) || res.Slots != 2 {
		t.Errorf("slots at %v (%d)", starts, res.Slots)
	}
	if want := 100800 + 1/v - 100; math.Abs(res.MakespanS-want) > 1e-6 {
		t.Errorf("makespan %g, want %g", res.MakespanS, want)
	}
	if want := (wantA + wantB) / 2; math.Abs(res.AvgJCTS-want) > 1e-6 {
		t.Errorf("avg JCT %g, want %g", res.AvgJCTS, want)
	}
	// A job arriving exactly on a slot start runs in that slot.
	res, err = e.Run([]TraceJob{{"c", "ctc", 2400, 1}}, FIFO{}, nil)
	if err != nil || math.Abs(res.JCTs["c"]-1/v) > 1e-6 {
		t.Errorf("on the grid: %v, %v", res.JCTs, err)
	}
	// A long job over several slots: reward per slot is its share.
	var rewards []float64
	res, err = e.Run([]TraceJob{{"d", "ctc", 0, 20}}, FIFO{}, func(r *SlotRecord) { rewards = append(rewards, r.Reward) })
	if err != nil {
		t.Fatal(err)
	}
	full := v * 1200 / 20
	if len(rewards) != 3 || math.Abs(rewards[0]-full) > 1e-9 || math.Abs(rewards[1]-full) > 1e-9 || math.Abs(res.Reward-1) > 1e-9 {
		t.Errorf("rewards %v (full slot %g), total %g", rewards, full, res.Reward)
	}
}

// cheat breaks the rules behind the Slot's back.
type cheat struct{}

func (cheat) Name() string { return "cheat" }
func (cheat) Decide(s *Slot) {
	s.Alloc[0].Workers = 99
}

func TestEnvErrors(t *testing.T) {
	e := &Env{Servers: testbed()}
	ok := []TraceJob{{"a", "ctc", 0, 10}}
	cases := []struct {
		env  *Env
		jobs []TraceJob
		sz   Sizer
		want string
	}{
		{e, []TraceJob{{"a", "nope", 0, 1}}, DRF{}, `unknown model "nope"`},
		{e, []TraceJob{{"a", "ctc", 0, 0}}, DRF{}, "job a: epochs 0"},
		{e, []TraceJob{{"a", "ctc", 0, 1}, {"a", "ctc", 1, 1}}, DRF{}, "duplicate id"},
		{&Env{Servers: Servers(2, 1, 16)}, []TraceJob{{"a", "vgg-16", 0, 1}}, DRF{}, "minimum does not fit"},
		{&Env{}, ok, DRF{}, "no servers"},
		{e, ok, nil, "no sizer"},
		{e, ok, cheat{}, "sizer cheat"},
		{&Env{Servers: testbed(), MaxSlots: 1}, []TraceJob{{"a", "ctc", 0, 1000}}, DRF{}, "MaxSlots"},
	}
	for _, c := range cases {
		_, err := c.env.Run(c.jobs, c.sz, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.jobs, err, c.want)
		}
	}
	if res, err := e.Run(nil, DRF{}, nil); err != nil || res.Slots != 0 {
		t.Errorf("no jobs: %+v, %v", res, err)
	}
}

// 2000 random slots on random clusters: random actions (infeasible ones
// included) through Apply never break a bound or a server, an infeasible
// action is refused and changes nothing, and Check passes.
func TestSlotProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for n := 0; n < 2000; n++ {
		servers := make([]Server, 1+rng.Intn(6))
		for i := range servers {
			servers[i] = Server{GPUs: 1 + rng.Intn(4), CPUs: 4 + rng.Intn(29)}
		}
		jobs := make([]Job, rng.Intn(9))
		for j := range jobs {
			minW, minP := 1+rng.Intn(2), 1+rng.Intn(2)
			jobs[j] = Job{
				ID: fmt.Sprintf("j%d", j), Model: "ctc", Epochs: 1 + rng.Float64()*100,
				Bounds: Bounds{MinWorkers: minW, MaxWorkers: minW + rng.Intn(5), MinPS: minP, MaxPS: minP + rng.Intn(5)},
				Demand: Demand{WorkerGPUs: 1 + rng.Intn(2), WorkerCPUs: 1 + rng.Intn(4), PSCPUs: 1 + rng.Intn(4)},
			}
		}
		s := NewSlot(servers, jobs, Table1().Speed())
		for a := rng.Intn(40); a > 0; a-- {
			j, k := rng.Intn(len(jobs)+2)-1, Kind(rng.Intn(int(numKinds)+1)) // numKinds: no such kind
			feasible := s.Feasible(j, k)
			before := snapshot(s)
			err := s.Apply(j, k)
			switch {
			case !feasible && err == nil:
				t.Fatalf("slot %d: infeasible %v for job %d applied", n, k, j)
			case !feasible && !reflect.DeepEqual(before, snapshot(s)):
				t.Fatalf("slot %d: refused %v for job %d changed the slot", n, k, j)
			case feasible && err != nil:
				t.Fatalf("slot %d: feasible %v for job %d refused: %v", n, k, j, err)
			}
		}
		s.Stop()
		if err := Check(servers, s); err != nil {
			t.Fatalf("slot %d: %v", n, err)
		}
		for j, a := range s.Alloc {
			b := jobs[j].Bounds
			if a.Workers > b.MaxWorkers || a.PS > b.MaxPS || (s.Running(j) && (a.Workers < b.MinWorkers || a.PS < b.MinPS)) {
				t.Fatalf("slot %d: job %d at %d workers, %d PS, bounds %+v", n, j, a.Workers, a.PS, b)
			}
		}
		for i, f := range s.Free {
			if f.GPUs < 0 || f.CPUs < 0 || f.GPUs > servers[i].GPUs || f.CPUs > servers[i].CPUs {
				t.Fatalf("slot %d: server %d free %+v of %+v", n, i, f, servers[i])
			}
		}
	}
}

type testSlotState struct {
	Alloc   []Alloc
	Free    []Server
	Actions int
}

func snapshot(s *Slot) testSlotState {
	st := testSlotState{Free: append([]Server(nil), s.Free...), Actions: s.Actions}
	for _, a := range s.Alloc {
		a.WorkerOn = append([]int(nil), a.WorkerOn...)
		a.PSOn = append([]int(nil), a.PSOn...)
		st.Alloc = append(st.Alloc, a)
	}
	return st
}

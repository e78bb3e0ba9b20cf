package sim_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/sizer"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// planChecker is the round's decider, checking every plan it makes: no
// GPU twice or failed, no server over its GPUs or CPUs, every two-role
// job within its bounds (workers whole and on one server each).
type planChecker struct {
	t      *testing.T
	d      *round.Single
	cpus   int
	rounds int
	err    error
	// intents counts the plans' intents by kind.
	intents map[engine.Intent]int
}

func (c *planChecker) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p, err := c.d.Round(s)
	if err == nil && c.err == nil {
		c.err = checkDL2Plan(s, p, c.cpus)
	}
	if p != nil {
		if c.intents == nil {
			c.intents = map[engine.Intent]int{}
		}
		for _, in := range p.Intents {
			c.intents[in.Intent]++
		}
	}
	c.rounds++
	return p, err
}

func checkDL2Plan(s *engine.Snapshot, p *engine.Plan, cpus int) error {
	srvOf, perSrv := map[string]string{}, map[string]int{}
	for _, g := range s.GPUs {
		if !g.Failed {
			srvOf[g.ID] = g.Server
			perSrv[g.Server]++
		}
	}
	jobs := map[string]*engine.Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	used := map[string]bool{}
	gpus, cores := map[string]int{}, map[string]int{}
	for _, a := range p.Assignments {
		j := jobs[a.Jobs[0]]
		if len(a.Jobs) != 1 || j == nil || !j.Elastic.TwoRole() {
			return fmt.Errorf("t=%v: assignment %+v", s.TimeS, a)
		}
		dj := sizer.JobOf(j, 0)
		b, d := dj.Bounds, dj.Demand
		w := len(a.GPUs) / d.WorkerGPUs
		if len(a.GPUs)%d.WorkerGPUs != 0 || w < b.MinWorkers || w > b.MaxWorkers || a.PS < b.MinPS || a.PS > b.MaxPS || len(a.PSServers) != a.PS {
			return fmt.Errorf("t=%v: job %s outside its bounds %+v: %d workers, %d PS", s.TimeS, j.ID, b, w, a.PS)
		}
		for k, g := range a.GPUs {
			if used[g] || srvOf[g] == "" {
				return fmt.Errorf("t=%v: GPU %s twice or not healthy", s.TimeS, g)
			}
			used[g] = true
			gpus[srvOf[g]]++
			first := a.GPUs[k-k%d.WorkerGPUs]
			if srvOf[g] != srvOf[first] {
				return fmt.Errorf("t=%v: job %s: a worker over two servers %v", s.TimeS, j.ID, a.GPUs)
			}
			if k%d.WorkerGPUs == 0 {
				cores[srvOf[g]] += d.WorkerCPUs
			}
		}
		for _, v := range a.PSServers {
			if perSrv[v] == 0 {
				return fmt.Errorf("t=%v: job %s: PS on unknown server %s", s.TimeS, j.ID, v)
			}
			cores[v] += d.PSCPUs
		}
	}
	for v, n := range gpus {
		if n > perSrv[v] || cores[v] > cpus {
			return fmt.Errorf("t=%v: server %s holds %d GPUs of %d, %d CPUs of %d", s.TimeS, v, n, perSrv[v], cores[v], cpus)
		}
	}
	for v, c := range cores {
		if c > cpus {
			return fmt.Errorf("t=%v: server %s: %d CPUs of %d", s.TimeS, v, c, cpus)
		}
	}
	return nil
}

// runDL2 runs the trace through sim.Run, the loop and allocator/sizer's
// mechanism with sz, on n servers of g GPUs and cpus CPUs, slots of slotS.
func runDL2(t *testing.T, models dl2.Models, jobs []dl2.TraceJob, sz dl2.Sizer, n, g, cpus int, slotS, noise float64, seed int64) (*sim.Result, *planChecker) {
	t.Helper()
	tj, err := sim.DL2Jobs(models, jobs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sizer.New(sizer.Options{Sizer: sz, Speed: models.Speed(), CPUsPerServer: cpus})
	if err != nil {
		t.Fatal(err)
	}
	c := &planChecker{t: t, d: &round.Single{Mechanism: m}, cpus: cpus}
	res, err := sim.Run(&sim.SliceSource{Jobs: tj}, sim.Options{
		Cluster: sim.Cluster{Types: map[string]int{"v100": n * g}, GPUsPerServer: g},
		Engine:  engine.Config{Policy: sz.Name(), RoundS: slotS},
		Decider: c,
		DL2:     &sim.DL2{Models: models, Noise: noise, Seed: seed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	return res, c
}

func relDiff(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// sizerFor is a baseline, or for "dl2" the learned sizer with an
// untrained model (seeded: its decisions read every job's slots run and
// epochs left, so it checks the history the mechanism keeps).
func sizerFor(t *testing.T, name string, models dl2.Models) dl2.Sizer {
	t.Helper()
	if name != "dl2" {
		sz, err := dl2.Teacher(name)
		if err != nil {
			t.Fatal(err)
		}
		return sz
	}
	var b bytes.Buffer
	if err := dl2.NewModel(10, models.Names(), 2, []int{32}, 1).Write(&b); err != nil {
		t.Fatal(err)
	}
	m, err := dl2.ReadModel("untrained", &b)
	if err != nil {
		t.Fatal(err)
	}
	return dl2.NewPolicy(m, func(format string, args ...any) { t.Fatalf("dl2 sizer: "+format, args...) })
}

// TestDL2AgreesWithEnv is the simulator against DL2's own environment: a
// 60-job generated trace on DL2's testbed (13 servers of 2 GPUs and 16
// CPUs, 1200 s slots), sized by every baseline (drf, fifo, optimus, srtf,
// tetris) and the learned sizer (an untrained model) through the loop
// and allocator/sizer, gives the average JCT, makespan and every job's
// JCT of dl2.Env.Run on the same trace and sizer (relative difference
// below 1e-9), without noise and with dl2.Env's noise (sigma 0.1); no
// plan over-commits a server or a bound.
func TestDL2AgreesWithEnv(t *testing.T) {
	models := dl2.Table1()
	jobs := dl2.Generate(dl2.GenOptions{Jobs: 60, Seed: 3, SlotS: 1200}, models)
	servers := dl2.Servers(13, 2, 16)
	for _, noise := range []float64{0, 0.1} {
		for _, name := range []string{"drf", "fifo", "optimus", "srtf", "tetris", "dl2"} {
			sz := sizerFor(t, name, models)
			env := dl2.Env{Servers: servers, SlotS: 1200, Models: models, Noise: noise, Seed: 11}
			want, err := env.Run(jobs, sz, nil)
			if err != nil {
				t.Fatal(err)
			}
			sz = sizerFor(t, name, models) // a fresh one: the same decisions from the same state
			got, c := runDL2(t, models, jobs, sz, 13, 2, 16, 1200, noise, 11)
			t.Logf("noise %g %-8s avg JCT env %.6f s sim %.6f s (rel %.2g), makespan env %.1f sim %.1f (rel %.2g), slots env %d sim %d; intents %v",
				noise, name, want.AvgJCTS, got.AvgJCTS, relDiff(want.AvgJCTS, got.AvgJCTS), want.MakespanS, got.MakespanS,
				relDiff(want.MakespanS, got.MakespanS), want.Slots, got.Rounds, c.intents)
			if !got.Finished || got.JobsDone != len(jobs) {
				t.Fatalf("%s: %d of %d jobs done", name, got.JobsDone, len(jobs))
			}
			if d := relDiff(want.AvgJCTS, got.AvgJCTS); d > 1e-9 {
				t.Errorf("noise %g %s: avg JCT %v (env) vs %v (sim)", noise, name, want.AvgJCTS, got.AvgJCTS)
			}
			if d := relDiff(want.MakespanS, got.MakespanS); d > 1e-9 {
				t.Errorf("noise %g %s: makespan %v (env) vs %v (sim)", noise, name, want.MakespanS, got.MakespanS)
			}
			if want.Slots != got.Rounds || c.rounds != got.Rounds {
				t.Errorf("noise %g %s: %d slots (env), %d rounds (sim), %d decided", noise, name, want.Slots, got.Rounds, c.rounds)
			}
			sorted := slices.Clone(jobs)
			slices.SortStableFunc(sorted, func(a, b dl2.TraceJob) int {
				switch {
				case a.ArrivalS < b.ArrivalS:
					return -1
				case a.ArrivalS > b.ArrivalS:
					return 1
				}
				return 0
			})
			for _, jr := range got.Jobs {
				if w := want.JCTs[sorted[jr.ID].ID]; relDiff(w, jr.JCTS) > 1e-9 {
					t.Errorf("noise %g %s: job %s: JCT %v (env) vs %v (sim)", noise, name, sorted[jr.ID].ID, w, jr.JCTS)
				}
			}
		}
	}
}

// TestDL2Jobs: the trace's jobs in arrival order with their bounds,
// demand and batch; an unknown model is an error; a two-role job without
// Options.DL2 is refused.
func TestDL2Jobs(t *testing.T) {
	models := dl2.Table1()
	jobs := []dl2.TraceJob{{ID: "b", Model: "vgg-16", ArrivalS: 50, Epochs: 3}, {ID: "a", Model: "ctc", ArrivalS: 10, Epochs: 2.5}}
	tj, err := sim.DL2Jobs(models, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ctc, vgg := models.JobFor(jobs[1]), models.JobFor(jobs[0])
	want := []trace.Job{
		{ID: 0, Model: "ctc", ScaleFactor: ctc.Demand.WorkerGPUs, TotalSteps: 2.5, Priority: 1, ArrivalS: 10,
			ElasticMaxGPUs: ctc.Bounds.MaxWorkers * ctc.Demand.WorkerGPUs, ElasticStepGPUs: ctc.Demand.WorkerGPUs,
			PSMin: 1, PSMax: ctc.Bounds.MaxPS, PSCores: float64(ctc.Demand.PSCPUs), WorkerCores: float64(ctc.Demand.WorkerCPUs), Batch: ctc.Batch},
		{ID: 1, Model: "vgg-16", ScaleFactor: vgg.Demand.WorkerGPUs, TotalSteps: 3, Priority: 1, ArrivalS: 50,
			ElasticMaxGPUs: vgg.Bounds.MaxWorkers * vgg.Demand.WorkerGPUs, ElasticStepGPUs: vgg.Demand.WorkerGPUs,
			PSMin: 1, PSMax: vgg.Bounds.MaxPS, PSCores: float64(vgg.Demand.PSCPUs), WorkerCores: float64(vgg.Demand.WorkerCPUs), Batch: vgg.Batch},
	}
	if fmt.Sprint(tj) != fmt.Sprint(want) {
		t.Fatalf("got  %+v\nwant %+v", tj, want)
	}
	if _, err := sim.DL2Jobs(models, []dl2.TraceJob{{ID: "x", Model: "nope", Epochs: 1}}); err == nil {
		t.Fatal("unknown model accepted")
	}
	_, err = sim.Run(&sim.SliceSource{Jobs: tj}, sim.Options{Cluster: sim.Cluster{Types: map[string]int{"v100": 4}, GPUsPerServer: 2},
		Engine: engine.Config{Policy: "fifo", RoundS: 1200}})
	if err == nil {
		t.Fatal("a two-role job ran without Options.DL2")
	}
}

package engine

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/rondo-sched/rondo/policies"
)

// TestIncrementalLASEvents drives the engine's LAS session through every
// kind of change its problem can see between recomputes — arrivals,
// departures, a job's throughputs, scale factor and weight changing under
// the same id, GPUs failing and recovering (the session rebuilt) — and
// checks each recompute's objective against a cold solve, and that the
// session is used (and kept) when it should be and not otherwise.
func TestIncrementalLASEvents(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	types := []string{"k80", "p100", "v100"}
	var gpus []GPU
	for _, typ := range types {
		for i := 0; i < 6; i++ {
			gpus = append(gpus, GPU{ID: fmt.Sprintf("%s-%d", typ, i), Type: typ, Server: fmt.Sprintf("%s-s%d", typ, i/2)})
		}
	}
	newJob := func(id int) Job {
		tp := map[string]float64{}
		for _, typ := range types {
			if r.Float64() < 0.9 {
				tp[typ] = 0.5 + 4*r.Float64()
			}
		}
		return Job{ID: fmt.Sprintf("j%03d", id), ScaleFactor: 1 + r.Intn(2), Throughput: tp, Weight: float64(1 + r.Intn(3)),
			TotalSteps: 1e6, RemainingSteps: 1e6}
	}
	solves := 0
	e, err := New(Config{Policy: "max_min_fairness_perf", RoundS: 360,
		OnSolve: func(p *policies.Problem, a *policies.Allocation) {
			solves++
			cold, err := policies.Solve("max_min_fairness_perf", p)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(a.Objective-cold.Objective) / math.Max(cold.Objective, 1e-6); d > 2e-9 {
				t.Errorf("solve %d: objective %.15g, cold %.15g", solves, a.Objective, cold.Objective)
			}
			checkLAS(t, p, a)
		}})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	next := 0
	for ; next < 12; next++ {
		jobs = append(jobs, newJob(next))
	}
	var sess *policies.LASSession
	for step := 0; step < 60; step++ {
		s := &Snapshot{TimeS: float64(step) * 360, GPUs: gpus, Jobs: append([]Job(nil), jobs...)}
		recomputed, _, err := e.Allocate(s)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if e.las == nil || e.las.sess.Len() != len(jobs) {
			t.Fatalf("step %d: session %+v, %d jobs", step, e.las, len(jobs))
		}
		if step > 0 && recomputed && e.las.sess != sess && step%10 != 9 {
			t.Errorf("step %d: the session was rebuilt without a GPU change", step)
		}
		sess = e.las.sess
		// The next change.
		switch step % 10 {
		case 8: // a GPU fails or recovers: rebuilt next step
			i := r.Intn(len(gpus))
			gpus = append([]GPU(nil), gpus...)
			gpus[i].Failed = !gpus[i].Failed
		case 5, 6: // arrivals
			jobs = append(jobs, newJob(next))
			next++
		case 7: // a departure
			i := r.Intn(len(jobs))
			jobs = append(jobs[:i:i], jobs[i+1:]...)
		case 0: // throughputs change (an estimate)
			i := r.Intn(len(jobs))
			tp := map[string]float64{}
			for typ, v := range jobs[i].Throughput {
				tp[typ] = v * (0.5 + r.Float64())
			}
			jobs[i].Throughput = tp
		case 1: // the scale factor changes
			i := r.Intn(len(jobs))
			jobs[i].ScaleFactor = 3 - jobs[i].ScaleFactor
		case 2: // the weight changes
			i := r.Intn(len(jobs))
			jobs[i].Weight++
		case 3: // a throughput changes in place (the same map)
			i := r.Intn(len(jobs))
			for typ := range jobs[i].Throughput {
				jobs[i].Throughput[typ] *= 2
				break
			}
		default: // nothing but progress: no recompute
			for i := range jobs {
				jobs[i].RemainingSteps -= 100
			}
		}
	}
	// Changes to a job under the same id are no reset events: the next
	// recompute (an arrival, a departure, a GPU change) sees them.
	if solves < 20 {
		t.Fatalf("%d solves", solves)
	}

	// Not for the session: forced cold, Gavel-compat, another policy.
	for _, cfg := range []Config{
		{Policy: "max_min_fairness_perf", ColdSolve: true},
		{Policy: "max_min_fairness_perf", GavelCompat: true},
		{Policy: "max_min_fairness"},
	} {
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Allocate(&Snapshot{GPUs: gpus, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		if e.alloc == nil || e.las != nil {
			t.Errorf("%+v: allocation %v, session %v", cfg, e.alloc != nil, e.las != nil)
		}
	}
}

// checkLAS checks a LAS allocation against the problem's own data: every
// job reaches the objective's level (Σ_j T_mj·sf_m·X_mj / (w_m·P_m), P_m
// the job's throughput on an equal share of every type), no type is
// oversubscribed, no row exceeds 1. An allocation solved for stale data (a
// job's old throughputs, scale factor or weight) fails it.
func checkLAS(t *testing.T, p *policies.Problem, a *policies.Allocation) {
	t.Helper()
	used := make([]float64, len(a.Types))
	total := 0.0
	for _, g := range p.GPUTypes {
		total += float64(g.Count)
	}
	for m, j := range p.Jobs {
		share := 0.0
		for _, typ := range a.Types {
			share += j.Throughput[typ] * float64(p.GPUTypes[typ].Count) / total
		}
		sf, w := float64(j.ScaleFactor), j.Weight
		level, row := 0.0, 0.0
		for i, typ := range a.Types {
			x := a.X[m][i]
			level += j.Throughput[typ] * sf * x / (w * share)
			used[i] += sf * x
			row += x
		}
		if share > 0 && level < a.Objective*(1-1e-7) {
			t.Errorf("job %s: level %.9g below the objective %.9g", j.ID, level, a.Objective)
		}
		if row > 1+1e-9 {
			t.Errorf("job %s: row sums to %v", j.ID, row)
		}
	}
	for i, typ := range a.Types {
		if used[i] > float64(p.GPUTypes[typ].Count)+1e-7 {
			t.Errorf("type %s: %v GPUs used of %d", typ, used[i], p.GPUTypes[typ].Count)
		}
	}
}

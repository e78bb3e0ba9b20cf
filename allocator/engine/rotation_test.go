package engine

import (
	"fmt"
	"testing"
)

// TestIdenticalJobsRotateUnderLAS pins why TestScaleBench (e2e) restarts
// every job each round under aware LAS: identical jobs filling a cluster of
// three types get the same mixed allocation (each a share of every type),
// so each round the mechanism moves every job to a type it has had less of
// than its share. That is Gavel's time-sharing, not churn: an integral
// policy (FIFO) on the same cluster keeps every job where it is.
func TestIdenticalJobsRotateUnderLAS(t *testing.T) {
	var gpus []GPU
	for s, typ := range []string{"v100", "p100", "k80", "v100"} {
		for i := 0; i < 25; i++ {
			gpus = append(gpus, GPU{ID: fmt.Sprintf("g%d-%d", s, i), Type: typ, Server: fmt.Sprintf("s%d", s)})
		}
	}
	for _, tc := range []struct {
		policy string
		rotate bool
	}{{"max_min_fairness_perf", true}, {"fifo_perf", false}, {"fifo", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			jobs := make([]Job, len(gpus))
			for i := range jobs {
				jobs[i] = Job{ID: fmt.Sprintf("j%03d", i), ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
					Throughput: map[string]float64{"v100": 30, "p100": 20, "k80": 8}}
			}
			e, err := New(Config{Policy: tc.policy, RoundS: 360})
			if err != nil {
				t.Fatal(err)
			}
			var running []Assignment
			typeOf := map[string]string{}
			for r, now := 1, 0.0; r <= 3; r, now = r+1, now+360 {
				plan, err := e.Round(&Snapshot{TimeS: now, GPUs: gpus, Jobs: jobs, Running: running})
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.Assignments) != len(jobs) {
					t.Fatalf("round %d: %d assignments for %d jobs on as many GPUs", r, len(plan.Assignments), len(jobs))
				}
				moved := 0
				running = running[:0]
				for _, a := range plan.Assignments {
					id := a.Jobs[0]
					if r > 1 {
						if (a.Action == Start) != (typeOf[id] != a.Type) {
							t.Fatalf("round %d: %s %v from %s to %s", r, id, a.Action, typeOf[id], a.Type)
						}
						if a.Action == Start {
							moved++
						}
					}
					typeOf[id] = a.Type
					a.Action = Keep
					running = append(running, a)
					// Credit the round, as a backend's ledger would.
					for i := range jobs {
						if jobs[i].ID == id {
							rec := map[string]float64{}
							for k, v := range jobs[i].ReceivedS {
								rec[k] = v
							}
							rec[a.Type] += 360
							jobs[i].ReceivedS = rec
						}
					}
				}
				if r == 1 {
					continue
				}
				if want := map[bool]int{true: len(jobs), false: 0}[tc.rotate]; moved != want {
					t.Fatalf("round %d: %d of %d jobs moved, want %d", r, moved, len(jobs), want)
				}
			}
			if tc.rotate {
				// The allocation behind it: every job the same share of
				// every type.
				a := e.alloc
				for m := range a.X {
					for k := range a.X[m] {
						if a.X[m][k] <= 0 || a.X[m][k] != a.X[0][k] {
							t.Fatalf("job %s: x %v, job %s: x %v: want the same mix of all types", a.JobIDs[m], a.X[m], a.JobIDs[0], a.X[0])
						}
					}
				}
			}
		})
	}
}

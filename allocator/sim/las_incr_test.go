package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies"
)

// TestIncrementalLASMatchesCold runs simulations of aware LAS, whose
// engine re-solves incrementally (policies.LASSession), and checks every
// recompute's objective against a cold policies.Solve of the same problem:
// equal within the certified tolerance (each solve is within 1e-9 relative
// of the optimum, so the two within twice that). The runs cover arrivals
// and departures, multi-GPU jobs with weights (scale factors and weights
// in the session's rows) and GPU failures and recoveries (the session
// rebuilt on a count change). The same runs solved cold throughout
// (engine.Config.ColdSolve) are logged beside them: the LAS optimum is not
// unique, so the results may differ slightly.
func TestIncrementalLASMatchesCold(t *testing.T) {
	sched := mixedFaults(t)
	cases := []struct {
		name   string
		tr     trace.Options
		faults *faults.Schedule
	}{
		{"single-gpu", trace.Options{Seed: 0, Rate: 1.4}, nil},
		{"multi-gpu-priority", trace.Options{Seed: 1, Rate: 0.8, MultiGPU: true, MultiPriority: true}, nil},
		{"faults", trace.Options{Seed: 2, Rate: 1.4}, sched},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(cold bool, onSolve func(*policies.Problem, *policies.Allocation)) *Result {
				g, err := trace.NewGenerator(c.tr)
				if err != nil {
					t.Fatal(err)
				}
				o := Options{
					Cluster: Cluster{Types: map[string]int{"v100": 8, "p100": 8, "k80": 8}, GPUsPerServer: 2},
					Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360, ColdSolve: cold,
						OnSolve: onSolve},
					WindowStart: 50, WindowEnd: 150, Faults: c.faults,
				}
				r, err := Run(&GeneratorSource{G: g, Limit: 220}, o)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			solves, worst, maxJobs := 0, 0.0, 0
			counts := map[string]bool{}
			incr := run(false, func(p *policies.Problem, a *policies.Allocation) {
				solves++
				maxJobs = max(maxJobs, len(p.Jobs))
				key := ""
				for _, typ := range []string{"k80", "p100", "v100"} {
					key += fmt.Sprintf("%s:%d ", typ, p.GPUTypes[typ].Count)
				}
				counts[key] = true
				cold, err := policies.Solve("max_min_fairness_perf", p)
				if err != nil {
					t.Fatal(err)
				}
				d := math.Abs(a.Objective-cold.Objective) / math.Max(math.Abs(cold.Objective), 1e-6)
				worst = math.Max(worst, d)
				if d > 2e-9 {
					t.Errorf("solve %d (%d jobs): objective %.15g, cold %.15g (relative difference %.3g)",
						solves, len(p.Jobs), a.Objective, cold.Objective, d)
				}
				if len(a.JobIDs) != len(p.Jobs) {
					t.Fatalf("solve %d: %d rows for %d jobs", solves, len(a.JobIDs), len(p.Jobs))
				}
				for i := range p.Jobs {
					if a.JobIDs[i] != p.Jobs[i].ID {
						t.Fatalf("solve %d: row %d is %s, the problem's job %s", solves, i, a.JobIDs[i], p.Jobs[i].ID)
					}
				}
			})
			if solves < 100 || !incr.Finished {
				t.Fatalf("%d solves, finished %v", solves, incr.Finished)
			}
			if c.faults != nil && len(counts) < 3 {
				t.Fatalf("the failures gave %d distinct clusters: %v", len(counts), counts)
			}
			cold := run(true, nil)
			t.Logf("%d solves (up to %d jobs), worst relative objective difference %.3g; avg JCT %.1f s incremental, %.1f s cold (%+.4f%%), %d vs %d rounds, %d vs %d preemptions",
				solves, maxJobs, worst, incr.AvgJCTS, cold.AvgJCTS, 100*(incr.AvgJCTS/cold.AvgJCTS-1), incr.Rounds, cold.Rounds,
				incr.Preemptions, cold.Preemptions)
		})
	}
}

// mixedFaults is a fault schedule for runs of a few hundred thousand
// seconds on 8 GPUs of each of v100, p100 and k80 (2 per server): GPUs of
// two types fail and recover, a p100 node fails and recovers, so the
// healthy counts take several distinct values.
func mixedFaults(t *testing.T) *faults.Schedule {
	t.Helper()
	sched, err := faults.Parse("inline.csv", strings.NewReader("time_s,kind,target\n"+
		"20000,gpu-fail,gpu:v100:0\n20000,gpu-fail,gpu:k80:3\n60000,gpu-recover,gpu:v100:0\n"+
		"90000,node-fail,node:p100:1\n150000,gpu-recover,gpu:k80:3\n150000,node-recover,node:p100:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return sched
}

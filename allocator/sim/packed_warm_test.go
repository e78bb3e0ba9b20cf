package sim

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies"
)

// TestWarmPackedMatchesCold runs simulations of the space-sharing policies,
// whose recomputes start their LP from the last one's basis (the engine's
// policies.Hint), and checks every recompute's objective against a cold
// policies.Solve of the same problem: equal within 1e-7 relative (Clp's
// optimality tolerance; the packed hint tests use the same bound). The runs
// cover arrivals and departures, multi-GPU jobs (pairs only of equal scale
// factors, rows with weights) and GPU failures and recoveries (types whose
// count changes under the basis).
func TestWarmPackedMatchesCold(t *testing.T) {
	sched := mixedFaults(t)
	cases := []struct {
		name, policy string
		tr           trace.Options
		faults       *faults.Schedule
	}{
		{"las-single-gpu", "max_min_fairness_packed", trace.Options{Seed: 0, Rate: 1.4}, nil},
		{"las-multi-gpu-priority", "max_min_fairness_packed", trace.Options{Seed: 1, Rate: 3, MultiGPU: true, MultiPriority: true}, nil},
		{"las-faults", "max_min_fairness_packed", trace.Options{Seed: 2, Rate: 1.4}, sched},
		{"ftf", "finish_time_fairness_packed", trace.Options{Seed: 3, Rate: 1.4}, nil},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := trace.NewGenerator(c.tr)
			if err != nil {
				t.Fatal(err)
			}
			solves, worst, maxJobs, paired := 0, 0.0, 0, 0
			onSolve := func(p *policies.Problem, a *policies.Allocation) {
				solves++
				maxJobs = max(maxJobs, len(p.Jobs))
				for _, row := range a.PairX {
					for _, v := range row {
						if v > 0 {
							paired++
						}
					}
				}
				cold, err := policies.Solve(c.policy, p)
				if err != nil {
					t.Fatal(err)
				}
				d := math.Abs(a.Objective-cold.Objective) / math.Max(math.Abs(cold.Objective), 1)
				worst = math.Max(worst, d)
				if d > 1e-7 {
					t.Errorf("solve %d (%d jobs): objective %.15g, cold %.15g (relative difference %.3g)",
						solves, len(p.Jobs), a.Objective, cold.Objective, d)
				}
			}
			o := Options{
				Cluster: Cluster{Types: map[string]int{"v100": 8, "p100": 8, "k80": 8}, GPUsPerServer: 2},
				Engine:  engine.Config{Policy: c.policy, RoundS: 360, OnSolve: onSolve},
				Pairs:   true, WindowStart: 50, WindowEnd: 150, Faults: c.faults,
			}
			r, err := Run(&GeneratorSource{G: g, Limit: 220}, o)
			if err != nil {
				t.Fatal(err)
			}
			if solves < 100 || !r.Finished || paired == 0 {
				t.Fatalf("%d solves, finished %v, %d pair shares", solves, r.Finished, paired)
			}
			t.Logf("%d solves (up to %d jobs), %d pair shares, worst relative objective difference %.3g", solves, maxJobs, paired, worst)
		})
	}
}

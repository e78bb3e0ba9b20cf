package sim

import (
	"reflect"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// TestExplainCounts: with Options.Explain the run counts its waiting
// job-rounds by reason and decides exactly as without.
func TestExplainCounts(t *testing.T) {
	jobs, err := trace.Generate(trace.Options{Seed: 1, MultiGPU: true}, 40)
	if err != nil {
		t.Fatal(err)
	}
	run := func(explain bool) *Result {
		res, err := Run(&SliceSource{Jobs: jobs}, Options{
			Cluster: Cluster{Types: map[string]int{"v100": 8, "p100": 8, "k80": 8}, GPUsPerServer: 2, PricePerHourUS: DefaultPrices},
			Engine:  engine.Config{Policy: "max_min_fairness_perf", RoundS: 360},
			Explain: explain,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	off, on := run(false), run(true)
	if off.WaitingReasons != nil {
		t.Errorf("counted without Explain: %v", off.WaitingReasons)
	}
	if on.WaitingReasons["priority"] == 0 || on.WaitingReasons["gang"] == 0 {
		t.Errorf("waiting reasons %v, want priority and gang waits", on.WaitingReasons)
	}
	for k := range on.WaitingReasons {
		if k != "priority" && k != "gang" {
			t.Errorf("reason %q on a cluster that holds every job", k)
		}
	}
	on.WaitingReasons = nil
	for _, r := range []*Result{on, off} {
		r.WallS, r.SolveMSP50, r.SolveMSMax = 0, 0, 0 // timings
	}
	if !reflect.DeepEqual(on, off) {
		t.Errorf("Explain changed the run: avg JCT %v vs %v, %d vs %d preemptions", on.AvgJCTS, off.AvgJCTS, on.Preemptions, off.Preemptions)
	}
}

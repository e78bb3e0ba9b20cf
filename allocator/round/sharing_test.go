package round

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// Space sharing under cells (issue 13): a packed VC's engine pairs its own
// jobs on its own cells; a VC with space_sharing off and opportunistic jobs
// are never paired with another VC's jobs; a pair kept on the same GPUs is
// kept, and every GPU is held by one unit. Over several rounds, with the
// placement of each in force.
func TestCellsPairs(t *testing.T) {
	cls := map[string]class{"r0": {vc: "research"}, "r1": {vc: "research"}, "r2": {vc: "research"}, "r3": {vc: "research"},
		"p0": {vc: "prod"}, "p1": {vc: "prod"}, "p2": {vc: "prod"}, "o0": {vc: "research", opp: true}}
	for _, noShare := range []bool{false, true} {
		d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
			Policies: []string{"max_min_fairness_packed", "max_min_fairness_packed"}, OppPolicy: "max_min_fairness_perf", RoundS: 10,
			NoSpaceSharing: map[string]bool{"prod": true, "research": noShare}})
		if err != nil {
			t.Fatal(err)
		}
		s := &engine.Snapshot{GPUs: twoNodes()}
		ids := []string{"r0", "r1", "r2", "r3", "p0", "p1", "p2", "o0"}
		for _, id := range ids {
			s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
				TotalSteps: 1e6, RemainingSteps: 1e6})
		}
		// Every two jobs pair at 0.9 of their isolated speed each.
		for i, a := range ids {
			for _, b := range ids[i+1:] {
				s.Pairs = append(s.Pairs, engine.Pair{Jobs: [2]string{a, b}, Throughput: map[string][2]float64{"v100": {0.9, 0.9}}})
			}
		}
		setClasses(s, cls, "node-a", "node-b")
		paired := 0
		for r := 0; r < 6; r++ {
			p, err := d.Round(s)
			if err != nil {
				t.Fatal(err)
			}
			held := map[string]string{}
			for _, a := range p.Assignments {
				for _, g := range a.GPUs {
					if u, dup := held[g]; dup {
						t.Fatalf("round %d: GPU %s held by %s and %v", r, g, u, a.Jobs)
					}
					held[g] = engine.UnitKey(a.Jobs)
				}
				if len(a.Jobs) != 2 {
					continue
				}
				paired++
				x, y := cls[a.Jobs[0]], cls[a.Jobs[1]]
				if x.vc != "research" || y.vc != "research" || x.opp || y.opp || noShare {
					t.Fatalf("round %d: pair %v (%+v, %+v) with research sharing %v", r, a.Jobs, x, y, !noShare)
				}
				if a.Servers[0] != "id-node-a" {
					t.Fatalf("round %d: research pair %v outside its cell: %+v", r, a.Jobs, a)
				}
			}
			for _, in := range p.Intents {
				if in.With != "" && len(in.GPUs) == 0 {
					t.Fatalf("intent %+v", in)
				}
			}
			// The next round sees this placement in force; a kept pair is
			// kept again.
			if r > 0 {
				for _, a := range p.Assignments {
					if len(a.Jobs) == 2 && a.Action == engine.Keep {
						for _, in := range p.Intents {
							if in.Job == a.Jobs[0] && in.Intent != engine.IntentKeep {
								t.Fatalf("kept pair %v: intent %s", a.Jobs, in.Intent)
							}
						}
					}
				}
			}
			s.TimeS += 10
			s.Running = p.Assignments
		}
		if !noShare && paired == 0 {
			t.Error("the packed VC never paired its jobs")
		}
	}
}

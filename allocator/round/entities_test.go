package round

import (
	"math"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
)

// TestEntitiesPerVC: each VC's engine is given that VC's entities. In
// research (two virtual GPUs, entities a:1 and b:3) the entities get half
// a GPU and one and a half, split evenly between their two jobs (one of
// each named by its entity, one by its user); prod declares none, so its
// three jobs share its two GPUs equally whatever their entity fields say.
func TestEntitiesPerVC(t *testing.T) {
	const wf = "max_min_fairness_water_filling_perf"
	ents := map[string]policies.Entity{"a": {Weight: 1, Policy: "fairness"}, "b": {Weight: 3, Policy: "fairness"}}
	cfg := CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{wf, wf}, RoundS: 10, Entities: []map[string]policies.Entity{ents, nil}}
	d, err := NewCells(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	for _, j := range [][4]string{{"r0", "research", "a", ""}, {"r1", "research", "", "a"}, {"r2", "research", "b", ""},
		{"r3", "research", "", "b"}, {"p0", "prod", "a", ""}, {"p1", "prod", "b", ""}, {"p2", "prod", "", "b"}} {
		s.Jobs = append(s.Jobs, engine.Job{ID: j[0], VC: j[1], Entity: j[2], User: j[3], ScaleFactor: 1,
			Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 100, RemainingSteps: 100})
	}
	setClasses(s, nil, "node-a", "node-b")
	p, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	al := p.Allocation
	col := slices.Index(al.Types, "v100")
	want := map[string]float64{"r0": 0.25, "r1": 0.25, "r2": 0.75, "r3": 0.75, "p0": 2.0 / 3, "p1": 2.0 / 3, "p2": 2.0 / 3}
	for m, id := range al.JobIDs {
		if math.Abs(al.X[m][col]-want[id]) > 1e-6 {
			t.Errorf("x[%s] = %g, want %g", id, al.X[m][col], want[id])
		}
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("not in the allocation: %v", want)
	}
	cfg.Entities = cfg.Entities[:1]
	if _, err := NewCells(cfg); err == nil {
		t.Errorf("entities for 1 VC of 2 accepted")
	}
}

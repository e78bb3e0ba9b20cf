package round

import (
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
)

func spec() cells.Spec {
	return cells.Spec{
		Types: []cells.CellType{{Name: "v100", GPUType: "v100"}, {Name: "v100-node", Child: "v100", Count: 2, Node: true}},
		Cells: []cells.TopCell{{Name: "a", Type: "v100-node"}, {Name: "b", Type: "v100-node"}},
		VCs: []cells.VC{{Name: "research", Quota: []cells.Quota{{Type: "v100-node", Count: 1}}},
			{Name: "prod", Quota: []cells.Quota{{Type: "v100-node", Count: 1}}}},
	}
}

// twoNodes: cells a and b of spec() as Nomad nodes node-a and node-b (ids
// id-node-*), two V100s each.
func twoNodes() []engine.GPU {
	var gpus []engine.GPU
	for _, n := range []string{"node-a", "node-b"} {
		for _, g := range []string{"g0", "g1"} {
			gpus = append(gpus, engine.GPU{ID: n + "-" + g, Type: "v100", Server: "id-" + n})
		}
	}
	return gpus
}

func TestRoundHonoursVCsAndKeeps(t *testing.T) {
	class := map[string]class{"r0": {vc: "research"}, "r1": {vc: "research"}, "r2": {vc: "research"},
		"p0": {vc: "prod"}, "o0": {vc: "research", opp: true}, "x": {vc: "nowhere"}}
	d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, OppPolicy: "max_min_fairness_perf", RoundS: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	for _, id := range []string{"r0", "r1", "r2", "p0", "o0", "x"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100})
	}
	setClasses(s, class, "node-a", "node-b")
	p, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]engine.Assignment{}
	for _, a := range p.Assignments {
		on[a.Jobs[0]] = a
		if a.Action != engine.Start || len(a.Servers) != 1 {
			t.Errorf("first round: %+v", a)
		}
	}
	research := 0
	for _, id := range []string{"r0", "r1", "r2"} {
		if a, ok := on[id]; ok {
			research++
			if a.Servers[0] != "id-node-a" {
				t.Errorf("research job %s outside its cell: %+v", id, a)
			}
		}
	}
	if research != 2 {
		t.Errorf("%d research jobs run, want 2 (its quota)", research)
	}
	if a, ok := on["p0"]; !ok || a.Servers[0] != "id-node-b" {
		t.Errorf("prod job: %+v", a)
	}
	if a, ok := on["o0"]; !ok || a.Servers[0] != "id-node-b" {
		t.Errorf("opportunistic job should use prod's idle GPU: %+v", a)
	}
	if _, ok := on["x"]; ok {
		t.Errorf("job of an undeclared VC ran")
	}
	// Next round with that placement in force: kept, not restarted.
	s.TimeS, s.Running = 10, p.Assignments
	p2, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p2.Assignments {
		if prev, ok := on[a.Jobs[0]]; ok && slices.Equal(prev.GPUs, a.GPUs) && a.Action != engine.Keep {
			t.Errorf("job %s on the same GPUs not kept", a.Jobs[0])
		}
	}
	// A restarted agent: fresh cell state, jobs running in Nomad. Whatever
	// lands on the same GPUs is kept; running jobs left out are suspended.
	d2, _ := NewCells(d.cfg)
	p3, err := d2.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, a := range p3.Assignments {
		in[a.Jobs[0]] = true
	}
	for id := range on {
		if !in[id] && !slices.Contains(p3.Suspend, id) {
			t.Errorf("running job %s neither planned nor suspended after restart", id)
		}
	}
}

func TestMissingGPUsAreBad(t *testing.T) {
	var warned []string
	d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, RoundS: 10,
		Warn: func(msg string, _ ...any) { warned = append(warned, msg) }})
	if err != nil {
		t.Fatal(err)
	}
	// Only node-a reports GPUs: prod's jobs cannot run.
	s := &engine.Snapshot{GPUs: []engine.GPU{{ID: "a0", Type: "v100", Server: "node-a"}, {ID: "a1", Type: "v100", Server: "node-a"}},
		Jobs: []engine.Job{{ID: "p0", VC: "prod", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 1, RemainingSteps: 1}}}
	p, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Assignments {
		for _, g := range a.GPUs {
			if g != "a0" && g != "a1" {
				t.Errorf("placed on a GPU Nomad does not report: %+v", a)
			}
		}
	}
	if len(warned) == 0 {
		t.Errorf("no warning about the missing GPUs")
	}
}

// TestHistoryRoundTrip: a decider built from the same config takes another's
// history (every VC engine's and the opportunistic one's) unchanged; a
// single engine's history is refused.
func TestHistoryRoundTrip(t *testing.T) {
	class := map[string]class{"r0": {vc: "research"}, "r1": {vc: "research"}, "r2": {vc: "research"},
		"p0": {vc: "prod"}, "o0": {vc: "research", opp: true}}
	mk := func() *Cells {
		d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
			Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, OppPolicy: "max_min_fairness_perf", RoundS: 10})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	tput := map[string]float64{"r0": 1, "r1": 2, "r2": 3, "p0": 1, "o0": 1}
	for _, id := range []string{"r0", "r1", "r2", "p0", "o0"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": tput[id]}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100, ReceivedS: map[string]float64{}})
	}
	setClasses(s, class, "node-a", "node-b")
	d1 := mk()
	for r := 0; r < 3; r++ {
		p, err := d1.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			for _, a := range p.Assignments {
				if a.Jobs[0] == j.ID {
					rs := map[string]float64{}
					for k, v := range j.ReceivedS {
						rs[k] = v
					}
					rs["v100"] += 10
					j.ReceivedS = rs
				}
			}
		}
		s.TimeS += 10
		s.Running = p.Assignments
	}
	h, err := d1.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	d2 := mk()
	if err := d2.UnmarshalHistory(h); err != nil {
		t.Fatal(err)
	}
	h2, _ := d2.MarshalHistory()
	if string(h) != string(h2) {
		t.Errorf("history changed in a round trip:\n%s\n%s", h, h2)
	}
	if err := d2.UnmarshalHistory([]byte(`{"policy":"max_min_fairness_perf"}`)); err == nil {
		t.Errorf("a single engine's history was taken by the per-VC decider")
	}
}

// TestPlanCarriesEveryEnginesX: the plan's allocation holds each job's row
// of its own engine's X (the VC engines' and the opportunistic one's), so
// that the agent's status shows x under per-VC engines too.
func TestPlanCarriesEveryEnginesX(t *testing.T) {
	class := map[string]class{"r0": {vc: "research"}, "r1": {vc: "research"}, "r2": {vc: "research"},
		"p0": {vc: "prod"}, "o0": {vc: "research", opp: true}}
	d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, OppPolicy: "max_min_fairness_perf", RoundS: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	for _, id := range []string{"r0", "r1", "r2", "p0", "o0"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100})
	}
	setClasses(s, class, "node-a", "node-b")
	p, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	al := p.Allocation
	if al == nil {
		t.Fatal("no allocation in the plan")
	}
	x := map[string]float64{}
	for m, id := range al.JobIDs {
		x[id] = al.X[m][slices.Index(al.Types, "v100")]
	}
	// research: 3 jobs share its 2 virtual GPUs; prod: 1 job on 2; the
	// opportunistic job alone on the GPU prod leaves.
	for id, want := range map[string]float64{"r0": 2.0 / 3, "r1": 2.0 / 3, "r2": 2.0 / 3, "p0": 1, "o0": 1} {
		if got, ok := x[id]; !ok || got < want-1e-3 || got > want+1e-3 {
			t.Errorf("x[%s] = %v (listed %v), want %.3f", id, got, ok, want)
		}
	}
}

// TestMergeAllocations: rows keep their own engine's values over the union
// of the types.
func TestMergeAllocations(t *testing.T) {
	a := &policies.Allocation{Types: []string{"v100"}, JobIDs: []string{"a"}, X: [][]float64{{0.5}}}
	b := &policies.Allocation{Types: []string{"k80", "v100"}, JobIDs: []string{"b", "c"}, X: [][]float64{{0.25, 0.75}, {1, 0}},
		PairJobs: [][2]string{{"b", "c"}}, PairX: [][]float64{{0.1, 0}}}
	m := MergeAllocations([]*engine.Plan{nil, {Allocation: a}, {}, {Allocation: b}})
	if !slices.Equal(m.Types, []string{"v100", "k80"}) || !slices.Equal(m.JobIDs, []string{"a", "b", "c"}) {
		t.Fatalf("merged %+v", m)
	}
	want := [][]float64{{0.5, 0}, {0.75, 0.25}, {0, 1}}
	for i := range want {
		if !slices.Equal(m.X[i], want[i]) {
			t.Errorf("row %s: %v, want %v", m.JobIDs[i], m.X[i], want[i])
		}
	}
	if len(m.PairX) != 1 || !slices.Equal(m.PairX[0], []float64{0, 0.1}) {
		t.Errorf("pairs %v %v", m.PairJobs, m.PairX)
	}
	if MergeAllocations([]*engine.Plan{nil, {}}) != nil {
		t.Errorf("an allocation from no engine")
	}
}

// class is a job's VC and class, as the backend's snapshot carries them.
type class struct {
	vc  string
	opp bool
}

// setClasses gives the snapshot's jobs their VC and class, and the
// snapshot the nodes "id-<name>" named name.
func setClasses(s *engine.Snapshot, c map[string]class, nodes ...string) {
	for i := range s.Jobs {
		if v, ok := c[s.Jobs[i].ID]; ok {
			s.Jobs[i].VC = v.vc
			if v.opp {
				s.Jobs[i].Class = engine.Opportunistic
			}
		}
	}
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, engine.Node{ID: "id-" + n, Name: n, Ready: true})
	}
}

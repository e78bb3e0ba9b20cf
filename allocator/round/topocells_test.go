package round

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// pcieNode: 8 V100s, two per PCIe switch, two switches per NUMA node; NVML
// indices interleave the switches (GPU i on switch i%4), so the derived
// leaf order is not the ids' order.
func pcieNode(name string) (engine.Node, []engine.GPU) {
	n := engine.Node{ID: "id-" + name, Name: name, Pool: "gpu", Ready: true}
	var gs []engine.GPU
	for i := range 8 {
		sw := i % 4
		gs = append(gs, engine.GPU{ID: fmt.Sprintf("%s-g%d", name, i), Type: "v100", Server: n.ID, Index: i,
			Cell: fmt.Sprintf("system0/numa%d/host-bridge%d/pcie-multi-switch%d/pcie-switch%d/board%d", sw/2, sw/2, sw, sw, i)})
	}
	return n, gs
}

// Derived cells: a 2-GPU job of a VC whose quota is one derived PCIe
// switch runs on one switch's GPUs; a quota on a type no node provides is
// left out (warned) instead of failing; a node joining rebuilds the cells.
// A written cell's node (w0, in the pool) is not derived.
func TestTopoCellsDeriveEachRound(t *testing.T) {
	var warnings []string
	written := cells.Spec{
		Types: []cells.CellType{{Name: "k80", GPUType: "k80"}, {Name: "k80-node", Child: "k80", Count: 1, Node: true}},
		Cells: []cells.TopCell{{Name: "w0", Type: "k80-node"}},
		VCs: []cells.VC{{Name: "a", Quota: []cells.Quota{{Type: "v100-pcie-switch", Count: 1}, {Type: "h100-node", Count: 1}}},
			{Name: "b", Quota: []cells.Quota{{Type: "v100-numa", Count: 1}}}},
	}
	d := NewTopoCells(CellsConfig{Spec: written, Selectors: []Selector{{Cell: "w0", Nodes: []string{"w0"}}},
		Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, OppPolicy: "max_min_fairness_perf", RoundS: 10,
		Warn: func(msg string, args ...any) { warnings = append(warnings, fmt.Sprint(msg, args)) }},
		[]TopoSelector{{Pool: "gpu"}})
	n0, g0 := pcieNode("n0")
	s := &engine.Snapshot{Nodes: []engine.Node{n0, {ID: "id-w0", Name: "w0", Pool: "gpu", Ready: true}},
		GPUs: append(g0, engine.GPU{ID: "w0-g0", Type: "k80", Server: "id-w0"})}
	s.Jobs = []engine.Job{{ID: "j", VC: "a", ScaleFactor: 2, Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 100, RemainingSteps: 100}}
	p, err := d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Assignments) != 1 {
		t.Fatalf("plan %+v", p.Assignments)
	}
	got := slices.Sorted(slices.Values(p.Assignments[0].GPUs))
	pairs := [][]string{{"n0-g0", "n0-g4"}, {"n0-g1", "n0-g5"}, {"n0-g2", "n0-g6"}, {"n0-g3", "n0-g7"}}
	if !slices.ContainsFunc(pairs, func(p []string) bool { return slices.Equal(p, got) }) {
		t.Errorf("2-GPU job on %v, not one PCIe switch", got)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "vc a: quota h100-node = 1 cannot be met") {
		t.Errorf("warnings:\n%s", w)
	}
	if cs := d.inner.a.PhysicalGPUs(); len(cs) != 9 || cs[0].Node != "w0" && cs[8].Node != "w0" {
		t.Errorf("cells: %d GPUs", len(cs))
	}
	// A second node joins: rebuilt with both derived nodes.
	n1, g1 := pcieNode("n1")
	s.Nodes, s.GPUs = append(s.Nodes, n1), append(s.GPUs, g1...)
	s.Running = []engine.Assignment{{Jobs: []string{"j"}, Type: "v100", GPUs: p.Assignments[0].GPUs, Servers: p.Assignments[0].Servers}}
	before := d.inner
	p, err = d.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	if d.inner == before || len(d.inner.a.PhysicalGPUs()) != 17 {
		t.Fatalf("not rebuilt for the new node")
	}
	if len(p.Assignments) != 1 || p.Assignments[0].Action != engine.Keep {
		t.Errorf("running job not kept after the rebuild: %+v", p.Assignments)
	}
}

// A derived node that goes down keeps its cell: its GPUs read as bad leaves
// (no rebuild, the job moves off them); when it is back the same cell takes
// them again. A node Nomad no longer lists is dropped (rebuild).
func TestTopoCellsNodeDownKeepsCell(t *testing.T) {
	spec := cells.Spec{VCs: []cells.VC{{Name: "a", Quota: []cells.Quota{{Type: "v100-numa", Count: 1}}}}}
	d := NewTopoCells(CellsConfig{Spec: spec, Policies: []string{"max_min_fairness_perf"}, OppPolicy: "max_min_fairness_perf", RoundS: 10,
		Warn: func(msg string, args ...any) { t.Log(msg, args) }},
		[]TopoSelector{{Pool: "gpu"}})
	n0, g0 := pcieNode("n0")
	n1, g1 := pcieNode("n1")
	up := &engine.Snapshot{Nodes: []engine.Node{n0, n1}, GPUs: append(slices.Clone(g0), g1...)}
	up.Jobs = []engine.Job{{ID: "j", VC: "a", ScaleFactor: 4, Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 100, RemainingSteps: 100}}
	p, err := d.Round(up)
	if err != nil || len(p.Assignments) != 1 {
		t.Fatalf("plan %+v %v", p, err)
	}
	node := p.Assignments[0].Servers[0]
	first, key := d.inner, d.key
	// The job's node goes down: Nomad lists it, not ready, no GPUs.
	down := &engine.Snapshot{Jobs: up.Jobs}
	for _, n := range up.Nodes {
		if n.ID == node {
			n.Ready = false
		}
		down.Nodes = append(down.Nodes, n)
	}
	for _, g := range up.GPUs {
		if g.Server != node {
			down.GPUs = append(down.GPUs, g)
		}
	}
	p, err = d.Round(down)
	if err != nil {
		t.Fatal(err)
	}
	if d.inner != first || d.key != key {
		t.Fatal("a node outage rebuilt the derived cells")
	}
	// The job's cell is released and it is placed on the healthy node
	// within a round more (the cell layer's handling of bad leaves, as with
	// written cells).
	if len(p.Assignments) == 0 {
		if p, err = d.Round(down); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.Assignments) != 1 || p.Assignments[0].Servers[0] == node {
		t.Errorf("job not moved off the down node: %+v", p.Assignments)
	}
	bad := 0
	for _, pg := range d.inner.a.PhysicalGPUs() {
		if pg.Bad {
			bad++
		}
	}
	if bad != 8 {
		t.Errorf("%d bad leaves, want the down node's 8", bad)
	}
	// Back: same cells, no bad leaves.
	if _, err := d.Round(up); err != nil {
		t.Fatal(err)
	}
	if d.inner != first {
		t.Fatal("rebuilt when the node came back")
	}
	for _, pg := range d.inner.a.PhysicalGPUs() {
		if pg.Bad {
			t.Errorf("leaf %s still bad", pg.Addr)
		}
	}
	// Gone from Nomad: dropped.
	gone := &engine.Snapshot{Jobs: up.Jobs, Nodes: []engine.Node{n0}, GPUs: g0}
	if _, err := d.Round(gone); err != nil {
		t.Fatal(err)
	}
	if d.inner == first || len(d.inner.a.PhysicalGPUs()) != 8 {
		t.Errorf("a node Nomad no longer lists is still derived")
	}
}

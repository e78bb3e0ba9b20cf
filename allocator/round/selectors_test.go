package round

import (
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
)

func selectorSpec() cells.Spec {
	return cells.Spec{
		Types: []cells.CellType{{Name: "v100", GPUType: "v100"}, {Name: "v100-node", Child: "v100", Count: 1, Node: true},
			{Name: "v100-rack", Child: "v100-node", Count: 2}},
		Cells: []cells.TopCell{{Name: "east", Type: "v100-rack"}, {Name: "named", Type: "v100-node"},
			{Name: "dgx", Type: "v100-node"}, {Name: "ghost", Type: "v100-node"}},
		VCs: []cells.VC{{Name: "research", Quota: []cells.Quota{{Type: "v100-rack", Count: 1}}}},
	}
}

// TestSelectors: pool and class selectors take matching ready nodes by
// name, after the named cells; bindings survive a node going down and a
// new node joining; a selector without nodes is warned about once.
func TestSelectors(t *testing.T) {
	var warnings []string
	nodes := []engine.Node{
		{Name: "e3", Pool: "east", Ready: true}, {Name: "e1", Pool: "east", Ready: true},
		{Name: "e2", Pool: "east", Ready: true}, {Name: "w1", Pool: "rondo", Class: "dgx", Ready: true},
		{Name: "w0", Pool: "rondo", Class: "dgx", Ready: true},
	}
	d, err := NewCells(CellsConfig{Spec: selectorSpec(), Policies: []string{"max_min_fairness_perf"}, RoundS: 10,
		Selectors: []Selector{{Cell: "east", Pool: "east"}, {Cell: "named", Nodes: []string{"w0"}},
			{Cell: "dgx", Class: "dgx"}, {Cell: "ghost", Pool: "east", Class: "dgx"}},
		Warn: func(msg string, args ...any) { warnings = append(warnings, msg) }})
	if err != nil {
		t.Fatal(err)
	}
	got := d.resolve(nodes)
	want := map[string]string{"east/0": "e1", "east/1": "e2", "named": "w0", "dgx": "w1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s -> %q, want %q (all %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["ghost"]; ok || len(warnings) != 1 || !strings.Contains(warnings[0], "selector") {
		t.Fatalf("ghost: %v warnings %v", got["ghost"], warnings)
	}
	// e1 goes down and e0 joins: east keeps e1 (its GPU is then missing,
	// a bad leaf) and e2, nothing shifts; no new warning.
	nodes[1].Ready = false
	nodes = append(nodes, engine.Node{Name: "e0", Pool: "east", Ready: true})
	got = d.resolve(nodes)
	if got["east/0"] != "e1" || got["east/1"] != "e2" || len(warnings) != 1 {
		t.Fatalf("after e1 down, e0 up: %v, warnings %v", got, warnings)
	}
	// e1 leaves the pool for good: its node cell takes the first free
	// match by name (e0).
	nodes[1].Pool = "elsewhere"
	got = d.resolve(nodes)
	if got["east/0"] != "e0" || got["east/1"] != "e2" {
		t.Fatalf("after e1 left the pool: %v", got)
	}
}

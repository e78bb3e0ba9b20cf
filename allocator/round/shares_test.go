package round

import (
	"fmt"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
)

// TestCellShares: each VC's share of a type is the GPUs of its quota cells
// (and pinned cells) of that type, on a 3-type config with chains of
// different depths.
func TestCellShares(t *testing.T) {
	spec := cells.Spec{
		Types: []cells.CellType{
			{Name: "v100", GPUType: "v100"},
			{Name: "v100-pair", Child: "v100", Count: 2},
			{Name: "v100-node", Child: "v100-pair", Count: 4, Node: true},
			{Name: "p100"}, // no gpu_type: its name
			{Name: "p100-node", Child: "p100", Count: 8, Node: true},
			{Name: "k80", GPUType: "k80"},
			{Name: "k80-node", Child: "k80", Count: 4, Node: true},
		},
		Cells: []cells.TopCell{{Name: "v0", Type: "v100-node"}, {Name: "v1", Type: "v100-node"},
			{Name: "p0", Type: "p100-node"}, {Name: "k0", Type: "k80-node", Pinned: "b"}, {Name: "k1", Type: "k80-node"}},
		VCs: []cells.VC{
			{Name: "a", Quota: []cells.Quota{{Type: "v100-node", Count: 1}, {Type: "v100-pair", Count: 2}, {Type: "p100-node", Count: 1}}},
			{Name: "b", Quota: []cells.Quota{{Type: "v100", Count: 3}, {Type: "k80-node", Count: 1}}},
			{Name: "c"},
		},
	}
	got, err := CellShares(spec)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "map[a:map[p100:8 v100:12] b:map[k80:8 v100:3] c:map[]]" {
		t.Fatal(s)
	}
	spec.VCs[0].Quota[0].Type = "nope"
	if _, err := CellShares(spec); err == nil {
		t.Error("unknown cell type accepted")
	}
}

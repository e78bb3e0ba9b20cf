package cells

import (
	"reflect"
	"testing"
)

// TestCheckQuotas: each problem names its VC and quota entry, its kind, and
// for an oversubscription the chain, the highest level broken and both
// sides in cells of that level.
func TestCheckQuotas(t *testing.T) {
	s := v100Spec()
	s.Types = append(s.Types, CellType{Name: "k80", GPUType: "k80"}, CellType{Name: "k80-node", Child: "k80", Count: 4, Node: true},
		CellType{Name: "k80-big", Child: "v100-pair", Count: 2, Node: true})
	s.Cells = append(s.Cells, TopCell{Name: "k0", Type: "k80-node"}, TopCell{Name: "b0", Type: "k80-big"})
	s.VCs = []VC{
		{Name: "a", Quota: []Quota{{Type: "v100-node", Count: 1}, {Type: "v100-pair", Count: 1}}}, // pair: in two chains
		{Name: "b", Quota: []Quota{{Type: "v100", Count: 9, Chain: "v100-node"}, {Type: "nope", Count: 1}}},
		{Name: "c", Quota: []Quota{{Type: "k80", Count: 4}, {Type: "k80", Count: 1, Chain: "v100-node"}}},
		{Name: "d", Quota: []Quota{{Type: "v100-quad", Count: 1}}},
		{Name: "e", Quota: []Quota{{Type: "v100-node", Count: 1}}},
	}
	qc, err := CheckQuotas(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []QuotaProblem{
		{VC: 0, Quota: 1, Kind: Ambiguous, Chains: []string{"v100-node", "k80-big"}},
		// 8 GPUs of node a + 9 = 17 > 16 GPUs: level 1 breaks first.
		{VC: 1, Quota: 0, Kind: Oversubscribed, Chain: "v100-node", Level: 1, Demand: 17, Have: 16},
		{VC: 1, Quota: 1, Kind: UnknownType},
		{VC: 2, Quota: 1, Kind: NoCell},
		// d's quad fits at levels 3 and 2 (12 of 16 GPUs); level 1 stays
		// broken by b (21 > 16 GPUs).
		{VC: 3, Quota: 0, Kind: Oversubscribed, Chain: "v100-node", Level: 1, Demand: 21, Have: 16},
		// Two nodes claimed of two, but with d's quad and a's node, level 3
		// needs 5 quads of 4: the highest broken level is reported.
		{VC: 4, Quota: 0, Kind: Oversubscribed, Chain: "v100-node", Level: 3, Demand: 5, Have: 4},
	}
	if !reflect.DeepEqual(qc.Problems, want) {
		t.Errorf("problems\n got %+v\nwant %+v", qc.Problems, want)
	}
	wantChains := [][]string{{"v100-node", ""}, {"v100-node", ""}, {"k80-node", ""}, {"v100-node"}, {"v100-node"}}
	if !reflect.DeepEqual(qc.Chains, wantChains) {
		t.Errorf("chains %v, want %v", qc.Chains, wantChains)
	}
}

// TestCheckQuotasPinned: a pinned cell is not supply, and the check agrees
// with New (which runs it).
func TestCheckQuotasPinned(t *testing.T) {
	s := v100Spec()
	s.Cells[1].Pinned = "research"
	qc, err := CheckQuotas(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []QuotaProblem{{VC: 1, Quota: 0, Kind: Oversubscribed, Chain: "v100-node", Level: 1, Demand: 16, Have: 8}}
	if !reflect.DeepEqual(qc.Problems, want) {
		t.Errorf("problems %+v, want %+v", qc.Problems, want)
	}
	if _, err := New(s); err == nil {
		t.Error("New accepted the oversubscribed spec")
	}
	if qc, _ := CheckQuotas(v100Spec()); len(qc.Problems) != 0 {
		t.Errorf("the example cluster: %+v", qc.Problems)
	}
}

package main

import (
	"testing"

	rhcl "github.com/rondo-sched/rondo/hcl"
)

// TestPlacementStageChooses: the agent's stage chooses starting jobs'
// servers only when one engine decides the whole cluster; with quota or
// cell VCs their partitions and cells own the GPUs. It always regrows.
func TestPlacementStageChooses(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  rhcl.Config
		want bool
	}{
		{"one engine", rhcl.Config{}, true},
		{"one VC without shares", rhcl.Config{VCs: []rhcl.VC{{Name: "a"}}}, true},
		{"quota VCs", rhcl.Config{VCs: []rhcl.VC{{Name: "a", GPUs: map[string]int{"v100": 4}}}}, false},
		{"cell VCs", rhcl.Config{VCs: []rhcl.VC{{Name: "a"}}, Cells: []rhcl.Cell{{Name: "c"}}}, false},
	} {
		st, err := placementStage(&c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Options.Choose != c.want || !st.Options.Regrow || st.Options.RetuneCostS <= 0 {
			t.Errorf("%s: %+v, want Choose %v, Regrow with a cost", c.name, st.Options, c.want)
		}
	}
}

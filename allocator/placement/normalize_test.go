package placement

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// A kept alexnet at its best case (12 cores, 125 GB: 2.94x) reports 2.94x
// its GPU throughput; Normalize hands the estimator the throughput at the
// share and keeps the raw report for learning. A job at its share, or
// without a profile, is left as it is.
func TestNormalize(t *testing.T) {
	s := &engine.Snapshot{
		GPUs:  []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}, {ID: "g1", Type: "v100", Server: "n"}, {ID: "g2", Type: "v100", Server: "n"}},
		Nodes: []engine.Node{{ID: "n", Cores: 9, MemGB: 187.5, Ready: true}},
		Jobs: []engine.Job{
			{ID: "a", Profile: "alexnet", Measured: map[string]float64{"v100": 29.4}},
			{ID: "r", Profile: "res18", Measured: map[string]float64{"v100": 5}},
			{ID: "x", Measured: map[string]float64{"v100": 7}},
		},
		Running: []engine.Assignment{
			{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}, Resources: []engine.Resources{{Cores: 12, MemGB: 125}}},
			{Jobs: []string{"r"}, Type: "v100", GPUs: []string{"g1"}, Resources: []engine.Resources{{Cores: 3, MemGB: 62.5}}},
			{Jobs: []string{"x"}, Type: "v100", GPUs: []string{"g2"}, Resources: []engine.Resources{{Cores: 1, MemGB: 62.5}}},
		},
	}
	raw := s.Jobs[0].Measured
	st := &Stage{}
	st.Normalize(s)
	if v := s.Jobs[0].Measured["v100"]; math.Abs(v-10) > 1e-9 {
		t.Errorf("alexnet normalised to %v, want 10", v)
	}
	if raw["v100"] != 29.4 || st.measured(&s.Jobs[0], "v100") != 29.4 {
		t.Errorf("raw report changed or lost: %v, %v", raw["v100"], st.measured(&s.Jobs[0], "v100"))
	}
	if s.Jobs[1].Measured["v100"] != 5 || s.Jobs[2].Measured["v100"] != 7 {
		t.Errorf("jobs at their share / without a profile changed: %v %v", s.Jobs[1].Measured, s.Jobs[2].Measured)
	}
}

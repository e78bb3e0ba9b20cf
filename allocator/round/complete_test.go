package round_test

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/round"
)

// TestEstimatingCompletesTypes: on a fleet of a100-80gb and h100-80gb (no
// table knows either), job "new" measured only on a100-80gb gets on
// h100-80gb its a100 value times the other jobs' measured h100/a100 ratio
// (2 here), marked estimated; a model-less job with nothing measured
// keeps 1 everywhere, defaulted; the table's values stay, marked table;
// the engine is given the completed values; the backend's maps are left
// alone.
func TestEstimatingCompletesTypes(t *testing.T) {
	eng := &seeing{Engine: newEngine(t)}
	st := &round.Estimating{Next: eng, Online: estimator.NewOnline(0, nil)}
	gpus := []engine.GPU{{ID: "g0", Type: "a100-80gb", Server: "s0"}, {ID: "g1", Type: "h100-80gb", Server: "s1"}}
	defaulted := map[string]string{"a100-80gb": engine.SourceDefaulted, "h100-80gb": engine.SourceDefaulted}
	ones := map[string]float64{"a100-80gb": 1, "h100-80gb": 1}
	job := func(id string, measured map[string]float64) engine.Job {
		return engine.Job{ID: id, ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
			Throughput: ones, ThroughputSource: defaulted, Measured: measured}
	}
	s := &engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{
		job("k1", map[string]float64{"a100-80gb": 10, "h100-80gb": 20}),
		job("k2", map[string]float64{"a100-80gb": 3, "h100-80gb": 6}),
		job("new", map[string]float64{"a100-80gb": 7}),
		job("blank", nil),
		{ID: "tab", ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
			Throughput: map[string]float64{"a100-80gb": 5, "h100-80gb": 0}}, // the table: cannot run on h100
	}}
	if _, err := st.Round(s); err != nil {
		t.Fatal(err)
	}
	got := eng.seen[0].Jobs
	byID := map[string]engine.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	n := byID["new"]
	if v := n.Throughput["h100-80gb"]; math.Abs(v/14-1) > 0.02 || n.ThroughputSource["h100-80gb"] != engine.SourceEstimated {
		t.Errorf("new on h100-80gb: %v (%s), want about 14, estimated", v, n.ThroughputSource["h100-80gb"])
	}
	if n.Throughput["a100-80gb"] != 7 || n.ThroughputSource["a100-80gb"] != engine.SourceMeasured {
		t.Errorf("new on a100-80gb: %v (%s), want 7 measured", n.Throughput["a100-80gb"], n.ThroughputSource["a100-80gb"])
	}
	b := byID["blank"]
	for typ := range ones {
		if b.Throughput[typ] != 1 || b.ThroughputSource[typ] != engine.SourceDefaulted {
			t.Errorf("blank on %s: %v (%s), want 1 defaulted", typ, b.Throughput[typ], b.ThroughputSource[typ])
		}
	}
	tb := byID["tab"]
	if tb.Throughput["h100-80gb"] != 0 || tb.ThroughputSource["h100-80gb"] != engine.SourceTable || tb.ThroughputSource["a100-80gb"] != engine.SourceTable {
		t.Errorf("tab: %v %v, want the table's values kept", tb.Throughput, tb.ThroughputSource)
	}
	if ones["h100-80gb"] != 1 || defaulted["h100-80gb"] != engine.SourceDefaulted {
		t.Error("the backend's shared maps were changed")
	}
}

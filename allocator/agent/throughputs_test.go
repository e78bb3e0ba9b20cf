package agent

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/round"
)

// fleetBackend: one a100-80gb and one h100-80gb GPU, no table for either
// (the backend defaulted every value); "tab" has table values.
type fleetBackend struct{ fakeBackend }

func (f *fleetBackend) Observe() (*engine.Snapshot, error) {
	s := &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "a100-80gb", Server: "n0"}, {ID: "g1", Type: "h100-80gb", Server: "n1"}}}
	for _, id := range []string{"k1", "k2", "new", "blank"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
			Throughput:       map[string]float64{"a100-80gb": 1, "h100-80gb": 1},
			ThroughputSource: map[string]string{"a100-80gb": engine.SourceDefaulted, "h100-80gb": engine.SourceDefaulted}})
	}
	s.Jobs = append(s.Jobs, engine.Job{ID: "tab", ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
		Throughput: map[string]float64{"a100-80gb": 5, "h100-80gb": 9}})
	return s, nil
}

// TestStatusThroughputSources: /v1/status gives each job's throughput per
// type with its source: reported through the lease API (measured),
// completed from the other jobs' ratios (estimated), the table's, or the
// default when nothing is known; a report naming a type the cluster lacks
// is learned under the type the job runs on.
func TestStatusThroughputSources(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Backend: &fleetBackend{}, Engine: &round.Estimating{Next: e, Online: estimator.NewOnline(0, nil)}, Round: time.Hour})
	a.Step() // the jobs become known to the lease API
	ctx := context.Background()
	for _, r := range []struct {
		job, typ string
		v        float64
	}{{"k1", "a100-80gb", 10}, {"k1", "h100-80gb", 20}, {"k2", "a100-80gb", 3}, {"k2", "h100-80gb", 6}, {"new", "a100-80gb", 7}} {
		if err := a.Report(ctx, lease.Caller{Job: r.job, IdentityJob: r.job}, lease.Progress{GPUType: r.typ, ThroughputStepsPerS: r.v}); err != nil {
			t.Fatal(err)
		}
	}
	a.Step()
	// A task naming its GPU by another convention ("a100" from node meta)
	// is learned under the type it runs on.
	runs := ""
	for _, j := range a.Status().Jobs {
		if j.ID == "tab" && j.State == "running" {
			runs = j.Type
		}
	}
	if runs == "" {
		t.Fatalf("tab is not running: %+v", a.Status().Jobs)
	}
	if err := a.Report(ctx, lease.Caller{Job: "tab", IdentityJob: "tab"}, lease.Progress{GPUType: "a100", ThroughputStepsPerS: 4}); err != nil {
		t.Fatal(err)
	}
	a.Step()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Jobs []struct {
			ID          string `json:"id"`
			Throughputs map[string]struct {
				Value  float64 `json:"value"`
				Source string  `json:"source"`
			} `json:"throughputs"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	type v struct {
		value  float64
		source string
	}
	want := map[string]map[string]v{
		"new":   {"a100-80gb": {7, "measured"}, "h100-80gb": {14, "estimated"}},
		"k1":    {"a100-80gb": {10, "measured"}, "h100-80gb": {20, "measured"}},
		"blank": {"a100-80gb": {1, "defaulted"}, "h100-80gb": {1, "defaulted"}},
		"tab":   {},
	}
	seen := 0
	for _, j := range st.Jobs {
		w, ok := want[j.ID]
		if !ok {
			continue
		}
		seen++
		for typ, wv := range w {
			g := j.Throughputs[typ]
			if g.Source != wv.source || math.Abs(g.Value-wv.value) > 1e-6*wv.value {
				t.Errorf("job %s on %s: %v (%s), want %v (%s)", j.ID, typ, g.Value, g.Source, wv.value, wv.source)
			}
		}
	}
	for _, j := range st.Jobs {
		if j.ID != "tab" {
			continue
		}
		for typ, g := range j.Throughputs {
			if typ == runs && (g.Source != "measured" || g.Value != 4) || typ != runs && (g.Source != "table" || g.Value != 5) {
				t.Errorf("tab on %s (it runs on %s, reported as a100): %+v", typ, runs, g)
			}
		}
		if len(j.Throughputs) != 2 {
			t.Errorf("tab: %v, want its two types only", j.Throughputs)
		}
	}
	if seen != len(want) {
		t.Errorf("status lists %d of the %d jobs", seen, len(want))
	}
}

package round_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/round"
)

// The agent sees through the stage: history and reset reach the engine.
var (
	_ agent.HistoryKeeper       = (*round.Estimating)(nil)
	_ agent.Resetter            = (*round.Estimating)(nil)
	_ agent.MeasurementRestorer = (*round.Estimating)(nil)
)

// seeing records the snapshots the engine decides on, then lets it decide.
type seeing struct {
	*engine.Engine
	seen []engine.Snapshot
}

func (s *seeing) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	c := *snap
	c.Jobs = append([]engine.Job(nil), snap.Jobs...)
	s.seen = append(s.seen, c)
	return s.Engine.Round(snap)
}

// onlyRound is a decider with no history and no reset.
type onlyRound struct{ e *engine.Engine }

func (o onlyRound) Round(s *engine.Snapshot) (*engine.Plan, error) { return o.e.Round(s) }

func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEstimatingReplacesThroughputs: each round's measurements are one
// sample per (job, type); the engine decides on the estimate (the mean of
// the first samples, then the EWMA with alpha 0.2), on types the table
// lacks too, and on the table's value where nothing was measured; the
// backend's maps are left alone.
func TestEstimatingReplacesThroughputs(t *testing.T) {
	eng := &seeing{Engine: newEngine(t)}
	st := &round.Estimating{Next: eng, Online: estimator.NewOnline(0, nil)}
	table := map[string]float64{"v100": 1, "k80": 0.5} // shared by both jobs, as a backend may
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "s0"}, {ID: "g1", Type: "k80", Server: "s1"}}
	type want struct{ av100, ak80, ap100, bv100 float64 }
	rnd := 0
	step := func(measured map[string]float64, w want) {
		t.Helper()
		rnd++
		s := &engine.Snapshot{TimeS: float64(rnd) * 360, GPUs: gpus, Jobs: []engine.Job{
			{ID: "a", ScaleFactor: 1, Throughput: table, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6, Measured: measured},
			{ID: "b", ScaleFactor: 1, Throughput: table, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6},
		}}
		p, err := st.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		seen := eng.seen[len(eng.seen)-1]
		a, b := seen.Jobs[0].Throughput, seen.Jobs[1].Throughput
		near := func(what string, got, want float64) {
			t.Helper()
			if math.Abs(got-want) > 1e-12 {
				t.Errorf("round %d: %s: engine saw %.15g, want %.15g", rnd, what, got, want)
			}
		}
		near("a on v100", a["v100"], w.av100)
		near("a on k80", a["k80"], w.ak80)
		near("a on p100", a["p100"], w.ap100)
		near("b on v100", b["v100"], w.bv100)
		near("b on k80", b["k80"], 0.5)
		if _, ok := b["p100"]; ok {
			t.Errorf("round %d: b, never measured, got a p100 throughput", rnd)
		}
		if len(table) != 2 || table["v100"] != 1 || table["k80"] != 0.5 {
			t.Fatalf("round %d: the backend's table map was changed: %v", rnd, table)
		}
		// The engine's allocation runs on the estimate: a's effective
		// throughput is its share times the estimated steps/s.
		al := p.Allocation
		if al == nil {
			t.Fatalf("round %d: no allocation", rnd)
		}
		if rnd == 1 {
			eff := 0.0
			for k, typ := range al.Types {
				eff += al.X[0][k] * a[typ]
			}
			if al.JobIDs[0] != "a" || math.Abs(al.Effective[0]-eff) > 1e-6 {
				t.Errorf("round 1: a's effective throughput %g, want %g from the estimates", al.Effective[0], eff)
			}
		}
	}
	step(map[string]float64{"v100": 3}, want{3, 0.5, 0, 1})
	step(map[string]float64{"v100": 5, "p100": 2}, want{4, 0.5, 2, 1})
	step(nil, want{4, 0.5, 2, 1}) // nothing new: the estimates stand
	// The n-th sample weighs max(1/n, 0.2): plain means up to the 5th,
	// then the EWMA.
	step(map[string]float64{"v100": 4}, want{4, 0.5, 2, 1})
	step(map[string]float64{"v100": 4}, want{4, 0.5, 2, 1})
	step(map[string]float64{"v100": 2}, want{4 + (2-4)/5.0, 0.5, 2, 1})
	step(map[string]float64{"v100": 9}, want{3.6 + 0.2*(9-3.6), 0.5, 2, 1})
	step(map[string]float64{"k80": 1.5}, want{4.68, 1.5, 2, 1})
}

// TestEstimatingPassesThrough: the stage keeps the engine's history and
// reset reachable, and a plain decider's absent ones are no-ops.
func TestEstimatingPassesThrough(t *testing.T) {
	e := newEngine(t)
	st := &round.Estimating{Next: e, Online: estimator.NewOnline(0, nil)}
	s := &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "s0"}}, Jobs: []engine.Job{
		{ID: "a", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6}}}
	if _, err := st.Round(s); err != nil {
		t.Fatal(err)
	}
	want, err := e.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.MarshalHistory()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("history through the stage %s %v, want the engine's %s", got, err, want)
	}
	e2 := newEngine(t)
	st2 := &round.Estimating{Next: e2, Online: estimator.NewOnline(0, nil)}
	if err := st2.UnmarshalHistory(got); err != nil {
		t.Fatal(err)
	}
	if h, _ := e2.MarshalHistory(); !bytes.Equal(h, want) {
		t.Errorf("history restored through the stage %s, want %s", h, want)
	}
	// Same snapshot a round later: nothing to recompute unless reset.
	s.TimeS = 360
	if p, err := st.Round(s); err != nil || p.Recomputed {
		t.Fatalf("round 2 recomputed %v (%v) without an event", p.Recomputed, err)
	}
	st.RequestReset()
	s.TimeS = 720
	if p, err := st.Round(s); err != nil || !p.Recomputed {
		t.Errorf("after a reset through the stage: recomputed %v (%v)", p.Recomputed, err)
	}

	plain := &round.Estimating{Next: onlyRound{newEngine(t)}, Online: estimator.NewOnline(0, nil)}
	if h, err := plain.MarshalHistory(); h != nil || err != nil {
		t.Errorf("a decider without history: %s %v", h, err)
	}
	if err := plain.UnmarshalHistory([]byte(`{"garbage"`)); err != nil {
		t.Errorf("a decider without history took one: %v", err)
	}
	plain.RequestReset()
}

// TestRestoreMeasured: a kept measurement seeds an estimator that has not
// learned that throughput, and only then.
func TestRestoreMeasured(t *testing.T) {
	on := estimator.NewOnline(0, nil)
	st := &round.Estimating{Next: newEngine(t), Online: on}
	st.RestoreMeasured("a", "v100", 3)
	st.RestoreMeasured("a", "v100", 7) // learned already
	st.RestoreMeasured("a", "k80", 0)  // not a measurement
	if v, ok := on.Isolated("a", "v100"); !ok || v != 3 || on.Samples("a", "v100") != 1 {
		t.Errorf("restored v100 %g %v (%d samples), want 3 from one", v, ok, on.Samples("a", "v100"))
	}
	if on.Samples("a", "k80") != 0 {
		t.Errorf("a zero measurement was restored")
	}
}

package engine

import "testing"

// A job whose steps done fall (it restarted from an older checkpoint, #21)
// loses isolated time, never below none: the policies refuse a negative
// one.
func TestIsolatedTimeAfterRollback(t *testing.T) {
	e, err := New(Config{Policy: "finish_time_fairness", Solve: zeroSolve})
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{GPUs: []GPU{{ID: "v100-0", Type: "v100", Server: "s0"}},
		Jobs: []Job{{ID: "0", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 100, RemainingSteps: 70}}}
	e.iso["0"] = &isoState{tput: 1, steps: 50, time: 10, hasTput: true, hasSteps: true, hasTime: true}
	for _, want := range []float64{0, 30} {
		p := e.problem(s)
		if got := *p.Jobs[0].IsolatedTimeS; got != want {
			t.Errorf("done %v: isolated time %v, want %v", s.Jobs[0].TotalSteps-s.Jobs[0].RemainingSteps, got, want)
		}
		s.Jobs[0].RemainingSteps = 40 // 30 more steps at 1 step/s
	}
}

package engine

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// samePlacement compares assignments, priorities to 1e-9 relative: a
// restored engine solves its next recompute cold (the warm-start hint is
// not history), which may move the last bits.
func samePlacement(a, b []Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Abs(x.Priority-y.Priority) > 1e-9*math.Max(math.Abs(x.Priority), 1) {
			return false
		}
		x.Priority, y.Priority = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestHistoryRestoreIntoLiveEngine: an agent that loses and re-takes its
// leader lock (a Nomad server restart) restores the saved history into the
// engine it already runs. That engine must decide exactly as one that was
// never interrupted.
//
// With aborted set, the live engine first runs a round whose plan is thrown
// away (the agent decided, then failed to record the decision because
// Nomad went away) before the saved history is restored: nothing of that
// round may leak into the next.
func TestHistoryRestoreIntoLiveEngine(t *testing.T) {
	for _, aborted := range []bool{false, true} {
		for _, policy := range []string{"max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf", "max_min_fairness_packed", "gandiva"} {
			for _, cut := range []int{1, 4, 9} {
				restoreLive(t, policy, cut, aborted)
			}
		}
	}
}

func restoreLive(t *testing.T, policy string, cut int, aborted bool) {
	t.Helper()
	what := fmt.Sprintf("%s, restored in place at round %d (aborted round %v)", policy, cut, aborted)
	lockstep(t, policy, 24, false, what, func(r int, c *toyCluster, live *Engine) {
		if r != cut {
			return
		}
		js, err := live.MarshalHistory()
		if err != nil {
			t.Fatal(err)
		}
		if aborted {
			// The round decided on a snapshot taken a little earlier
			// (received times not yet credited).
			s := c.snapshot()
			s.TimeS -= c.roundS / 2
			if _, err := live.Round(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := live.UnmarshalHistory(js); err != nil {
			t.Fatal(err)
		}
	})
}

// lockstep runs a reference engine and a live one on the toy cluster for
// up to rounds rounds (the reference's plans are enforced), calling before
// each round, and fails at the first round whose plans differ: exactly, or
// with priorities to 1e-9 (samePlacement) unless exact.
func lockstep(t *testing.T, policy string, rounds int, exact bool, what string, before func(r int, c *toyCluster, live *Engine)) {
	t.Helper()
	c := newToyCluster()
	ref, _ := New(Config{Policy: policy, RoundS: c.roundS, Seed: 3})
	live, _ := New(Config{Policy: policy, RoundS: c.roundS, Seed: 3})
	for r := 0; r < rounds && (r == 0 || len(c.jobs) > 0); r++ {
		before(r, c, live)
		s := c.snapshot()
		pa, err := ref.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := live.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		same := samePlacement(pa.Assignments, pb.Assignments)
		if exact {
			same = reflect.DeepEqual(pa.Assignments, pb.Assignments)
		}
		if !same || !reflect.DeepEqual(pa.Suspend, pb.Suspend) || pa.Recomputed != pb.Recomputed {
			t.Fatalf("%s: round %d differs:\nreference %+v (recomputed %v)\nlive      %+v (recomputed %v)",
				what, r, pa.Assignments, pa.Recomputed, pb.Assignments, pb.Recomputed)
		}
		c.enforce(pa)
	}
}

// TestBadHistoryLeavesEngine: a history that fails to load (a unit of three
// jobs, a shuffler state of the wrong size) leaves the engine as it was: it
// keeps deciding as an engine that was never handed it.
func TestBadHistoryLeavesEngine(t *testing.T) {
	for _, policy := range []string{"max_min_fairness_perf", "max_min_fairness"} {
		lockstep(t, policy, 12, true, policy+" after a refused history", func(r int, _ *toyCluster, live *Engine) {
			if r != 5 {
				return
			}
			h := live.History()
			h.Units = append(h.Units, HistoryUnit{Jobs: []string{"j0", "j1", "j2"}})
			if err := live.SetHistory(h); err == nil {
				t.Fatalf("%s: a unit of three jobs was accepted", policy)
			}
			h = live.History()
			h.Shuffler = []uint32{1, 2, 3}
			if err := live.SetHistory(h); err == nil && policy == "max_min_fairness" {
				t.Fatalf("%s: a bad shuffler state was accepted", policy)
			}
		})
	}
}

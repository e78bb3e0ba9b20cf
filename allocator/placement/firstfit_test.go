package placement

import (
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// ffRound is one server of 2 GPUs, 24 cores, 500 GB, and three 1-GPU jobs
// a (alexnet: 12 cores per GPU best), b and c (gnmt: 1 core); the plan
// (the engine's) runs a and b.
func ffRound(t *testing.T) (*engine.Snapshot, *engine.Plan, []Server, func(*engine.Job, int) *synergy.Profile) {
	s := &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "s"}, {ID: "g1", Type: "v100", Server: "s"}}}
	for _, id := range []string{"a", "b", "c"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}})
	}
	p := &engine.Plan{Assignments: []engine.Assignment{
		{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}},
		{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"g1"}},
	}}
	prof := func(j *engine.Job, _ int) *synergy.Profile {
		if j.ID == "a" {
			return prof(t, "alexnet_1")
		}
		return prof(t, "gnmt_1")
	}
	return s, p, []Server{{ID: "s", GPUs: 2, Cores: 24, MemGB: 500}}, prof
}

func ran(p *engine.Plan) []string {
	var out []string
	for _, a := range p.Assignments {
		out = append(out, a.Jobs...)
	}
	return out
}

// TestFirstFitQueueDecides: with the reference's queue the queue, not the
// plan, decides who runs: c (not in the plan) runs, a plan job the queue
// reaches with no GPU left is skipped; without a queue the plan's jobs run.
func TestFirstFitQueueDecides(t *testing.T) {
	s, p, srv, pr := ffRound(t)
	grants, skipped := firstFit(Tune, s, p, srv, pr, []string{"c", "a", "b"}, true)
	if got := ran(p); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Fatalf("assignments %v", got)
	}
	if !skipped["b"] || skipped["a"] {
		t.Errorf("skipped %v, want b", skipped)
	}
	if g := grants["a"]; g.Cores != 12 {
		t.Errorf("a: %+v, want its best case (12 cores)", g)
	}
	if _, ok := grants["b"]; ok {
		t.Error("b got a grant")
	}

	s, p, srv, pr = ffRound(t)
	_, skipped = firstFit(Tune, s, p, srv, pr, nil, true)
	if len(skipped) != 0 || !slices.Equal(ran(p), []string{"a", "b"}) {
		t.Errorf("no queue: ran %v, skipped %v", ran(p), skipped)
	}
}

// TestFirstFitGreedyWalkAndList: GREEDY on a server with 13 cores, a and
// b alexnets (12 cores), c gnmt (1 core). Walked (the reference's FIFO),
// b does not fit after a and is skipped, and c runs; listed (its LAS), the
// round is the first two jobs whose GPU counts fit, a and b, and b's GPU
// stays idle.
func TestFirstFitGreedyWalkAndList(t *testing.T) {
	for _, walk := range []bool{true, false} {
		s, p, srv, _ := ffRound(t)
		srv[0].Cores = 13
		pr := func(j *engine.Job, _ int) *synergy.Profile {
			if j.ID == "c" {
				return prof(t, "gnmt_1")
			}
			return prof(t, "alexnet_1")
		}
		_, skipped := firstFit(Greedy, s, p, srv, pr, []string{"a", "b", "c"}, walk)
		got := ran(p)
		if !skipped["b"] {
			t.Errorf("walk %v: b not skipped", walk)
		}
		if want := []string{"a", "c", "b"}; walk && !slices.Equal(got, want) {
			t.Errorf("walk: assignments %v, want %v (b's dropped later)", got, want)
		}
		if !walk && slices.Contains(got, "c") {
			t.Errorf("list: assignments %v, c should not run", got)
		}
	}
}

package placement

import (
	"fmt"
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

// TestPathsKeepDecidedIntents: every placement path (first fit, which
// re-places every job and remakes the intents; choose; the per-mode
// placement) keeps what the decider said that the assignments do not show,
// as a VC layer's merged plan carries it on intents only: a notice
// (Checkpoint, Noticed), the engine's reasons (Pinned, Backfills), a
// waiting gang's Reserved intent and a VC layer's preemption reason; choose
// moves no job onto GPUs reserved for the gang, nor a backfill off them.
func TestPathsKeepDecidedIntents(t *testing.T) {
	s := paperSnapshot(2)
	run := func(id, gpu string, cores float64) {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Profile: "res18", Started: true})
		s.Running = append(s.Running, engine.Assignment{Jobs: []string{id}, Type: "v100", GPUs: []string{gpu},
			Servers: []string{gpu[:2]}, Resources: []engine.Resources{{Cores: cores, MemGB: 62.5}}})
	}
	// s0 holds 21 of its 24 cores, s1 4: the newcomer would move to s1,
	// where the GPUs left free are the gang's (opp's, preempted for it,
	// among them; bf backfills one).
	run("noticed", "s0g0", 3)
	run("pinned", "s0g1", 3)
	for g := 2; g < 7; g++ {
		run(fmt.Sprint("k", g), fmt.Sprintf("s0g%d", g), 3)
	}
	for _, g := range []int{1, 2, 3, 7} {
		run(fmt.Sprint("l", g), fmt.Sprintf("s1g%d", g), 1)
	}
	run("opp", "s1g0", 3)
	s.Jobs[len(s.Jobs)-1].Class = engine.Opportunistic
	s.Jobs = append(s.Jobs, engine.Job{ID: "new", ScaleFactor: 1, Profile: "alexnet"},
		engine.Job{ID: "bf", ScaleFactor: 1, Profile: "alexnet"},
		engine.Job{ID: "gang", ScaleFactor: 4, Profile: "res18"})
	reserved := []string{"s1g0", "s1g4", "s1g5", "s1g6"}
	d := &planned{plan: func(s *engine.Snapshot) *engine.Plan {
		p := &engine.Plan{Reservations: []engine.Reservation{{Job: "gang", Type: "v100", GPUs: reserved, StartS: 720}}}
		for _, a := range s.Running {
			if a.Jobs[0] == "opp" {
				p.Suspend = append(p.Suspend, "opp")
				continue
			}
			a.Action = engine.Keep
			p.Assignments = append(p.Assignments, a)
		}
		p.Assignments = append(p.Assignments,
			engine.Assignment{Jobs: []string{"new"}, Type: "v100", GPUs: []string{"s0g7"}, Servers: []string{"s0"}, Action: engine.Start},
			engine.Assignment{Jobs: []string{"bf"}, Type: "v100", GPUs: []string{"s1g4"}, Servers: []string{"s1"}, Action: engine.Start})
		return p
	}}
	// The merged plan's intents: what the engines and the VC layer said.
	merged := func(p *engine.Plan) {
		for i := range p.Intents {
			ji := &p.Intents[i]
			switch ji.Job {
			case "noticed":
				ji.Checkpoint, ji.Reason = true, engine.Reason{Kind: engine.Noticed, To: "v100"}
			case "pinned":
				ji.Reason = engine.Reason{Kind: engine.Pinned, To: "v100", Until: 1000}
			case "bf":
				ji.Reason = engine.Reason{Kind: engine.Backfills, To: "v100", Until: 720}
			case "opp":
				ji.Intent, ji.Class, ji.Reason = engine.IntentPreempt, engine.Opportunistic, engine.Reason{Kind: engine.GuaranteedNeedsGPUs}
			}
		}
		p.Intents = append(p.Intents, engine.JobIntent{Job: "gang", Intent: engine.IntentSuspend,
			Reason: engine.Reason{Kind: engine.Reserved, To: "v100", Until: 720}})
	}
	for _, opts := range []Options{{Leftover: true}, {Leftover: true, Choose: true}, {FirstFit: true}} {
		st := &Stage{Next: &mergedPlan{d, merged}, Mode: func(string) Mode { return Tune }, Options: opts}
		p, err := st.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]engine.JobIntent{}
		for _, ji := range p.Intents {
			got[ji.Job] = ji
		}
		for id, want := range map[string]engine.ReasonKind{"noticed": engine.Noticed, "pinned": engine.Pinned, "gang": engine.Reserved,
			"opp": engine.GuaranteedNeedsGPUs, "bf": engine.Backfills} {
			if opts.FirstFit && (got[id].Intent == engine.IntentRetune || (id == "bf" && !slices.Equal(got[id].GPUs, []string{"s1g4"}))) {
				continue // first fit re-placed it (other cores, other GPUs): no longer the decider's
			}
			if got[id].Reason.Kind != want {
				t.Errorf("%+v: %s: %+v, want reason %v", opts, id, got[id], engine.Reason{Kind: want})
			}
		}
		if ji := got["noticed"]; !ji.Checkpoint || ji.Intent != engine.IntentKeep {
			t.Errorf("%+v: the notice: %+v", opts, ji)
		}
		if opts.FirstFit {
			if ji := got["bf"]; !slices.Equal(ji.GPUs, []string{"s1g4"}) && ji.Reason.Kind != engine.FirstStart {
				t.Errorf("first fit: bf moved off the reserved GPUs still says %v", ji.Reason)
			}
			continue // first fit re-places every job from an empty cluster
		}
		for _, a := range p.Assignments {
			if a.Jobs[0] == "new" && slices.ContainsFunc(a.GPUs, func(g string) bool { return slices.Contains(reserved, g) }) {
				t.Errorf("%+v: new moved onto reserved GPUs: %+v", opts, a)
			}
			if a.Jobs[0] == "bf" && !slices.Equal(a.GPUs, []string{"s1g4"}) {
				t.Errorf("%+v: the backfill moved: %+v", opts, a)
			}
		}
	}
}

// mergedPlan is a decider whose plan's intents are then amended, as a VC
// layer amends the intents of its merged plan.
type mergedPlan struct {
	d     *planned
	amend func(*engine.Plan)
}

func (m *mergedPlan) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p, err := m.d.Round(s)
	if err == nil {
		m.amend(p)
	}
	return p, err
}

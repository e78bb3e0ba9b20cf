package round

import (
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// noticeMech is a VC mechanism that keeps what runs, gives job "old" a
// notice (checkpoint now) with its own reason, and reserves two GPUs for
// the waiting gang "gang", as a checkpoint-aware engine with a
// reservation would.
type noticeMech struct{}

func (noticeMech) RequestReset() {}

func (noticeMech) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p := &engine.Plan{TimeS: s.TimeS}
	for _, r := range s.Running {
		r.Action = engine.Keep
		p.Assignments = append(p.Assignments, r)
	}
	engine.Annotate(s, p, nil)
	for i := range p.Intents {
		if p.Intents[i].Job == "old" {
			p.Intents[i].Checkpoint = true
			p.Intents[i].Reason = engine.Reason{Kind: engine.Noticed, To: "v100", Priority: 0.5}
		}
	}
	p.Intents = append(p.Intents, engine.JobIntent{Job: "gang", Intent: engine.IntentKeep,
		Reason: engine.Reason{Kind: engine.Reserved, To: "v100", Until: s.TimeS + 360}})
	var ids []string
	for _, g := range s.GPUs {
		ids = append(ids, g.ID)
	}
	p.Reservations = []engine.Reservation{{Job: "gang", Type: "v100", GPUs: ids[:2], StartS: s.TimeS + 360, SinceS: s.TimeS}}
	return p, nil
}

// TestQuotaKeepsEngineIntents: the merged plan (whose intents Annotate
// makes anew) keeps a VC mechanism's notice, its own reasons and its
// reservations, named by the VC.
func TestQuotaKeepsEngineIntents(t *testing.T) {
	q, err := NewQuotaPreempt([]QuotaVC{{Name: "a", GPUs: map[string]int{"v100": 4}, Mechanism: noticeMech{}}},
		"max_min_fairness_perf", Preemption{MinRuntimeS: 60, CheckpointAware: true}, 360, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{TimeS: 720, GPUs: cluster()[:4], Jobs: []engine.Job{qjob("old", "a", 1, 0), qjob("new", "a", 1, 1),
		qjob("gang", "a", 2, 2)}}
	s.Jobs[0].Started, s.Jobs[1].Started = true, true
	s.Running = []engine.Assignment{{Jobs: []string{"old"}, Type: "v100", GPUs: []string{"v100-2"}, Servers: []string{"v100-s1"}},
		{Jobs: []string{"new"}, Type: "v100", GPUs: []string{"v100-3"}, Servers: []string{"v100-s1"}}}
	p, err := q.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.JobIntent{}
	for _, ji := range p.Intents {
		got[ji.Job] = ji
	}
	if ji := got["old"]; ji.Intent != engine.IntentKeep || !ji.Checkpoint || ji.Reason.Kind != engine.Noticed {
		t.Errorf("old: %+v, want a keep with its notice", ji)
	}
	if ji := got["new"]; ji.Intent != engine.IntentKeep || ji.Checkpoint || ji.Reason.Kind != engine.LeaseRenewed {
		t.Errorf("new: %+v, want a plain keep", ji)
	}
	if ji, ok := got["gang"]; !ok || ji.Reason.Kind != engine.Reserved {
		t.Errorf("gang: %+v, want the engine's reserved intent", ji)
	}
	if len(p.Reservations) != 1 || p.Reservations[0].VC != "a" || p.Reservations[0].Job != "gang" ||
		!slices.Equal(p.Reservations[0].GPUs, []string{"v100-0", "v100-1"}) {
		t.Errorf("reservations %+v", p.Reservations)
	}
}

// TestPreemptionApply: the three settings land in an engine's config.
func TestPreemptionApply(t *testing.T) {
	var c engine.Config
	Preemption{MinRuntimeS: 1, CheckpointAware: true, ReserveAfterS: 2}.Apply(&c)
	if c.MinRuntimeS != 1 || !c.CheckpointAware || c.ReserveAfterS != 2 {
		t.Errorf("config %+v", c)
	}
}

package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestAnnotate: every intent the round can give, in plan order, with the
// GPUs a job held, its VC and class, and the reason for the ones that
// depend on the snapshot (a failed GPU, preemption by guaranteed work).
func TestAnnotate(t *testing.T) {
	job := func(id string, started bool) Job {
		return Job{ID: id, ScaleFactor: 1, Started: started, VC: "vc-" + id}
	}
	el := job("el", true)
	el.ScaleFactor, el.Elastic = 2, &Elastic{StepGPUs: 1, MaxGPUs: 4}
	opp := job("opp", true)
	opp.Class = Opportunistic
	opp2 := job("opp2", true)
	opp2.Class = Opportunistic
	s := &Snapshot{
		GPUs: []GPU{{ID: "g0", Type: "v100"}, {ID: "g1", Type: "v100"}, {ID: "g2", Type: "v100", Failed: true},
			{ID: "g3", Type: "v100"}, {ID: "k0", Type: "k80"}, {ID: "k1", Type: "k80"}, {ID: "k2", Type: "k80"}},
		Jobs: []Job{job("new", false), job("back", true), job("stay", true), job("moved", true), job("hit", true), el,
			job("off", true), opp, opp2, job("pa", true), job("pb", false)},
		Running: []Assignment{
			{Jobs: []string{"stay"}, Type: "v100", GPUs: []string{"g0"}},
			{Jobs: []string{"moved"}, Type: "v100", GPUs: []string{"g1"}},
			{Jobs: []string{"hit"}, Type: "v100", GPUs: []string{"g2"}},
			{Jobs: []string{"el"}, Type: "k80", GPUs: []string{"k0", "k1", "k2"}},
			{Jobs: []string{"off"}, Type: "v100", GPUs: []string{"g3"}},
			{Jobs: []string{"opp"}, Type: "k80", GPUs: []string{"k9"}},
			{Jobs: []string{"opp2"}, Type: "k80", GPUs: []string{"k8"}},
			{Jobs: []string{"pa"}, Type: "v100", GPUs: []string{"g7"}},
		},
	}
	p := &Plan{
		Assignments: []Assignment{
			{Jobs: []string{"new"}, Type: "k80", GPUs: []string{"k3"}, Action: Start},
			{Jobs: []string{"back"}, Type: "k80", GPUs: []string{"k4"}, Action: Start},
			{Jobs: []string{"stay"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep},
			{Jobs: []string{"moved"}, Type: "k80", GPUs: []string{"k5"}, Action: Start},
			{Jobs: []string{"hit"}, Type: "v100", GPUs: []string{"g3"}, Action: Start},
			{Jobs: []string{"el"}, Type: "k80", GPUs: []string{"k0", "k1"}, Action: Keep},
			{Jobs: []string{"pa", "pb"}, Type: "v100", GPUs: []string{"g7"}, Action: Start},
		},
		Suspend: []string{"off", "opp", "opp2"},
	}
	Annotate(s, p, []string{"opp"})
	want := []struct {
		job    string
		intent Intent
		from   []string
		reason string
	}{
		{"new", IntentAdmit, nil, "first start"},
		{"back", IntentResume, nil, "resumes"},
		{"stay", IntentKeep, nil, "lease renewed"},
		{"moved", IntentMigrate, []string{"g1"}, "moves from v100 to k80"},
		{"hit", IntentMigrate, []string{"g2"}, "GPU g2 failed"},
		{"el", IntentResize, []string{"k0", "k1", "k2"}, "3 -> 2 GPUs"},
		// From exclusive to shared use of the same GPU: a migrate.
		{"pa", IntentMigrate, []string{"g7"}, "shares its v100 GPUs with pb"},
		{"pb", IntentAdmit, nil, "first start"},
		{"off", IntentSuspend, []string{"g3"}, "not selected"},
		{"opp", IntentPreempt, []string{"k9"}, "guaranteed work"},
		{"opp2", IntentPreempt, []string{"k8"}, "not selected"},
	}
	if len(p.Intents) != len(want) {
		t.Fatalf("%d intents, want %d: %+v", len(p.Intents), len(want), p.Intents)
	}
	for i, w := range want {
		got := p.Intents[i]
		if got.Job != w.job || got.Intent != w.intent || !slices.Equal(got.From, w.from) || !strings.Contains(got.Reason.String(), w.reason) {
			t.Errorf("intent %d: %+v, want %s %s from %v (%q)", i, got, w.job, w.intent, w.from, w.reason)
		}
		if got.VC != "vc-"+w.job {
			t.Errorf("%s: vc %q", w.job, got.VC)
		}
	}
	// The "pb" job has not started, so its pair is its admission (and pa,
	// which stays on its GPU, shares it now).
	if pa := p.Intents[6]; pa.Share != 0.5 || pa.With != "pb" {
		t.Errorf("pair: %+v", pa)
	}
	if b, err := json.Marshal(p.Intents[0]); err != nil || !strings.Contains(string(b), `"intent":"admit"`) ||
		!strings.Contains(string(b), `"reason":"first start: priority 0 on k80"`) {
		t.Errorf("JSON %s (%v)", b, err)
	}
	if p.Intents[10].Class != Opportunistic || p.Intents[8].Class != Guaranteed {
		t.Errorf("classes: %+v / %+v", p.Intents[10], p.Intents[8])
	}
}

// TestRoundIntents: the engine's plans carry intents consistent with their
// assignments: a start is never a keep, a kept unit keeps each job's GPUs,
// and every suspended job is a suspension.
func TestRoundIntents(t *testing.T) {
	e, err := New(Config{Policy: "max_min_fairness_perf", RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{GPUs: []GPU{{ID: "v0", Type: "v100", Server: "a"}, {ID: "k0", Type: "k80", Server: "b"}}}
	for _, id := range []string{"j0", "j1", "j2"} {
		s.Jobs = append(s.Jobs, Job{ID: id, ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
			Throughput: map[string]float64{"v100": 3, "k80": 1}, ReceivedS: map[string]float64{}})
	}
	seen := map[Intent]bool{}
	for r := 0; r < 8; r++ {
		p, err := e.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range p.Assignments {
			for _, id := range a.Jobs {
				in := p.Intents[n]
				n++
				seen[in.Intent] = true
				if in.Job != id || (a.Action == Start) == (in.Intent == IntentKeep) {
					t.Fatalf("round %d: %+v for %+v", r, in, a)
				}
			}
		}
		for _, id := range p.Suspend {
			if in := p.Intents[n]; in.Job != id || in.Intent != IntentSuspend {
				t.Fatalf("round %d: %+v for suspended %s", r, in, id)
			}
			seen[IntentSuspend] = true
			n++
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			for _, a := range p.Assignments {
				if a.Jobs[0] == j.ID {
					j.ReceivedS[a.Type] += 360
					j.Started = true
				}
			}
		}
		s.TimeS += 360
		s.Running = p.Assignments
	}
	for _, in := range []Intent{IntentAdmit, IntentSuspend, IntentResume} {
		if !seen[in] {
			t.Errorf("eight rounds of three jobs on two GPUs never gave %s (%v)", in, seen)
		}
	}
}

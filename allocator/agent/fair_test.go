package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/fair"
	"github.com/rondo-sched/rondo/allocator/round"
)

// hugeBackend is fakeBackend's cluster with a 4-GPU job beside the three:
// larger than the one healthy GPU (its only generation).
type hugeBackend struct{ fakeBackend }

func (f *hugeBackend) Observe() (*engine.Snapshot, error) {
	s, _ := f.fakeBackend.Observe()
	for i := range s.Jobs {
		s.Jobs[i].User = "alice"
	}
	s.Jobs = append(s.Jobs, engine.Job{ID: "huge", ScaleFactor: 4, Throughput: map[string]float64{"v100": 1}, Weight: 1,
		TotalSteps: 100, RemainingSteps: 100, ReceivedS: map[string]float64{}, VC: "research", User: "bob"})
	return s, nil
}

// A gandiva_fair VC's users reach the status; a refused gang shows its
// reason on its job and is logged once.
func TestStatusGandivaFair(t *testing.T) {
	m, err := fair.New(fair.Config{RoundS: 1, Tickets: map[string]int{"alice": 200}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := New(Config{Backend: &hugeBackend{}, Engine: &round.Single{Mechanism: m}, Round: time.Second,
		VCs: []VC{{Name: "research", Policy: "gandiva_fair"}}, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	a.Step()
	a.Step()
	st := a.Status()
	// bob's only job is refused: alice is the only active user.
	if len(st.VCs) != 1 || len(st.VCs[0].Users) != 1 {
		t.Fatalf("vcs %+v", st.VCs)
	}
	for _, u := range st.VCs[0].Users {
		if u.User == "alice" && (u.Tickets != 200 || u.Share["v100"] != 1) {
			t.Errorf("alice: %+v", u)
		}
	}
	var huge *JobStatus
	for i := range st.Jobs {
		if st.Jobs[i].ID == "huge" {
			huge = &st.Jobs[i]
		}
	}
	if huge == nil || !strings.Contains(huge.Refused, "larger than any generation") || huge.User != "bob" {
		t.Fatalf("huge: %+v", huge)
	}
	// The refusal is its pending reason (#19).
	if huge.State != "unschedulable" || huge.PendingKind != "unschedulable" || huge.Pending != huge.Refused {
		t.Errorf("huge's pending fields: %+v", huge)
	}
	if n := strings.Count(logs.String(), "job refused"); n != 1 {
		t.Errorf("refusal logged %d times, want once:\n%s", n, logs.String())
	}
}

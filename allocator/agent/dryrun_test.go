package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/state"
)

// TestDryRun: an agent on a DryRun backend and a ReadOnly store restores
// the saved state (round, received time), leaves a decision in flight
// unreconciled, logs each round's plan with the jobs' GPUs and nodes,
// never enforces, never saves, and shows the would-be view in its status.
func TestDryRun(t *testing.T) {
	ctx := context.Background()
	saved := state.New()
	saved.Round = 7
	saved.Received["a"] = map[string]float64{"v100": 42}
	saved.Arrival["a"] = 0
	saved.Begin(state.Decision{ID: "round-8", Round: 8, Intents: []state.Intent{{Job: "b", Action: "admit"}}})
	raw, _ := json.Marshal(saved)
	store := &memStore{raw: raw}
	inner := &durableBackend{received: map[string]map[string]float64{}}
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	a := newTestAgent(t, DryRun(inner, log), ReadOnly(store), nil)
	a.cfg.Logger = log
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inner.received["a"]["v100"]; got != 42 {
		t.Errorf("received time not restored into the backend: %v", inner.received)
	}
	if len(inner.reconciled) != 0 {
		t.Errorf("a dry run reconciled %v", inner.reconciled)
	}
	for i := 0; i < 3; i++ {
		if err := a.StepContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(inner.plans) != 0 {
		t.Errorf("a dry run enforced %d plans", len(inner.plans))
	}
	if store.saves != 0 || !bytes.Equal(store.raw, raw) {
		t.Errorf("a dry run saved the state %d times", store.saves)
	}
	out := logs.String()
	// One GPU is healthy: one job runs, never enforced, so each round
	// would admit it again on g0 of node n.
	if n := strings.Count(out, "dry run: would admit"); n != 3 {
		t.Errorf("%d admit lines, want one per round:\n%s", n, out)
	}
	for _, want := range []string{"gpus=g0", "nodes=n", "type=v100", "reason=", "dry run: plan not enforced", "intents=admit=1",
		"left for the agent to reconcile"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	st := a.Status()
	if st.Round != 11 {
		t.Errorf("status round %d, want the saved 8 (the one in flight) plus 3", st.Round)
	}
	running := 0
	for _, j := range st.Jobs {
		if j.State == "running" {
			running++
		}
	}
	if running != 1 {
		t.Errorf("the status does not show the would-be plan: %d running", running)
	}
}

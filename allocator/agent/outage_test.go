package agent

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// outageBackend is fakeBackend whose Observe fails while down is set, with
// the error a Nomad client returns when no server listens.
type outageBackend struct {
	fakeBackend
	down bool
}

func (o *outageBackend) Observe() (*engine.Snapshot, error) {
	if o.down {
		return nil, fmt.Errorf("nomad: list nodes: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	}
	return o.fakeBackend.Observe()
}

// TestOutageTriggersReset: rounds that cannot observe Nomad (a server
// restarting) fail, and the first round that sees it again recomputes the
// allocation though no job or GPU changed; rounds without an outage do
// not.
func TestOutageTriggersReset(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	ob := &outageBackend{}
	a := New(Config{Backend: ob, Engine: e})
	recomputed := func() bool {
		t.Helper()
		ob.mu.Lock()
		defer ob.mu.Unlock()
		return ob.plans[len(ob.plans)-1].Recomputed
	}
	a.Step()
	if !recomputed() {
		t.Fatal("the first round did not compute an allocation")
	}
	a.Step()
	if recomputed() {
		t.Fatal("a round without any event recomputed")
	}
	ob.down = true
	n := len(ob.plans)
	if err := a.StepContext(t.Context()); err == nil {
		t.Fatal("a round without Nomad succeeded")
	}
	if len(ob.plans) != n {
		t.Fatal("a round that could not observe enforced a plan")
	}
	ob.down = false
	a.Step()
	if !recomputed() {
		t.Error("the first round after the outage did not recompute")
	}
	a.Step()
	if recomputed() {
		t.Error("the round after that recomputed again")
	}
}

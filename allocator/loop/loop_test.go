package loop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// trail is a backend and recorder that writes down what the loop calls,
// around the real engine.
type trail struct {
	calls     []string
	observe   error
	decided   error
	nothing   bool
	enforced  *engine.Plan
	sawIntent bool
}

func (t *trail) Observe() (*engine.Snapshot, error) {
	t.calls = append(t.calls, "observe")
	if t.observe != nil || t.nothing {
		return nil, t.observe
	}
	return &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "s"}},
		Jobs: []engine.Job{{ID: "j", ScaleFactor: 1, Weight: 1, TotalSteps: 10, RemainingSteps: 10,
			Throughput: map[string]float64{"v100": 1}}}}, nil
}

func (t *trail) Enforce(p *engine.Plan) error {
	t.calls = append(t.calls, "enforce")
	t.enforced = p
	t.sawIntent = len(p.Intents) == 1 && p.Intents[0].Intent == engine.IntentAdmit
	return nil
}

func (t *trail) Observed(context.Context, *engine.Snapshot) error {
	t.calls = append(t.calls, "observed")
	return nil
}

func (t *trail) Decided(context.Context, *engine.Snapshot, *engine.Plan) error {
	t.calls = append(t.calls, "decided")
	return t.decided
}

func (t *trail) Enforced(_ context.Context, _ *engine.Snapshot, _ *engine.Plan, err error) error {
	t.calls = append(t.calls, "enforced")
	return err
}

func TestStepOrder(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf"})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trail{}
	if _, p, err := (Round{Backend: tr, Decider: e, Recorder: tr}).Step(context.Background()); err != nil || p == nil {
		t.Fatal(p, err)
	}
	if want := []string{"observe", "observed", "decided", "enforce", "enforced"}; !slices.Equal(tr.calls, want) {
		t.Errorf("calls %v, want %v", tr.calls, want)
	}
	if !tr.sawIntent {
		t.Errorf("the enforced plan carries no admit intent: %+v", tr.enforced.Intents)
	}
	// A decision that cannot be recorded is not enforced.
	tr = &trail{decided: errors.New("no store")}
	if _, _, err := (Round{Backend: tr, Decider: e, Recorder: tr}).Step(context.Background()); err == nil || tr.enforced != nil {
		t.Errorf("err %v, enforced %v", err, tr.enforced)
	}
	// An observation error is marked; nothing else runs.
	tr = &trail{observe: errors.New("unreachable")}
	_, _, err = (Round{Backend: tr, Decider: e, Recorder: tr}).Step(context.Background())
	if !Observing(err) || err.Error() != "unreachable" || len(tr.calls) != 1 {
		t.Errorf("err %v, calls %v", err, tr.calls)
	}
	// Nothing to decide: the round ends after observing.
	tr = &trail{nothing: true}
	if s, p, err := (Round{Backend: tr, Decider: e, Recorder: tr}).Step(context.Background()); s != nil || p != nil || err != nil || len(tr.calls) != 1 {
		t.Errorf("idle round: %v %v %v %v", s, p, err, tr.calls)
	}
}

// TestWallClock: the first round starts at once, the next one a period
// after the previous start; a cancelled context stops the loop.
func TestWallClock(t *testing.T) {
	var next []time.Time
	w := &Wall{Period: func() time.Duration { return 30 * time.Millisecond }, OnNext: func(t time.Time) { next = append(next, t) }}
	ctx, cancel := context.WithCancel(context.Background())
	var starts []time.Time
	err := Run(ctx, w, func(context.Context) error {
		starts = append(starts, time.Now())
		if len(starts) == 3 {
			cancel()
		}
		return errors.New("a failed round does not stop the loop")
	}, func(error) bool { return false })
	if err != nil || len(starts) != 3 || len(next) != 2 {
		t.Fatalf("err %v, %d rounds, %d announced", err, len(starts), len(next))
	}
	for i := 1; i < 3; i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 30*time.Millisecond {
			t.Errorf("round %d started %v after the previous one", i, gap)
		}
	}
	// A fatal error ends the loop with that error.
	stop := errors.New("lost")
	if err := Run(context.Background(), &Wall{Period: func() time.Duration { return 0 }},
		func(context.Context) error { return stop }, func(err error) bool { return err == stop }); err != stop {
		t.Errorf("fatal: %v", err)
	}
}

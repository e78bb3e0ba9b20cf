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

// quotaDecider is a decider that tells its VCs' quotas, wrapped as the
// stages wrap deciders.
type quotaDecider struct{ Decider }

func (quotaDecider) Quotas() engine.Quotas { return engine.Quotas{"": {"v100": 0}} }

type wrapper struct{ next Decider }

func (w wrapper) Round(s *engine.Snapshot) (*engine.Plan, error) { return w.next.Round(s) }
func (w wrapper) Quotas() engine.Quotas                          { return QuotasOf(w.next) }

// waitBackend: one V100, two one-GPU jobs.
type waitBackend struct{ trail }

func (b *waitBackend) Observe() (*engine.Snapshot, error) {
	s, _ := b.trail.Observe()
	j := s.Jobs[0]
	j.ID = "k"
	s.Jobs = append(s.Jobs, j)
	return s, nil
}

// TestStepExplains: with Explain the plan says why the job it does not run
// waits, with the decider's quotas through a wrapping stage; without, it
// says nothing.
func TestStepExplains(t *testing.T) {
	newEngine := func() *engine.Engine {
		e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	_, p, err := (Round{Backend: &waitBackend{}, Decider: newEngine(), Explain: true}).Step(context.Background())
	if err != nil || len(p.Assignments) != 1 || len(p.Waiting) != 1 || p.Waiting[0].Reason.Kind != engine.LowerPriority {
		t.Fatalf("explained: %v %+v", err, p)
	}
	_, p, _ = (Round{Backend: &waitBackend{}, Decider: newEngine()}).Step(context.Background())
	if p.Waiting != nil {
		t.Errorf("not asked, explained: %+v", p.Waiting)
	}
	// A quota of 0 V100s: the waiting job can never run in its VC.
	d := wrapper{quotaDecider{newEngine()}}
	if q := QuotasOf(d); q[""]["v100"] != 0 || q == nil {
		t.Fatalf("quotas through the wrapper: %v", q)
	}
	_, p, _ = (Round{Backend: &waitBackend{}, Decider: d, Explain: true}).Step(context.Background())
	if len(p.Waiting) != 1 || p.Waiting[0].Reason.Kind != engine.Unschedulable {
		t.Errorf("with quotas: %+v", p.Waiting)
	}
}

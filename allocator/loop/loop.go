// Package loop is Rondo's one driver loop. Every round, paced by a clock
// (the wall clock for `rondo agent`, the simulator's virtual clock for
// `rondo simulate`):
//
//	Backend.Observe ─► Recorder.Observed ─► Decider.Round ─► Recorder.Decided ─► Backend.Enforce ─► Recorder.Enforced
//	(received time                         (the plan, with     (the durable record:   (the plan's
//	 credited from what                     its intents; with   nothing is enforced    intents carried
//	 enforcement ran)                       Round.Explain, why  unless it is kept)     out)
//	                                        the others wait)
//
// The backends (allocator/sim, allocator/nomad) implement Backend; the
// agent is the Recorder that makes a round durable; the simulator has none.
package loop

import (
	"context"
	"errors"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/internal/crashpoint"
)

// Backend is where plans take effect.
type Backend interface {
	// Observe reports the cluster and its jobs now, their received time
	// credited up to now from what enforcement actually ran. A nil snapshot
	// means there is nothing to decide this round (the simulator between
	// jobs): the round ends there.
	Observe() (*engine.Snapshot, error)
	// Enforce carries the plan's intents out.
	Enforce(*engine.Plan) error
}

// Decider decides one round: an *engine.Engine, the per-VC deciders, or
// engine.Fluid for the ideal baseline.
type Decider interface {
	Round(*engine.Snapshot) (*engine.Plan, error)
}

// Recorder is the durable part of a round (the agent's state in Nomad
// Variables). Every method may be a no-op.
type Recorder interface {
	// Observed may amend the snapshot before the decision (measured
	// throughputs) and prepare the decider (a reset after an outage).
	Observed(ctx context.Context, s *engine.Snapshot) error
	// Decided records the decision before anything of it is enforced; an
	// error means nothing is enforced this round.
	Decided(ctx context.Context, s *engine.Snapshot, p *engine.Plan) error
	// Enforced is told how enforcement went; what it returns is the
	// round's error.
	Enforced(ctx context.Context, s *engine.Snapshot, p *engine.Plan, err error) error
}

// ObserveError is a round's error when the backend could not observe the
// cluster (the agent then re-plans from scratch once it can).
type ObserveError struct{ Err error }

func (e *ObserveError) Error() string { return e.Err.Error() }
func (e *ObserveError) Unwrap() error { return e.Err }

// Observing reports whether err came from observing the cluster.
func Observing(err error) bool {
	var oe *ObserveError
	return errors.As(err, &oe)
}

// Round is one round's parts.
type Round struct {
	Backend  Backend
	Decider  Decider
	Recorder Recorder // nil: nothing is recorded
	// Explain fills each plan's Waiting (engine.ExplainQuotas, with the
	// decider's VC quotas when it tells them, QuotasOf) after the decision
	// and before it is recorded: why each job the plan does not run waits.
	// The agent always sets it; the simulator only when asked (it costs).
	Explain bool
}

// Step runs one round: observe, decide, record, enforce. It returns the
// snapshot and plan it made (nil when Observe had nothing to decide or
// failed) and the round's error; an observation error is an
// *ObserveError.
func (r Round) Step(ctx context.Context) (*engine.Snapshot, *engine.Plan, error) {
	s, err := r.Backend.Observe()
	if err != nil {
		return nil, nil, &ObserveError{Err: err}
	}
	if s == nil {
		return nil, nil, nil
	}
	// The chaos soak's kill points (no-ops unless RONDO_CRASH_AT names one).
	crashpoint.Hit(crashpoint.Observe)
	if r.Recorder != nil {
		if err := r.Recorder.Observed(ctx, s); err != nil {
			return s, nil, err
		}
	}
	p, err := r.Decider.Round(s)
	if err != nil {
		return s, nil, err
	}
	if r.Explain {
		engine.ExplainQuotas(s, p, QuotasOf(r.Decider))
	}
	crashpoint.Hit(crashpoint.Decide)
	if r.Recorder != nil {
		if err := r.Recorder.Decided(ctx, s, p); err != nil {
			return s, p, err
		}
	}
	crashpoint.Hit(crashpoint.Record)
	err = r.Backend.Enforce(p)
	crashpoint.Hit(crashpoint.Enforced)
	if r.Recorder != nil {
		err = r.Recorder.Enforced(ctx, s, p, err)
	}
	return s, p, err
}

// Clock paces the rounds.
type Clock interface {
	// Next waits until the next round may start; false ends the loop.
	Next(ctx context.Context) bool
}

// Run calls step at every tick of the clock until the clock stops (nil)
// or step returns an error that fatal says ends the loop.
func Run(ctx context.Context, c Clock, step func(context.Context) error, fatal func(error) bool) error {
	for c.Next(ctx) {
		if err := step(ctx); err != nil && fatal(err) {
			return err
		}
	}
	return nil
}

// Wall is the wall clock: a round starts Period after the previous one
// started (at once the first time), or when the context ends, never.
type Wall struct {
	// Period is read at every tick (a SIGHUP may change the round length).
	Period func() time.Duration
	// OnNext, if set, is told when the next round will start.
	OnNext func(time.Time)
	last   time.Time
}

// Next implements Clock.
func (w *Wall) Next(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if !w.last.IsZero() {
		next := w.last.Add(w.Period())
		if w.OnNext != nil {
			w.OnNext(next)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(next)):
		}
	}
	w.last = time.Now()
	return true
}

// Always is a fatal func for Run: every error ends the loop.
func Always(error) bool { return true }

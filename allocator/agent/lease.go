package agent

import (
	"context"
	"time"

	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/state"
)

// The agent is the lease API's decider and progress sink.
var (
	_ lease.LeaseDecider = (*Agent)(nil)
	_ lease.ProgressSink = (*Agent)(nil)
)

// Lease answers a task's lease request from the current plan: the lease
// continues iff the plan runs the job, and expires at the next round (when
// the next plan is made). Jobs the agent does not schedule are
// lease.ErrUnknownJob (404). Dispatched or periodic children are refused as
// unknown: the agent schedules jobs by their own id and does not check
// that a parent's token's allocation belongs to a child.
func (a *Agent) Lease(ctx context.Context, c lease.Caller) (lease.Grant, error) {
	if c.Job != c.IdentityJob {
		return lease.Grant{}, lease.ErrUnknownJob
	}
	a.mu.Lock()
	known, run := a.known[c.Job], a.planned[c.Job]
	if a.status.LastRound.IsZero() {
		// Started, no round yet (a restart): the placement in force stands
		// until the first plan.
		run = true
	}
	g := lease.Grant{Continue: run, ExpiresAt: a.status.NextRound, Round: int64(a.status.Round)}
	round := a.cfg.Round
	dir := a.cfg.CheckpointDir
	a.mu.Unlock()
	if !known {
		return lease.Grant{}, lease.ErrUnknownJob
	}
	if g.ExpiresAt.IsZero() || time.Until(g.ExpiresAt) <= 0 {
		// Between the end of a round and the next plan: one more round.
		g.ExpiresAt = time.Now().Add(round)
	}
	if dir != nil {
		g.CheckpointDir = dir(c.Job)
	}
	return g, nil
}

// Report records a progress report: the throughput measurement per GPU
// type and the steps done, both kept in the durable state (saved with the
// next round). The backend's progress comes from Reported.
func (a *Agent) Report(ctx context.Context, c lease.Caller, p lease.Progress) error {
	if c.Job != c.IdentityJob {
		return lease.ErrUnknownJob
	}
	a.mu.Lock()
	known := a.known[c.Job]
	a.mu.Unlock()
	if !known {
		return lease.ErrUnknownJob
	}
	a.smu.Lock()
	defer a.smu.Unlock()
	n := int64(1)
	if m, ok := a.st.Throughput[c.Job][p.GPUType]; ok {
		n = m.Samples + 1
	}
	if p.GPUType != "" && p.ThroughputStepsPerS > 0 {
		a.st.SetThroughput(c.Job, p.GPUType, state.Measurement{StepsPerSec: p.ThroughputStepsPerS, Samples: n, At: p.At})
		a.est.Observe(c.Job, p.GPUType, p.ThroughputStepsPerS)
	}
	a.st.Progress[c.Job] = float64(p.StepsDone)
	return nil
}

// Reported returns the steps a job last reported through the lease API
// (kept across restarts in the state); ok is false when it never reported.
func (a *Agent) Reported(job string) (float64, bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	v, ok := a.st.Progress[job]
	return v, ok
}

// Measured returns the throughput reported for a job on a GPU type.
func (a *Agent) Measured(job, gpuType string) (state.Measurement, bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	m, ok := a.st.Throughput[job][gpuType]
	return m, ok
}

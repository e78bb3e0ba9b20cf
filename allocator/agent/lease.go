package agent

import (
	"context"
	"fmt"
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
// lease.ErrUnknownJob (404). A dispatched or periodic child (its identity
// names the parent) acts for itself only: its allocation must be the
// child's (checkCaller).
func (a *Agent) Lease(ctx context.Context, c lease.Caller) (lease.Grant, error) {
	if err := a.checkCaller(ctx, c); err != nil {
		return lease.Grant{}, err
	}
	c.Job = a.jobKey(c.Namespace, c.Job)
	a.mu.Lock()
	known, run, notice := a.known[c.Job], a.planned[c.Job], a.notice[c.Job]
	if a.status.LastRound.IsZero() {
		// Started, no round yet (a restart): the placement in force stands
		// until the first plan.
		run, notice = true, false
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
	if notice && run {
		// The decision in force keeps the job one more round to
		// checkpoint (checkpoint_aware's notice): it stops at the next
		// round.
		g.CheckpointNow, g.StopAt = true, g.ExpiresAt
	}
	if dir != nil {
		g.CheckpointDir = dir(c.Job)
	}
	if rt, ok := a.cfg.Backend.(RoleTeller); ok {
		r, err := rt.Roles(ctx, c.Namespace, c.Job, c.Alloc)
		if err != nil {
			// The answer goes without the fields: the task keeps the
			// values it last read (lease/README.md).
			a.cfg.Logger.Warn("lease: cannot tell the task's role", "job", c.Job, "alloc", c.Alloc, "error", err)
		}
		g.Roles = r
	}
	return g, nil
}

// RoleTeller is implemented by backends that run two-role elastic jobs
// (DL2's workers and parameter servers): the lease answer of such a job's
// task carries its role, the counts in force and its share of the batch.
type RoleTeller interface {
	// Roles returns what the task of allocation alloc of job learns
	// (nil, nil: not a two-role job's worker or PS task).
	Roles(ctx context.Context, namespace, job, alloc string) (*lease.Roles, error)
}

// Report records a progress report: the throughput measurement per GPU
// type and the steps done, both kept in the durable state (saved with the
// next round). The backend's progress comes from Reported.
func (a *Agent) Report(ctx context.Context, c lease.Caller, p lease.Progress) error {
	if err := a.checkCaller(ctx, c); err != nil {
		return err
	}
	c.Job = a.jobKey(c.Namespace, c.Job)
	a.mu.Lock()
	known := a.known[c.Job]
	p.GPUType = a.reportedType(c.Job, p.GPUType)
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
	// A job sharing its GPUs reports its pair throughput: it is not the
	// job's isolated throughput, so the estimator learns it as the pair's.
	// A report that names no partner, sent by an older client, is taken as
	// paired with the partner the decision in force gives the job.
	partner := p.Partner
	if partner == "" {
		partner = a.partner[c.Job]
	}
	switch {
	case p.GPUType == "" || !(p.ThroughputStepsPerS > 0):
		// Progress only: nothing measured.
	case partner != "":
		// Learned as the pair's throughput (engine.Pair.Measured).
		k := pairReport{c.Job, partner, p.GPUType}
		r := a.measuredWith[k]
		if r == nil {
			r = &reports{}
			a.measuredWith[k] = r
		}
		r.add(p.ThroughputStepsPerS)
	default:
		a.st.SetThroughput(c.Job, p.GPUType, state.Measurement{StepsPerSec: p.ThroughputStepsPerS, Samples: n, At: p.At})
		r := a.measured[c.Job][p.GPUType]
		if r == nil {
			if a.measured[c.Job] == nil {
				a.measured[c.Job] = map[string]*reports{}
			}
			r = &reports{}
			a.measured[c.Job][p.GPUType] = r
		}
		r.add(p.ThroughputStepsPerS)
	}
	a.st.Progress[c.Job] = float64(p.StepsDone)
	if p.HasEpochs {
		if a.st.Epochs == nil {
			a.st.Epochs = map[string]float64{}
		}
		a.st.Epochs[c.Job] = p.EpochsDone
	}
	a.recordCheckpoint(c.Job, p)
	return nil
}

// recordCheckpoint keeps what a report says of the job's checkpoints and
// restarts, and measures its start latency: the first report after a
// round (re)started it (Event) ends it. Under smu.
func (a *Agent) recordCheckpoint(job string, p lease.Progress) {
	ck := a.st.Checkpoints[job]
	changed := false
	if !p.CheckpointAt.IsZero() {
		ck.At, changed = p.CheckpointAt.UTC(), true
	}
	if p.HasCheckpointS {
		v := p.CheckpointS
		ck.WriteS, changed = &v, true
	}
	if p.HasRestoreS {
		v := p.RestoreS
		ck.RestoreS, changed = &v, true
	}
	if since, ok := a.startedAt[job]; ok {
		delete(a.startedAt, job)
		if d := p.At.Sub(since).Seconds(); d >= 0 {
			ck.StartLatencyS, changed = &d, true
		}
	}
	if !changed {
		return
	}
	if a.st.Checkpoints == nil {
		a.st.Checkpoints = map[string]state.Checkpoint{}
	}
	a.st.Checkpoints[job] = ck
}

// Checkpoint returns what a job reported of its checkpoints and restarts
// through the lease API, and its measured start latency (kept across
// restarts in the state); ok is false when nothing is known.
func (a *Agent) Checkpoint(job string) (state.Checkpoint, bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	ck, ok := a.st.Checkpoints[job]
	return ck, ok
}

// AllocOwner is implemented by backends that can tell which job an
// allocation belongs to (the Nomad backend asks Nomad). The agent needs it
// to let dispatched and periodic children use the lease API: their
// workload identity names the parent job, so only the allocation tells
// which child the caller is.
type AllocOwner interface {
	// AllocJob returns the id of the job that allocation alloc in
	// namespace belongs to; "" and no error when there is no such
	// allocation.
	AllocJob(ctx context.Context, namespace, alloc string) (string, error)
}

// maxOwners bounds the cache of allocation owners.
const maxOwners = 10000

// jobKey is the backend's key of a caller's job (Config.JobKey).
func (a *Agent) jobKey(ns, id string) string {
	if a.cfg.JobKey == nil {
		return id
	}
	return a.cfg.JobKey(ns, id)
}

// checkCaller lets a caller act for the job it names: its own job, or, for
// a child whose identity names its parent, the child its allocation belongs
// to (never a sibling). An allocation's job never changes, so the answer is
// cached.
func (a *Agent) checkCaller(ctx context.Context, c lease.Caller) error {
	if c.Job == c.IdentityJob {
		return nil
	}
	owner, ok := a.cfg.Backend.(AllocOwner)
	if !ok {
		return lease.ErrUnknownJob // cannot tell children apart
	}
	key := c.Namespace + "\x00" + c.Alloc
	a.mu.Lock()
	job, cached := a.owners[key]
	a.mu.Unlock()
	if !cached {
		var err error
		if job, err = owner.AllocJob(ctx, c.Namespace, c.Alloc); err != nil {
			return err
		}
		a.mu.Lock()
		if len(a.owners) >= maxOwners {
			clear(a.owners)
		}
		a.owners[key] = job
		a.mu.Unlock()
	}
	if job != c.Job {
		return fmt.Errorf("%w: allocation %s is job %q's, not %q's", lease.ErrNotOwner, c.Alloc, job, c.Job)
	}
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

// ReportedEpochs returns the epochs a job last reported through the lease
// API (epochs_done, kept across restarts in the state); ok is false when
// no report of it said.
func (a *Agent) ReportedEpochs(job string) (float64, bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	v, ok := a.st.Epochs[job]
	return v, ok
}

// Measured returns the throughput reported for a job on a GPU type.
func (a *Agent) Measured(job, gpuType string) (state.Measurement, bool) {
	a.smu.Lock()
	defer a.smu.Unlock()
	m, ok := a.st.Throughput[job][gpuType]
	return m, ok
}

// reportedType is the GPU type a report is learned under: the type the
// task names when the cluster has it, else the type the job runs on
// (a task naming its GPU by another convention, "a100" from node meta
// where the agent's type is "a100-80gb", still measures it). a.mu held.
func (a *Agent) reportedType(job, typ string) string {
	if _, ok := a.status.Types[typ]; ok || typ == "" {
		return typ
	}
	for _, j := range a.status.Jobs {
		if j.ID == job && j.State == "running" && j.Type != "" {
			return j.Type
		}
	}
	return typ
}

package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/hcl"
)

// History is the fairness history a restarted allocator hands back to the
// backend (from allocator/state): the clock's origin, each job's arrival on
// that clock and its cumulative received GPU time per type.
type History struct {
	Epoch    time.Time
	Arrival  map[string]float64
	Received map[string]map[string]float64
	// Credit is each job's last credit (state.State.Credit).
	Credit map[string]state.Credit
}

// Restore seeds the backend with the history of a previous run. Call it
// before the first Observe; jobs seen later start with their recorded
// arrival and received time instead of afresh.
func (b *Backend) Restore(epoch time.Time, arrival map[string]float64, received map[string]map[string]float64) {
	h := History{Epoch: epoch, Arrival: arrival, Received: received}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !h.Epoch.IsZero() {
		b.epoch = h.Epoch
	}
	b.hist = History{Epoch: b.epoch, Arrival: maps.Clone(h.Arrival), Received: map[string]map[string]float64{},
		Credit: b.hist.Credit}
	for j, m := range h.Received {
		b.hist.Received[j] = maps.Clone(m)
	}
	for id, st := range b.jobs {
		if a, ok := h.Arrival[id]; ok {
			st.arrivalS = a
		}
		if m := h.Received[id]; m != nil {
			b.led.Restore(id, m)
		}
	}
}

// RestoreCredit hands the backend the last credit of each job as the
// previous run saved it (state.State.Credit). Call it before the first
// Observe, after Restore. When a job is first seen, one whose live
// allocations holding GPUs are the ones recorded (or were created after the
// record) is credited the time since on the GPUs' type: Nomad kept it
// running while no allocator watched. A job that held none, or holds an
// allocation older than the record that the record does not list, is
// credited nothing.
func (b *Backend) RestoreCredit(credit map[string]state.Credit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hist.Credit = make(map[string]state.Credit, len(credit))
	for id, c := range credit {
		b.hist.Credit[id] = state.Credit{AtS: c.AtS, Allocs: slices.Clone(c.Allocs)}
	}
}

// CreditMarks reports each observed job's last credit: the time of the
// last Observe (on the epoch clock; the received time Observe reported is
// up to it) and the allocations it then held GPUs with. The agent saves it
// with the received time.
func (b *Backend) CreditMarks() map[string]state.Credit {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]state.Credit, len(b.jobs))
	for id, st := range b.jobs {
		if st.job == nil {
			continue
		}
		out[id] = state.Credit{AtS: st.lastS, Allocs: slices.Clone(st.allocs)}
	}
	return out
}

// heldAlloc is a live allocation holding a job's GPUs, with its creation
// time on the epoch clock.
type heldAlloc struct {
	id      string
	createS float64
}

// downtimeCredit is the GPU time to credit a job first seen at now (after a
// restart) that holds its GPUs with allocations held, given its last credit
// mark: the time since the mark, or since the newest allocation's creation
// when it was created after the mark (started by the last round before the
// crash). Nothing when an allocation predates the mark but the mark does not
// list it (it cannot be known to have held GPUs all along), or when it holds
// none.
func downtimeCredit(mark state.Credit, held []heldAlloc, now float64) float64 {
	if len(held) == 0 {
		return 0
	}
	since := mark.AtS
	for _, h := range held {
		if slices.Contains(mark.Allocs, h.id) {
			continue
		}
		if h.createS < mark.AtS {
			return 0
		}
		since = max(since, h.createS)
	}
	return max(now-since, 0)
}

// Epoch is time 0 of the snapshots' clock.
func (b *Backend) Epoch() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// Intents describes what enforcing p will change, one intent per started
// or suspended job (kept jobs are not touched), each with the job modify
// index it was planned against. The agent records them (state.Begin) before
// Enforce.
func (b *Backend) Intents(p *engine.Plan) []state.Intent {
	b.mu.Lock()
	defer b.mu.Unlock()
	intents := intentsOf(p)
	var out []state.Intent
	for _, a := range p.Assignments {
		if a.Action != engine.Start {
			continue
		}
		for _, id := range a.Jobs {
			st := b.jobs[id]
			if st == nil {
				continue
			}
			in := state.Intent{Namespace: deref(st.job.Namespace), Job: id, Action: intentOr(intents, id, engine.IntentAdmit), GPUType: a.Type,
				GPUs: a.GPUs, Node: b.nodeNames(a.Servers), Priority: GuaranteedPriority,
				JobModifyIndex: deref(st.job.JobModifyIndex)}
			if st.policy.Class == hcl.Opportunistic {
				in.Priority = OpportunisticPriority
			}
			out = append(out, in)
		}
	}
	for _, a := range p.Assignments {
		// A two-role job resized by a stop and a restart (checkpoint
		// scaling): settled like a start.
		if _, ok := b.twoRoleResize(a); !ok || !b.jobs[a.Jobs[0]].checkpointScaling() {
			continue
		}
		id := a.Jobs[0]
		st := b.jobs[id]
		in := state.Intent{Namespace: deref(st.job.Namespace), Job: id, Action: intentOr(intents, id, engine.IntentResize), GPUType: a.Type,
			GPUs: a.GPUs, Node: b.nodeNames(a.Servers), Priority: GuaranteedPriority, JobModifyIndex: deref(st.job.JobModifyIndex)}
		if st.policy.Class == hcl.Opportunistic {
			in.Priority = OpportunisticPriority
		}
		out = append(out, in)
	}
	for _, id := range p.Suspend {
		st := b.jobs[id]
		if st == nil {
			continue
		}
		out = append(out, state.Intent{Namespace: deref(st.job.Namespace), Job: id, Action: intentOr(intents, id, engine.IntentSuspend),
			GPUs: st.gpus, JobModifyIndex: deref(st.job.JobModifyIndex)})
	}
	return out
}

// Reconcile settles the intents of a decision that a crash left in flight.
// Nomad is the truth: an intent whose job still has the modify index it was
// planned against never reached Nomad, so it is rolled back (nothing to
// undo: the job stays as it is and the next round decides afresh). A job
// whose index moved was written: a start counts as applied only if the job
// now carries exactly the intended GPU pin with a count above 0, a
// suspension if its group is at 0; anything in between (a migration or a
// retune that stopped the job but did not re-register it) is left to the
// next round, which sees the job suspended.
// Nothing is ever re-applied here, so no job can be started twice.
func (b *Backend) Reconcile(pending []state.Intent) (applied, rolledBack []string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cfg.Client
	for _, in := range pending {
		// in.Job is the job's key (JobKey), in.Namespace its namespace.
		ns, id := in.Namespace, in.Job
		if ns == "" {
			ns = b.home()
		}
		if ns != b.home() {
			id = strings.TrimPrefix(id, ns+"/")
		}
		job, _, jerr := c.Jobs().Info(id, &api.QueryOptions{Namespace: ns})
		if jerr != nil {
			if strings.Contains(jerr.Error(), "404") {
				rolledBack = append(rolledBack, in.Job) // purged meanwhile
				continue
			}
			return applied, rolledBack, fmt.Errorf("nomad: reconcile %s: %w", in.Job, jerr)
		}
		done := false
		if deref(job.JobModifyIndex) != in.JobModifyIndex {
			tg, _ := gpuGroup(job)
			switch in.Action {
			case "suspend", "preempt":
				done = tg != nil && deref(tg.Count) == 0
			default:
				// A count above 0 too: a retune (or a migration onto the
				// same GPUs) stops the job before re-registering it with
				// the same pins.
				done = tg != nil && b.gpuPool(deref(job.NodePool)) && hasNodePin(tg) && pinnedGPUs(tg) == sortedJoin(in.GPUs) &&
					deref(tg.Count) > 0
				if pol, err := hcl.PolicyFromMeta(job.Meta); err == nil && pol.Elastic() && tg != nil {
					// Elastic jobs carry node pins only (PinElastic).
					done = b.gpuPool(deref(job.NodePool)) && hasNodePin(tg) && pinnedGPUs(tg) == "" && deref(tg.Count) > 0
					if pol.TwoRole() {
						// And the parameter servers run again.
						done = done && groupCount(job, pol.PSGroup) > 0
					}
				}
			}
		}
		verdict := "rolled back"
		if done {
			applied = append(applied, in.Job)
			verdict = "applied"
		} else {
			rolledBack = append(rolledBack, in.Job)
		}
		b.log.Info("reconcile", "job", in.Job, "intent", in.Action, "planned_index", in.JobModifyIndex,
			"index", deref(job.JobModifyIndex), "result", verdict)
	}
	return applied, rolledBack, nil
}

// pinnedGPUs returns the sorted GPU ids a group is pinned to.
func pinnedGPUs(tg *api.TaskGroup) string {
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if !isGPURequest(d.Name) {
				continue
			}
			for _, c := range d.Constraints {
				if c.LTarget == deviceTarget {
					return sortedJoin(strings.Split(c.RTarget, ","))
				}
			}
		}
	}
	return ""
}

func sortedJoin(ids []string) string {
	s := append([]string(nil), ids...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

// CheckpointDirOf is the checkpoint directory of an observed job ("" if
// unknown), for the lease API's grants.
func (b *Backend) CheckpointDirOf(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.jobs[id]; st != nil && st.job != nil {
		return CheckpointDir(st.job)
	}
	return ""
}

// AllocJob returns the job an allocation belongs to (the lease API's check
// that a dispatched or periodic child, whose identity names its parent,
// acts for itself): "" when Nomad has no such allocation in namespace.
func (b *Backend) AllocJob(ctx context.Context, namespace, alloc string) (string, error) {
	q := (&api.QueryOptions{Namespace: namespace}).WithContext(ctx)
	a, _, err := b.cfg.Client.Allocations().Info(alloc, q)
	if err != nil {
		var ue api.UnexpectedResponseError
		if errors.As(err, &ue) && ue.StatusCode() == 404 {
			return "", nil
		}
		return "", fmt.Errorf("nomad: allocation %s: %w", alloc, err)
	}
	if a.Namespace != namespace {
		return "", nil
	}
	return a.JobID, nil
}

package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// historyLen is how many RoundEvents a job's history keeps (the last ones).
const historyLen = 100

// tracked is what the agent remembers of one job between rounds for its
// pending fields and history (in memory only: a restarted agent starts
// them afresh). Under a.mu.
type tracked struct {
	history []RoundEvent
	// kind is the pending kind last recorded ("" : it ran, or never
	// waited yet).
	kind string
	// stoppedAt is when the job last stopped (the snapshot's clock: a
	// suspend or preempt intent), stopped whether it did under this agent;
	// seenAt when this agent first saw it waiting (a job that ran before
	// the agent started waits since then as far as it knows).
	stoppedAt, seenAt float64
	stopped, seen     bool
}

func (t *tracked) add(e RoundEvent) {
	if len(t.history) == historyLen {
		copy(t.history, t.history[1:])
		t.history = t.history[:historyLen-1]
	}
	t.history = append(t.history, e)
}

// track is the job's record, made on first use (under a.mu).
func (a *Agent) track(job string) *tracked {
	if a.tracks == nil {
		a.tracks = map[string]*tracked{}
	}
	t := a.tracks[job]
	if t == nil {
		t = &tracked{}
		a.tracks[job] = t
	}
	return t
}

// pendingRound records the plan's changes in the jobs' histories (every
// intent but keep) and remembers when jobs stop (under a.mu).
func (a *Agent) pendingRound(s *engine.Snapshot, p *engine.Plan, round int, now time.Time) {
	for _, ji := range p.Intents {
		t := a.track(ji.Job)
		if ji.Intent != engine.IntentKeep {
			t.add(RoundEvent{Round: round, Time: now, Intent: string(ji.Intent), Type: ji.Type, GPUs: len(ji.GPUs),
				Reason: ji.Reason.String()})
		}
		switch ji.Intent {
		case engine.IntentSuspend, engine.IntentPreempt:
			t.stoppedAt, t.stopped, t.kind = s.TimeS, true, ""
		}
	}
}

// pending fills a job's pending fields (under a.mu): running jobs have
// none; a waiting job the round's reason (w), its place and priority, how
// long it has waited, and a history event when it starts waiting or its
// reason's kind changes. refused is a user-level mechanism's reason for
// never running it ("" : none): it is the job's reason, unschedulable.
func (a *Agent) pending(js *JobStatus, j *engine.Job, s *engine.Snapshot, w *engine.Waiting, refused string,
	running bool, round int, now time.Time) {
	t := a.track(j.ID)
	if running {
		t.kind, t.stopped, t.seen = "", false, false
		return
	}
	if !t.seen {
		t.seenAt, t.seen = s.TimeS, true
	}
	ran := j.Started
	for _, v := range j.ReceivedS {
		ran = ran || v > 0
	}
	switch {
	case t.stopped:
		js.WaitS = s.TimeS - t.stoppedAt
	case !ran:
		js.WaitS = s.TimeS - j.ArrivalS
	default:
		js.WaitS = s.TimeS - t.seenAt
	}
	js.WaitS = max(js.WaitS, 0)
	var kind string
	switch {
	case refused != "": // the mechanism's own word for it
		js.Pending, kind, js.State = refused, "unschedulable", "unschedulable"
	case w != nil:
		js.Pending, kind = w.Reason.String(), w.Reason.WaitKey()
		js.QueuePosition, js.Priority = w.Position, w.Priority
		if w.Reason.Kind == engine.Unschedulable {
			js.State = "unschedulable"
		}
	}
	js.PendingKind = kind
	if kind != "" && kind != t.kind {
		t.add(RoundEvent{Round: round, Time: now, Intent: "wait", Reason: js.Pending})
	}
	if kind != "" {
		t.kind = kind
	}
}

// rejected is a job the backend or the agent will not schedule, as the
// status lists it (under a.mu).
func (a *Agent) rejected(r engine.Rejection, s *engine.Snapshot, round int, now time.Time) JobStatus {
	t := a.track(r.Job)
	if !t.seen {
		t.seenAt, t.seen = s.TimeS, true
	}
	if t.kind != engine.RejectedKey {
		t.add(RoundEvent{Round: round, Time: now, Intent: "reject", Reason: r.Reason})
		t.kind = engine.RejectedKey
	}
	return JobStatus{ID: r.Job, Namespace: r.Namespace, VC: r.VC, User: r.User, State: "rejected",
		Pending: r.Reason, PendingKind: "rejected", WaitS: max(s.TimeS-t.seenAt, 0)}
}

// forgetTracks drops the records of jobs the status no longer lists
// (under a.mu).
func (a *Agent) forgetTracks(listed map[string]bool) {
	for id := range a.tracks {
		if !listed[id] {
			delete(a.tracks, id)
		}
	}
}

// rejectUndeclared moves the jobs whose VC the config does not declare
// from s.Jobs to s.Rejected (only when VCs are declared): no round would
// schedule a guaranteed one, and an opportunistic one naming an unknown VC
// is as surely a mistake (`rondo simulate --vc-config` refuses both). A job
// that holds GPUs now (s.Running) is left to the round until it stops.
func (a *Agent) rejectUndeclared(s *engine.Snapshot) {
	a.mu.Lock()
	var names []string
	for _, v := range a.cfg.VCs {
		names = append(names, v.Name)
	}
	a.mu.Unlock()
	if len(names) == 0 {
		return
	}
	// A job that holds GPUs stays in the round until it stops (a reload
	// that drops its VC): the VC deciders suspend it, and no decider
	// places another job on GPUs it still holds.
	holds := map[string]bool{}
	for _, r := range s.Running {
		for _, id := range r.Jobs {
			holds[id] = true
		}
	}
	bad := func(j *engine.Job) bool { return !slices.Contains(names, j.VC) && !holds[j.ID] }
	if !slices.ContainsFunc(s.Jobs, func(j engine.Job) bool { return bad(&j) }) {
		return
	}
	declared := strings.Join(names, ", ")
	jobs := make([]engine.Job, 0, len(s.Jobs)) // the backend may share its list
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if !bad(j) {
			jobs = append(jobs, *j)
			continue
		}
		s.Rejected = append(s.Rejected, engine.Rejection{Job: j.ID, Namespace: j.Namespace, VC: j.VC, User: j.User,
			Reason: fmt.Sprintf("VC %q is not declared (declared: %s)", j.VC, declared)})
	}
	s.Jobs = jobs
}

// Job is one job's status with its history (GET /v1/jobs/{id}): an active,
// rejected or recently finished job; ok is false for a job the agent does
// not list.
func (a *Agent) Job(id string) (JobStatus, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, js := range a.status.Jobs {
		if js.ID == id {
			if t := a.tracks[id]; t != nil {
				js.History = slices.Clone(t.history)
			}
			return js, true
		}
	}
	return JobStatus{}, false
}

// serveJob is GET /v1/jobs/{id}: the job's status with its history, or a
// 404 with a JSON error.
func (a *Agent) serveJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	js, ok := a.Job(id)
	if !ok {
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf("job %q is unknown to the agent", id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(js)
}

package engine

import (
	"fmt"
	"slices"
)

// Intent is what a plan does to one job. The round decides it, with the
// reason; backends carry it out (the Nomad backend registers, scales or
// leaves the job alone; the simulator runs, cuts or counts it) and never
// infer it from what they see.
type Intent string

const (
	// IntentAdmit: the job starts for the first time.
	IntentAdmit Intent = "admit"
	// IntentKeep: the job keeps its GPUs (lease renewal).
	IntentKeep Intent = "keep"
	// IntentResume: a job that ran before and holds no GPUs starts again.
	IntentResume Intent = "resume"
	// IntentMigrate: the job moves from the GPUs it holds to others.
	IntentMigrate Intent = "migrate"
	// IntentResize: an elastic job keeps its first ScaleFactor GPUs and changes
	// its number of workers (or, a two-role job, of parameter servers).
	IntentResize Intent = "resize"
	// IntentRetune: the job keeps its GPUs and restarts (from its
	// checkpoint) with other CPU cores or memory (allocator/placement): a
	// preemption for the job.
	IntentRetune Intent = "retune"
	// IntentSuspend: a guaranteed job that holds GPUs stops (it checkpoints).
	IntentSuspend Intent = "suspend"
	// IntentPreempt: an opportunistic job that holds GPUs stops.
	IntentPreempt Intent = "preempt"
)

// JobIntent is one job's part of a plan.
type JobIntent struct {
	Job    string `json:"job"`
	Intent Intent `json:"intent"`
	// Where the job runs this round (empty for suspend and preempt).
	Type    string   `json:"type,omitempty"`
	GPUs    []string `json:"gpus,omitempty"`
	Servers []string `json:"servers,omitempty"`
	// Share is the fraction of each GPU the job gets: 1 alone, 1/2 when it
	// is colocated (space sharing) with the job With.
	Share float64 `json:"share,omitempty"`
	With  string  `json:"with,omitempty"`
	// From are the GPUs it held before a migrate, resize, suspend or preempt.
	From  []string `json:"from,omitempty"`
	VC    string   `json:"vc,omitempty"`
	Class Class    `json:"class,omitempty"`
	// Cell is the cell the job's GPUs lie in, when VCs are made of cells.
	Cell string `json:"cell,omitempty"`
	// Cores and MemGB are the job's CPU cores and memory over all its
	// servers, when a placement stage gave them (0: the job's own request).
	Cores  float64 `json:"cores,omitempty"`
	MemGB  float64 `json:"mem_gb,omitempty"`
	Reason Reason  `json:"reason"`
	// Checkpoint, on a keep: the job is to checkpoint now; it stops next
	// round (Config.CheckpointAware's notice; the lease answer's
	// checkpoint_now).
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// Reason says why the round gave an intent. Its text is made only when it
// is read (String, JSON): a simulated round does not format one per job.
type Reason struct {
	Kind     ReasonKind
	Priority float64
	// From and To are GPU types; GPU a failed GPU; Was and Now an elastic
	// job's GPU counts; With the partner a job now shares its GPUs with
	// ("" when it now runs alone). CoresWas and CoresNow: a retuned job's
	// cores before and after.
	From, To, GPU, With string
	Was, Now            int
	CoresWas, CoresNow  float64
	// PSWas and PSNow: a two-role elastic job's parameter servers before
	// and after a resize (Elastic.PS; both 0 otherwise).
	PSWas, PSNow int
	// Until is an absolute time: a minimum runtime's end (Pinned), a
	// reservation's start (Reserved, Backfills).
	Until float64
	// Waiting reasons: Need a gang's GPUs, Free the largest free (or, for
	// Unschedulable, holdable) set, Than the job ahead and its priority.
	Need, Free   int
	Than         string
	ThanPriority float64
	// VC is the job's VC whose quota it is over (OverQuota), or whose
	// quota bounds its gang (Unschedulable; "" when no quota did).
	VC string
}

// ReasonKind is the kind of a Reason.
type ReasonKind uint8

const (
	FirstStart ReasonKind = iota + 1
	Resumes
	LeaseRenewed
	Resized
	Moves
	MovesOffFailed
	NotSelected
	GPUFailed
	GuaranteedNeedsGPUs
	SharingChanges
	// Retuned: the placement stage changed a kept job's cores or memory
	// (CoresWas/CoresNow, To: the GPU type).
	Retuned
	// NoCPUFit: GREEDY placement skipped the job, its best-case cores and
	// memory did not fit where its GPUs are.
	NoCPUFit
	// Pinned: the job is inside its minimum runtime (Until: when it ends).
	Pinned
	// Noticed: the job keeps its GPUs this round to checkpoint; it stops
	// next round (a planned preemption).
	Noticed
	// Reserved: a waiting gang holds a reservation on GPUs of To from Until.
	Reserved
	// Backfills: the job runs on reserved GPUs, finishing (or stoppable)
	// before the reservation starts at Until.
	Backfills
	// The waiting reasons (Plan.Waiting, waiting.go). OverQuota: the job's
	// VC uses all of its share of every type the job can run on.
	OverQuota
	// WaitsForGang: Need GPUs on one server (or cell) are not free; the
	// largest free set of a type it can use has Free.
	WaitsForGang
	// LowerPriority: jobs of higher round priority hold the GPUs it could
	// use; Than is the lowest-priority of them, ThanPriority its priority.
	LowerPriority
	// Unschedulable: a gang of Need GPUs is larger than its VC can ever
	// hold (Free: the largest gang it can).
	Unschedulable
)

func (r Reason) String() string {
	switch r.Kind {
	case FirstStart:
		return fmt.Sprintf("first start: priority %.4g on %s", r.Priority, r.To)
	case Resumes:
		return fmt.Sprintf("resumes: priority %.4g on %s ranks it in this round", r.Priority, r.To)
	case LeaseRenewed:
		return fmt.Sprintf("lease renewed on %s (priority %.4g)", r.To, r.Priority)
	case Resized:
		if r.PSWas != 0 || r.PSNow != 0 {
			return fmt.Sprintf("elastic: %d -> %d GPUs, %d -> %d parameter servers on %s", r.Was, r.Now, r.PSWas, r.PSNow, r.To)
		}
		return fmt.Sprintf("elastic: %d -> %d GPUs on %s", r.Was, r.Now, r.To)
	case Moves:
		return fmt.Sprintf("moves from %s to %s (priority %.4g)", r.From, r.To, r.Priority)
	case MovesOffFailed:
		return fmt.Sprintf("moves from %s to %s: GPU %s failed", r.From, r.To, r.GPU)
	case NotSelected:
		return "not selected this round: others rank higher on every GPU type it can use"
	case GPUFailed:
		return fmt.Sprintf("GPU %s failed", r.GPU)
	case GuaranteedNeedsGPUs:
		return "guaranteed work needs its GPUs"
	case SharingChanges:
		if r.With == "" {
			return fmt.Sprintf("runs alone on its %s GPUs, no longer shared (priority %.4g)", r.To, r.Priority)
		}
		return fmt.Sprintf("shares its %s GPUs with %s (priority %.4g)", r.To, r.With, r.Priority)
	case Retuned:
		return fmt.Sprintf("keeps its %s GPUs, restarts with %.4g cores (had %.4g): cores and memory re-tuned", r.To, r.CoresNow, r.CoresWas)
	case Pinned:
		return fmt.Sprintf("keeps its %s GPUs: inside its minimum runtime until t=%.0fs (priority %.4g)", r.To, r.Until, r.Priority)
	case Noticed:
		return fmt.Sprintf("checkpoint now: keeps its %s GPUs this round and stops next round (priority %.4g)", r.To, r.Priority)
	case Reserved:
		return fmt.Sprintf("waits: GPUs of %s are reserved for it from t=%.0fs", r.To, r.Until)
	case Backfills:
		return fmt.Sprintf("backfills GPUs of %s reserved from t=%.0fs (priority %.4g)", r.To, r.Until, r.Priority)
	case NoCPUFit:
		return "placement: its best-case cores and memory do not fit where GPUs are free (greedy skips it)"
	case OverQuota:
		if r.Need > 1 {
			return fmt.Sprintf("over quota: a gang of %d GPUs does not fit in what VC %s has left of its share of %s", r.Need, r.VC, r.To)
		}
		return fmt.Sprintf("over quota: VC %s uses all of its share of %s", r.VC, r.To)
	case WaitsForGang:
		return fmt.Sprintf("waits for a gang of %d GPUs on one server: at most %d free together on %s (priority %.4g)", r.Need, r.Free, r.To, r.Priority)
	case LowerPriority:
		if r.Than == "" {
			return fmt.Sprintf("waits: not selected this round, no job runs on a GPU type it can use (priority %.4g)", r.Priority)
		}
		return fmt.Sprintf("lower priority than %s (priority %.4g vs %.4g)", r.Than, r.Priority, r.ThanPriority)
	case Unschedulable:
		switch {
		case r.To == "":
			return fmt.Sprintf("unschedulable: no GPU type it can run on is in the cluster (a gang of %d GPUs)", r.Need)
		case r.VC != "":
			return fmt.Sprintf("unschedulable: a gang of %d GPUs, the most its VC %s can ever hold is %d (%s)", r.Need, r.VC, r.Free, r.To)
		}
		return fmt.Sprintf("unschedulable: a gang of %d GPUs, the most it can ever hold is %d (%s)", r.Need, r.Free, r.To)
	}
	return ""
}

// MarshalText writes the reason's text (JSON: "reason": "...").
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Stops reports whether the intent stops the job where it runs: a
// suspension, a preemption or the first half of a migration.
func (i Intent) Stops() bool { return i == IntentSuspend || i == IntentPreempt || i == IntentMigrate }

// Annotate fills p.Intents from the snapshot the plan was made on: one
// intent per job of each assignment, in assignment order, then one per
// suspended job, in p.Suspend order. preempted names opportunistic jobs
// stopped because guaranteed work took their GPUs (the cell layer's);
// it may be nil.
//
// A job keeps its placement when it stays on the same type and GPUs in
// the same unit (alone, or with the same partner); moving between
// exclusive and shared use is a migrate; an elastic job whose first ScaleFactor GPUs stay is only resized (what the
// simulator has always counted as no preemption), as is a two-role elastic
// job whose parameter servers changed in number (Assignment.PS).
func Annotate(s *Snapshot, p *Plan, preempted []string) {
	jobs := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	annotate(s, p, preempted, jobs, &annotateMaps{})
}

// annotateMaps are annotate's indexes, kept by the engine from round to
// round (cleared, not rebuilt from empty).
type annotateMaps struct {
	prev   map[string]*Assignment
	failed map[string]bool
	spare  []JobIntent // a recycled plan's (Engine.Recycle)
}

// annotate is Annotate with the snapshot's jobs already indexed.
func annotate(s *Snapshot, p *Plan, preempted []string, jobs map[string]*Job, m *annotateMaps) {
	if m.prev == nil {
		m.prev = make(map[string]*Assignment, len(s.Running))
	}
	prev := m.prev
	clear(prev)
	for i := range s.Running {
		for _, id := range s.Running[i].Jobs {
			prev[id] = &s.Running[i]
		}
	}
	clear(m.failed)
	for _, g := range s.GPUs {
		if g.Failed {
			if m.failed == nil {
				m.failed = map[string]bool{}
			}
			m.failed[g.ID] = true
		}
	}
	failed := m.failed
	n := len(p.Assignments) + len(p.Suspend)
	if cap(m.spare) >= n {
		p.Intents, m.spare = m.spare[:0], nil
	} else {
		p.Intents = make([]JobIntent, 0, n)
	}
	for ai := range p.Assignments {
		a := &p.Assignments[ai]
		for k, id := range a.Jobs {
			ji := JobIntent{Job: id, Type: a.Type, GPUs: a.GPUs, Servers: a.Servers, Share: 1 / float64(len(a.Jobs))}
			if len(a.Jobs) == 2 {
				ji.With = a.Jobs[1-k]
			}
			j := jobs[id]
			if j != nil {
				ji.VC, ji.Class = j.VC, j.Class
			}
			old := prev[id]
			switch {
			case old == nil && (j == nil || !j.Started):
				ji.Intent = IntentAdmit
				ji.Reason = Reason{Kind: FirstStart, Priority: a.Priority, To: a.Type}
			case old == nil:
				ji.Intent = IntentResume
				ji.Reason = Reason{Kind: Resumes, Priority: a.Priority, To: a.Type}
			case old.Type == a.Type && slices.Equal(base(j, old), base(j, a)) && !slices.Equal(old.Jobs, a.Jobs):
				// Same GPUs, another unit: between exclusive and shared use
				// (or another partner) the job restarts on other devices.
				ji.Intent, ji.From = IntentMigrate, old.GPUs
				ji.Reason = Reason{Kind: SharingChanges, Priority: a.Priority, To: a.Type, With: ji.With}
			case old.Type == a.Type && slices.Equal(base(j, old), base(j, a)):
				ji.Intent = IntentKeep
				ji.Reason = Reason{Kind: LeaseRenewed, Priority: a.Priority, To: a.Type}
				if len(old.GPUs) != len(a.GPUs) || old.PS != a.PS {
					ji.Intent, ji.From = IntentResize, old.GPUs
					ji.Reason = Reason{Kind: Resized, Was: len(old.GPUs), Now: len(a.GPUs), To: a.Type,
						PSWas: old.PS, PSNow: a.PS}
				}
			default:
				ji.Intent, ji.From = IntentMigrate, old.GPUs
				ji.Reason = Reason{Kind: Moves, Priority: a.Priority, From: old.Type, To: a.Type}
				if gone := failedOf(old.GPUs, failed); gone != "" {
					ji.Reason = Reason{Kind: MovesOffFailed, From: old.Type, To: a.Type, GPU: gone}
				}
			}
			// The engine's preemption rules say why (preempt.go); a resize
			// keeps its own reason (the counts).
			if a.Why != nil && ji.Intent != IntentResize {
				ji.Reason = *a.Why
			}
			ji.Checkpoint = a.Checkpoint
			p.Intents = append(p.Intents, ji)
		}
	}
	for _, id := range p.Suspend {
		ji := JobIntent{Job: id, Intent: IntentSuspend, Reason: Reason{Kind: NotSelected}}
		if j := jobs[id]; j != nil {
			ji.VC, ji.Class = j.VC, j.Class
		}
		if old := prev[id]; old != nil {
			ji.From = old.GPUs
			if gone := failedOf(old.GPUs, failed); gone != "" {
				ji.Reason = Reason{Kind: GPUFailed, GPU: gone}
			}
		}
		if ji.Class == Opportunistic {
			ji.Intent = IntentPreempt
			if slices.Contains(preempted, id) {
				ji.Reason = Reason{Kind: GuaranteedNeedsGPUs}
			}
		}
		p.Intents = append(p.Intents, ji)
	}
}

// base is what identifies a job's placement: an elastic job running alone
// is identified by its first ScaleFactor GPUs (its extra workers come and
// go), any other unit by all of its GPUs.
func base(j *Job, a *Assignment) []string {
	if j != nil && j.Elastic != nil && len(a.Jobs) == 1 {
		if sf := max(j.ScaleFactor, 1); len(a.GPUs) > sf {
			return a.GPUs[:sf]
		}
	}
	return a.GPUs
}

func failedOf(gpus []string, failed map[string]bool) string {
	if len(failed) == 0 {
		return ""
	}
	for _, g := range gpus {
		if failed[g] {
			return g
		}
	}
	return ""
}

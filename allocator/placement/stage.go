package placement

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// Stage is the placement stage of the round, around any decider (one
// engine, quota or cell VCs), in both backends: Next picks jobs and GPUs,
// then the stage gives each job of the plan cores and memory on the nodes
// its GPUs are on (the snapshot's Nodes with Cores and MemGB; jobs on other
// nodes are left alone) and amends the plan's assignments and intents:
//
//   - every job's intent and assignment carry its grant (Cores, MemGB);
//   - a kept job whose grant changes is retuned: it keeps its GPUs and
//     restarts with the new grant (IntentRetune, a preemption for it);
//   - a job GREEDY skips does not run this round (suspended if it ran);
//   - with Options.Choose, a job starting this round alone on one server
//     may get other GPUs of its type, the server with the most room for
//     its demand (choose.go).
//
// Modes are per VC. When VCs with different modes share a node, each
// mode's jobs get the node's cores and memory in proportion to the GPUs
// they hold there, so that one VC's tuning never takes another's share.
type Stage struct {
	Next loop.Decider
	// Mode of a job's VC ("" is the only VC); nil or "" mode: proportional.
	Mode func(vc string) Mode
	// Profiles resolve engine.Job.Profile (nil: synergy.Default()).
	Profiles *synergy.Table
	Options  Options
	// Warn, when set, is told once per job of a profile it cannot resolve
	// (the job is then insensitive) or learn.
	Warn func(job, msg string)
	// Order, when set, is the snapshot's jobs in the queue order of
	// Synergy's reference (Options.FirstFit): it, not the plan, decides
	// which unshared jobs run (firstfit.go). Backfill: the queue is walked
	// to its end, skipping what does not fit (the reference's FIFO, SRTF,
	// FTF); else the jobs whose GPU counts fit are listed first (its LAS).
	Order    func(s *engine.Snapshot) []string
	Backfill bool
	// Learn, when set, learns the profiles of jobs without a named one
	// from their throughput reports, exploring cores (learn.go). Off by
	// default: exploring restarts jobs.
	Learn *Learning

	warned map[string]bool
	raw    map[string]map[string]float64 // reports before Normalize, by job
	learnt map[learnKey]*learner         // Learn's state, by job and GPU type
}

// Round lets Next decide, then places cores and memory.
func (st *Stage) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p, err := st.Next.Round(s)
	if err != nil || p == nil {
		return p, err
	}
	return p, st.Apply(s, p)
}

// MarshalHistory, UnmarshalHistory and RequestReset pass through to Next
// (agent.HistoryKeeper, agent.Resetter); once the stage learned samples
// (Learn), the history is Next's wrapped with them (learn.go).
func (st *Stage) MarshalHistory() ([]byte, error) {
	h, err := loop.MarshalHistory(st.Next)
	if err != nil || len(st.learnt) == 0 {
		return h, err
	}
	return st.wrapHistory(h)
}

func (st *Stage) UnmarshalHistory(h []byte) error {
	h, wrapped, err := st.unwrapHistory(h)
	if err != nil {
		return err
	}
	if wrapped && len(h) == 0 {
		return nil // only the stage's samples were kept
	}
	return loop.UnmarshalHistory(st.Next, h)
}

func (st *Stage) RequestReset() { loop.RequestReset(st.Next) }

// Quotas are Next's VC quotas (loop.QuotasOf).
func (st *Stage) Quotas() engine.Quotas { return loop.QuotasOf(st.Next) }

// Servers are the snapshot's nodes with cores and memory, each with its
// GPU count (failed GPUs included: a failure does not change the share).
func Servers(s *engine.Snapshot) []Server {
	gpus := map[string]int{}
	for _, g := range s.GPUs {
		gpus[g.Server]++
	}
	var out []Server
	for _, n := range s.Nodes {
		if n.Cores > 0 && n.MemGB > 0 && gpus[n.ID] > 0 {
			out = append(out, Server{ID: n.ID, GPUs: gpus[n.ID], Cores: n.Cores, MemGB: n.MemGB})
		}
	}
	return out
}

// Apply gives the plan's jobs cores and memory (see Stage).
func (st *Stage) Apply(s *engine.Snapshot, p *engine.Plan) error {
	servers := Servers(s)
	if len(servers) == 0 {
		return nil
	}
	byID := make(map[string]*engine.Job, len(s.Jobs))
	for i := range s.Jobs {
		byID[s.Jobs[i].ID] = &s.Jobs[i]
	}
	held := map[string]engine.Resources{}
	for _, a := range s.Running {
		for k, id := range a.Jobs {
			if k < len(a.Resources) {
				held[id] = a.Resources[k]
			}
		}
	}
	gpuServer := make(map[string]string, len(s.GPUs))
	for _, g := range s.GPUs {
		gpuServer[g.ID] = g.Server
	}
	if st.Learn != nil {
		st.observe(s, gpuServer)
	}
	srvByID := map[string]*Server{}
	for i := range servers {
		srvByID[servers[i].ID] = &servers[i]
	}
	if st.Options.FirstFit && st.Mode != nil {
		decided := slices.Clone(p.Intents)
		grants, skipped := firstFit(st.Mode(""), s, p, servers, func(j *engine.Job, gpus int) *synergy.Profile {
			if j == nil || j.Profile == "" {
				return nil
			}
			return st.profile(j, gpus, &servers[0])
		}, st.order(s), st.Backfill)
		engine.Annotate(s, p, nil)
		keepDecided(p, decided)
		st.amend(s, p, grants, held, skipped, intentsOf(p))
		return nil
	}
	if st.Options.Choose {
		st.choose(s, p, byID, held, gpuServer, srvByID)
	}
	intentOf := intentsOf(p)

	// The plan's jobs by mode, in policy order (assignment order is the
	// mechanism's priority order).
	type groupT struct {
		jobs []Job
		gpus map[string]int // GPUs the group holds per server
	}
	groups := map[Mode]*groupT{}
	learning := map[string]learnJob{} // jobs placed with what Learn knows
	for _, a := range p.Assignments {
		per := map[string]int{}
		for _, g := range a.GPUs {
			per[gpuServer[g]]++
		}
		for _, id := range a.Jobs {
			j := byID[id]
			mode := Proportional
			if st.Mode != nil && j != nil {
				if m := st.Mode(j.VC); m != "" {
					mode = m
				}
			}
			g := groups[mode]
			if g == nil {
				g = &groupT{gpus: map[string]int{}}
				groups[mode] = g
			}
			pj := Job{ID: id, GPUs: per, Shared: len(a.Jobs) > 1}
			if h, ok := held[id]; ok && a.Action == engine.Keep {
				pj.Held = &Grant{Cores: h.Cores, MemGB: h.MemGB}
				if j != nil && j.Throughput[a.Type] > 0 {
					pj.RemainingS = j.RemainingSteps / j.Throughput[a.Type]
				}
			}
			if j != nil && j.Profile != "" {
				pj.Profile = st.profile(j, len(a.GPUs), srvByID[gpuServer[a.GPUs[0]]])
			} else if sv := srvByID[gpuServer[a.GPUs[0]]]; j != nil && st.Learn != nil && len(per) == 1 && len(a.Jobs) == 1 && sv != nil {
				pj.Profile = st.learned(j, a.Type, len(a.GPUs), sv)
				learning[id] = learnJob{j: j, typ: a.Type}
			}
			g.jobs = append(g.jobs, pj)
			if k := slices.Index(a.Jobs, id); k == 0 {
				for srv, n := range per {
					g.gpus[srv] += n
				}
			}
		}
	}
	modes := make([]Mode, 0, len(groups))
	for m := range groups {
		modes = append(modes, m)
	}
	sort.Slice(modes, func(a, b int) bool { return modes[a] < modes[b] })
	grants := map[string]Grant{}
	skipped := map[string]bool{}
	for _, mode := range modes {
		g := groups[mode]
		srv := servers
		if len(modes) > 1 {
			srv = nil
			for _, sv := range servers {
				if n := g.gpus[sv.ID]; n > 0 {
					f := float64(n) / float64(sv.GPUs)
					srv = append(srv, Server{ID: sv.ID, GPUs: n, Cores: f * sv.Cores, MemGB: f * sv.MemGB})
				}
			}
		}
		r, err := Place(mode, srv, g.jobs, st.Options)
		if err != nil {
			return err
		}
		if len(learning) > 0 && (mode == Tune || mode == Opt) {
			st.explore(srv, g.jobs, r.Grants, learning)
		}
		for id, gr := range r.Grants {
			grants[id] = gr
		}
		for _, id := range r.Skipped {
			skipped[id] = true
		}
	}
	st.amend(s, p, grants, held, skipped, intentOf)
	return nil
}

// profile resolves a job's profile for its size and server, warning once
// when it cannot.
func (st *Stage) profile(j *engine.Job, gpus int, srv *Server) *synergy.Profile {
	t := st.Profiles
	if t == nil {
		t = synergy.Default()
	}
	cpg := synergy.BaseCoresPerGPU
	if srv != nil {
		cpg = srv.shareCores()
	}
	pr, err := t.Lookup(j.Profile, gpus, cpg)
	if err != nil {
		st.warn(j.ID, fmt.Sprintf("profile %q: %v; the job is treated as insensitive", j.Profile, err))
		return nil
	}
	return pr
}

// warn tells Warn msg about job, once per job.
func (st *Stage) warn(job, msg string) {
	if st.warned == nil {
		st.warned = map[string]bool{}
	}
	if !st.warned[job] && st.Warn != nil {
		st.Warn(job, msg)
	}
	st.warned[job] = true
}

// amend writes the grants into the plan: resources on assignments and
// intents, retunes, and GREEDY's skipped jobs out of the plan.
func (st *Stage) amend(s *engine.Snapshot, p *engine.Plan, grants map[string]Grant, held map[string]engine.Resources,
	skipped map[string]bool, intentOf map[string]*engine.JobIntent) {
	running := map[string]bool{}
	for _, a := range s.Running {
		for _, id := range a.Jobs {
			running[id] = true
		}
	}
	keep := p.Assignments[:0]
	dropped := map[string]bool{}
	for _, a := range p.Assignments {
		if slices.ContainsFunc(a.Jobs, func(id string) bool { return skipped[id] }) {
			// A shared unit runs only if both jobs do (GREEDY skips only
			// unshared jobs: shared ones hold a fixed share, but a partner
			// may be skipped).
			for _, id := range a.Jobs {
				dropped[id] = true
			}
			continue
		}
		res := make([]engine.Resources, len(a.Jobs))
		granted := false
		for k, id := range a.Jobs {
			gr, ok := grants[id]
			if !ok {
				continue
			}
			granted = true
			res[k] = engine.Resources{Cores: gr.Cores, MemGB: gr.MemGB}
			ji := intentOf[id]
			if ji == nil {
				continue
			}
			ji.Cores, ji.MemGB = gr.Cores, gr.MemGB
			h, had := held[id]
			if ji.Intent == engine.IntentKeep && had && changed(h, res[k]) {
				ji.Intent = engine.IntentRetune
				ji.Reason = engine.Reason{Kind: engine.Retuned, To: a.Type, CoresWas: h.Cores, CoresNow: gr.Cores}
				a.Action = engine.Start
			}
		}
		if granted {
			a.Resources = res
		}
		keep = append(keep, a)
	}
	p.Assignments = keep
	if len(dropped) == 0 {
		return
	}
	// Intents follow assignments job by job, then the suspended jobs:
	// a dropped job's intent moves to the end.
	intents := p.Intents[:0]
	var stops []engine.JobIntent
	for _, ji := range p.Intents {
		if !dropped[ji.Job] {
			intents = append(intents, ji)
			continue
		}
		if !running[ji.Job] {
			continue // never started: no intent, as for any job not picked
		}
		from := ji.GPUs
		if len(ji.From) > 0 {
			from = ji.From
		}
		in := engine.IntentSuspend
		if ji.Class == engine.Opportunistic {
			in = engine.IntentPreempt
		}
		stops = append(stops, engine.JobIntent{Job: ji.Job, Intent: in, From: from,
			VC: ji.VC, Class: ji.Class, Reason: engine.Reason{Kind: engine.NoCPUFit}})
		p.Suspend = append(p.Suspend, ji.Job)
	}
	p.Intents = append(intents, stops...)
}

// keepDecided carries into intents that Annotate made anew from the
// re-placed assignments what the decider said that the assignments do
// not show (the cell and VC layers' merged plans carry it on intents
// only): where a job's intent and GPUs are unchanged, its notice
// (Checkpoint), its reason (the engine's own: minimum runtime, notice,
// backfill; the VC layers': guaranteed work needs its GPUs) and its cell;
// and the intent of a job that runs nowhere but waits on a reservation
// (Reserved).
func keepDecided(p *engine.Plan, decided []engine.JobIntent) {
	at := make(map[string]int, len(p.Intents))
	for i, ji := range p.Intents {
		at[ji.Job] = i
	}
	for _, d := range decided {
		i, ok := at[d.Job]
		switch {
		case !ok && d.Reason.Kind == engine.Reserved:
			p.Intents = append(p.Intents, d)
		case !ok || p.Intents[i].Intent != d.Intent || !sameSet(p.Intents[i].GPUs, d.GPUs):
		default:
			ji := &p.Intents[i]
			ji.Checkpoint = ji.Checkpoint || d.Checkpoint
			ji.Reason = d.Reason
			if ji.Cell == "" {
				ji.Cell = d.Cell
			}
		}
	}
}

// engineOwn are the reasons only the engine knows (allocator/engine
// preempt.go): a placement step that changes an intent keeps them where
// they still hold.
func engineOwn(k engine.ReasonKind) bool {
	return k == engine.Pinned || k == engine.Noticed || k == engine.Reserved || k == engine.Backfills
}

// changed reports whether a grant differs from what was held (beyond
// rounding).
func changed(a, b engine.Resources) bool {
	return math.Abs(a.Cores-b.Cores) > 1e-6 || math.Abs(a.MemGB-b.MemGB) > 1e-6
}

func intentsOf(p *engine.Plan) map[string]*engine.JobIntent {
	out := make(map[string]*engine.JobIntent, len(p.Intents))
	for i := range p.Intents {
		out[p.Intents[i].Job] = &p.Intents[i]
	}
	return out
}

func (st *Stage) order(s *engine.Snapshot) []string {
	if st.Order == nil {
		return nil
	}
	return st.Order(s)
}

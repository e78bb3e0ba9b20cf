package round

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
)

// QuotaVC is a virtual cluster without cells: a share in GPUs per type,
// counted over the whole cluster, and the policy that shares it among its
// jobs.
type QuotaVC struct {
	Name   string
	Policy string
	GPUs   map[string]int
	// Entities feed the VC's hierarchical policy (nil: none).
	Entities map[string]policies.Entity
	// NoSpaceSharing: the VC's engine is offered no pairs (space_sharing
	// = false), whatever its policy.
	NoSpaceSharing bool
	// Mechanism, when set, decides the VC's jobs instead of an engine of
	// its policy (Gandiva-fair's stride scheduler, allocator/fair).
	Mechanism Mechanism
	// Preemption is its engine's preemption that respects the work
	// (min_runtime, checkpoint_aware, reserve_after).
	Preemption Preemption
}

// Quota decides a round for virtual clusters declared without cells
// (HiveD's quota-only baseline, with each VC's own policy):
//
//	Snapshot ─► partition: each VC holds at most its share of each type,
//	            the same GPUs round after round (last round's, then those
//	            its running jobs hold, then free ones by fewest servers)
//	        ─► per VC: its engine (its policy) on its partition, its jobs
//	        ─► opportunistic engine on every healthy GPU the VCs' plans leave
//	        ─► merged Plan with intents (engine.Annotate)
//
// A VC's idle share runs opportunistic work, which is preempted when the
// VC needs the GPUs back. When failures leave fewer GPUs of a type than
// the shares add up to, every VC keeps the healthy GPUs it holds (a
// failure never moves another VC's guaranteed work); the VCs that lost
// GPUs refill from free ones, in declaration order, and a warning says
// which share is short. Guaranteed jobs of an undeclared VC are not
// scheduled (warned once).
type Quota struct {
	*Engines
	vcs    []QuotaVC
	vcIdx  map[string]int
	part   []map[string]bool // per VC: the GPUs it held last round
	warn   func(msg string, args ...any)
	warned map[string]bool
}

// NewQuota makes one engine per VC (its policy, default
// max_min_fairness_perf, and its entities) and the opportunistic engine
// (oppPolicy; "" leaves opportunistic jobs waiting). reset: every engine
// recomputes at its first round, whatever history it is given (a reload
// changed what the history does not record).
func NewQuota(vcs []QuotaVC, oppPolicy string, roundS float64, reset bool, warn func(msg string, args ...any)) (*Quota, error) {
	return NewQuotaPreempt(vcs, oppPolicy, Preemption{}, roundS, reset, warn)
}

// NewQuotaPreempt is NewQuota with the opportunistic engine's preemption
// that respects the work (each VC's is its QuotaVC.Preemption).
func NewQuotaPreempt(vcs []QuotaVC, oppPolicy string, oppPreempt Preemption, roundS float64, reset bool,
	warn func(msg string, args ...any)) (*Quota, error) {
	if len(vcs) == 0 {
		return nil, fmt.Errorf("round: no virtual clusters")
	}
	var names []string
	var cfgs []engine.Config
	var mechs []Mechanism
	q := &Quota{vcs: vcs, vcIdx: map[string]int{}, warn: warn, warned: map[string]bool{}}
	for i, v := range vcs {
		if _, dup := q.vcIdx[v.Name]; dup || v.Name == "" {
			return nil, fmt.Errorf("round: duplicate or empty VC name %q", v.Name)
		}
		for t, n := range v.GPUs {
			if n < 0 {
				return nil, fmt.Errorf("round: vc %s: %d GPUs of %s", v.Name, n, t)
			}
		}
		q.vcIdx[v.Name] = i
		pol := v.Policy
		if pol == "" {
			pol = "max_min_fairness_perf"
		}
		names = append(names, v.Name)
		cfg := engine.Config{Policy: pol, RoundS: roundS, Entities: v.Entities, ResetFirst: reset}
		v.Preemption.Apply(&cfg)
		cfgs = append(cfgs, cfg)
		mechs = append(mechs, v.Mechanism)
		q.part = append(q.part, map[string]bool{})
	}
	var opp *engine.Config
	if oppPolicy != "" {
		opp = &engine.Config{Policy: oppPolicy, RoundS: roundS, ResetFirst: reset}
		oppPreempt.Apply(opp)
	}
	es, err := newEngines(names, cfgs, mechs, opp)
	if err != nil {
		return nil, err
	}
	q.Engines = es
	if q.warn == nil {
		q.warn = func(string, ...any) {}
	}
	return q, nil
}

// Round decides one round.
func (q *Quota) Round(s *engine.Snapshot) (*engine.Plan, error) {
	var healthy []engine.GPU
	for _, g := range s.GPUs {
		if !g.Failed {
			healthy = append(healthy, g)
		}
	}
	running := map[string]*engine.Assignment{}
	for i := range s.Running {
		for _, j := range s.Running[i].Jobs {
			running[j] = &s.Running[i]
		}
	}
	jobs := make([][]engine.Job, len(q.vcs))
	var opp []engine.Job
	for _, j := range s.Jobs {
		v, ok := q.vcIdx[j.VC]
		switch {
		case j.Class == engine.Opportunistic:
			opp = append(opp, j)
		case ok:
			jobs[v] = append(jobs[v], j)
			if !q.fits(v, j) && !q.warned["fit "+j.ID] {
				q.warned["fit "+j.ID] = true
				q.warn("job can never run: its VC's share holds fewer GPUs of every type it runs on than it needs",
					"job", j.ID, "vc", j.VC, "gpus", max(j.ScaleFactor, 1), "share", q.vcs[v].GPUs)
			}
		case !q.warned[j.ID]:
			q.warned[j.ID] = true
			q.warn("job not scheduled: its VC is not declared in the config", "job", j.ID, "vc", j.VC)
		}
	}
	q.partition(healthy, jobs, running)

	out := &engine.Plan{TimeS: s.TimeS}
	plans := make([]*engine.Plan, 0, len(q.vcs)+1)
	planVC := make([]string, 0, len(q.vcs)+1) // plans[i]'s VC ("" : opportunistic)
	used := map[string]bool{}
	for v := range q.vcs {
		var gpus []engine.GPU
		for _, g := range healthy {
			if q.part[v][g.ID] {
				gpus = append(gpus, g)
			}
		}
		if len(jobs[v]) == 0 || len(gpus) == 0 {
			continue
		}
		p, err := q.sub(q.VCs[v].Engine, s, gpus, jobs[v], running, !q.vcs[v].NoSpaceSharing)
		if err != nil {
			return nil, fmt.Errorf("round: vc %s: %w", q.vcs[v].Name, err)
		}
		plans = append(plans, p)
		planVC = append(planVC, q.vcs[v].Name)
		out.Users = append(out.Users, usersOf(p, q.vcs[v].Name)...)
		for _, a := range p.Assignments {
			for _, g := range a.GPUs {
				used[g] = true
			}
		}
	}
	var preempted []string
	if q.Opp != nil && len(opp) > 0 {
		var gpus []engine.GPU
		for _, g := range healthy {
			if !used[g.ID] {
				gpus = append(gpus, g)
			}
		}
		// Opportunistic jobs whose GPUs guaranteed work took are preempted
		// for it (the reason their intents give).
		for _, j := range opp {
			if r := running[j.ID]; r != nil && slices.ContainsFunc(r.GPUs, func(g string) bool { return used[g] }) {
				preempted = append(preempted, j.ID)
			}
		}
		if len(gpus) > 0 {
			p, err := q.sub(q.Opp, s, gpus, opp, running, true)
			if err != nil {
				return nil, fmt.Errorf("round: opportunistic: %w", err)
			}
			plans = append(plans, p)
			planVC = append(planVC, "")
		}
	}
	in := map[string]bool{}
	for _, p := range plans {
		out.Recomputed = out.Recomputed || p.Recomputed
		out.SolveMS += p.SolveMS
		out.Assignments = append(out.Assignments, p.Assignments...)
		for _, a := range p.Assignments {
			for _, j := range a.Jobs {
				in[j] = true
			}
		}
	}
	for _, r := range s.Running {
		for _, j := range r.Jobs {
			if !in[j] && !slices.Contains(out.Suspend, j) {
				out.Suspend = append(out.Suspend, j)
			}
		}
	}
	out.Allocation = MergeAllocations(plans)
	engine.Annotate(s, out, preempted)
	keepEngineIntents(out, plans, planVC, nil)
	return out, nil
}

// fits reports whether a job of VC v can run in its share: some type it
// has a throughput on holds its scale factor.
func (q *Quota) fits(v int, j engine.Job) bool {
	for t, n := range q.vcs[v].GPUs {
		if j.Throughput[t] > 0 && n >= max(j.ScaleFactor, 1) {
			return true
		}
	}
	return false
}

// sub runs one engine on its GPUs and jobs. A job counts as running for
// the engine only when every GPU it holds is one of the engine's (else the
// engine places it afresh and the merged plan moves it).
func (q *Quota) sub(e Mechanism, s *engine.Snapshot, gpus []engine.GPU, jobs []engine.Job,
	running map[string]*engine.Assignment, sharing bool) (*engine.Plan, error) {
	mine := make(map[string]bool, len(gpus))
	for _, g := range gpus {
		mine[g.ID] = true
	}
	ids := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		ids[j.ID] = true
	}
	sub := &engine.Snapshot{TimeS: s.TimeS, GPUs: gpus, Jobs: jobs, Nodes: s.Nodes}
	seen := map[*engine.Assignment]bool{}
	for _, j := range jobs {
		r := running[j.ID]
		if r == nil || seen[r] || !allOf(r.GPUs, mine) || !allOf(r.Jobs, ids) {
			continue
		}
		seen[r] = true
		sub.Running = append(sub.Running, *r)
	}
	if sharing {
		sub.Pairs = pairsAmong(s.Pairs, jobs)
	}
	return e.Round(sub)
}

func allOf(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}

// partition gives each VC at most its share of each type: the healthy
// GPUs it held last round, then those its running jobs hold, then free
// ones, on the servers where it already holds the most, then on the
// servers with the most free GPUs of that type, then in snapshot order.
func (q *Quota) partition(healthy []engine.GPU, jobs [][]engine.Job, running map[string]*engine.Assignment) {
	owner := map[string]int{} // GPU -> VC
	count := make([]map[string]int, len(q.vcs))
	take := func(v int, g engine.GPU) bool {
		if _, taken := owner[g.ID]; taken || count[v][g.Type] >= q.vcs[v].GPUs[g.Type] {
			return false
		}
		owner[g.ID] = v
		count[v][g.Type]++
		return true
	}
	for v := range q.vcs {
		count[v] = map[string]int{}
		for _, g := range healthy {
			if q.part[v][g.ID] {
				take(v, g)
			}
		}
	}
	byID := make(map[string]engine.GPU, len(healthy))
	for _, g := range healthy {
		byID[g.ID] = g
	}
	for v := range q.vcs {
		for _, j := range jobs[v] {
			if r := running[j.ID]; r != nil {
				for _, id := range r.GPUs {
					if g, ok := byID[id]; ok {
						take(v, g)
					}
				}
			}
		}
	}
	for v := range q.vcs {
		types := make([]string, 0, len(q.vcs[v].GPUs))
		for t := range q.vcs[v].GPUs {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			need := q.vcs[v].GPUs[t] - count[v][t]
			if need <= 0 {
				continue
			}
			mineOn, freeOn := map[string]int{}, map[string]int{}
			var free []engine.GPU
			for _, g := range healthy {
				if g.Type != t {
					continue
				}
				if o, ok := owner[g.ID]; !ok {
					free = append(free, g)
					freeOn[g.Server]++
				} else if o == v {
					mineOn[g.Server]++
				}
			}
			sort.SliceStable(free, func(a, b int) bool {
				sa, sb := free[a].Server, free[b].Server
				if mineOn[sa] != mineOn[sb] {
					return mineOn[sa] > mineOn[sb]
				}
				if freeOn[sa] != freeOn[sb] {
					return freeOn[sa] > freeOn[sb]
				}
				return false
			})
			for _, g := range free {
				if need == 0 {
					break
				}
				if take(v, g) {
					need--
				}
			}
			if need > 0 && !q.warned["short "+q.vcs[v].Name+" "+t] {
				q.warned["short "+q.vcs[v].Name+" "+t] = true
				q.warn("a VC's share is larger than the healthy GPUs left to it", "vc", q.vcs[v].Name, "type", t,
					"share", q.vcs[v].GPUs[t], "held", count[v][t])
			}
		}
	}
	for v := range q.vcs {
		q.part[v] = map[string]bool{}
	}
	for id, v := range owner {
		q.part[v][id] = true
	}
}

// Quotas are the VCs' shares per GPU type (engine.Quotas, for
// engine.ExplainQuotas: over quota, the largest gang a VC can hold).
func (q *Quota) Quotas() engine.Quotas {
	out := make(engine.Quotas, len(q.vcs))
	for _, v := range q.vcs {
		m := make(map[string]int, len(v.GPUs))
		for t, n := range v.GPUs {
			m[t] = n
		}
		out[v.Name] = m
	}
	return out
}

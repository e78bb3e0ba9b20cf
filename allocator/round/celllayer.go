package round

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// VC is one virtual cluster's second layer: its engine (its policy).
type VC struct {
	Name string
	// Engine is the VC's mechanism: an *engine.Engine, or another
	// Mechanism (Gandiva-fair's).
	Engine Mechanism
}

// Job is an active job: the engine's view plus its VC and class.
type CellJob struct {
	engine.Job
	VC            string
	Opportunistic bool
}

// Snapshot is what the round sees: the time and the active (arrived,
// unfinished) jobs in arrival order. Jobs that left are released.
type CellSnapshot struct {
	TimeS float64
	Jobs  []CellJob
	// Pairs the engines may colocate (space sharing): a VC's engine is
	// offered the pairs of two of its guaranteed jobs (none for a VC in
	// CellLayer.noSharing), the opportunistic engine those of two
	// opportunistic jobs. A pair is one gang on one VC's cells: a
	// guaranteed job never shares a GPU of another VC's cells.
	Pairs []engine.Pair
}

// CellResult is one round's decision.
type CellResult struct {
	// Plan is the merged cluster plan: physical GPU addresses, node
	// addresses as servers; Keep when a job keeps its physical GPUs.
	Plan engine.Plan
	// VCPlans are the VCs' own plans on their virtual GPUs, in declaration
	// order; nil for a VC without active guaranteed jobs (its engine is not
	// called). OppPlan is the opportunistic engine's plan (nil if none).
	VCPlans []*engine.Plan
	OppPlan *engine.Plan
	// Preempted lists opportunistic jobs evicted by guaranteed placements.
	Preempted []string
	// Regrouped counts started jobs whose engine split over nodes did not fit
	// the cells left and were placed GPU by GPU instead.
	Regrouped int
	// Dropped lists jobs an engine selected that the cell layer could not
	// place (only when bad GPUs make a virtual GPU's target uncertain).
	Dropped []string
}

// CellLayer runs the two layers of virtual clusters each round: the cell
// layer (allocator/cells) decides which GPUs each VC may use (its virtual
// cells, bound lazily to physical ones with sharing safety) and each VC's
// own engine (allocator/engine, the VC's policy) decides which of its jobs
// run on them. Opportunistic jobs share whatever the VCs leave free under
// one more engine.
//
//	CellSnapshot ─► per VC (declaration order):
//	                  virtual GPUs of its cells ─► engine.Round ─► VC plan
//	                  ─► cells.Allocate(guaranteed) per started job
//	              ─► opportunistic engine on the GPUs guaranteed work left
//	                  ─► cells.Allocate(opportunistic)
//	              ─► merged cluster Plan (physical GPUs, nodes)
//
// A VC's engine sees only its own virtual GPUs and jobs, and the cell
// layer places its gangs on its virtual cells using only its own state, so
// each VC's sequence of plans is the one its private cluster (its quota as
// dedicated cells) would produce: sharing safety makes binding always
// succeed, and opportunistic work never blocks it (it is preempted).
// It holds the cell allocator and the engines between rounds and is not
// safe for concurrent use.
type CellLayer struct {
	a     *cells.Allocator
	vcs   []VC
	opp   *engine.Engine
	node  map[string]string // physical GPU -> node
	vcIdx map[string]int
	// pairs: the jobs of each pair gang (gang id engine.UnitKey of the
	// two); a single job's gang id is its own id.
	pairs map[string][]string
	// noSharing: VCs whose engines are offered no pairs (space_sharing =
	// false; CellsConfig.NoSpaceSharing).
	noSharing map[string]bool
}

// jobsOf is a gang's jobs.
func (s *CellLayer) jobsOf(id string) []string {
	if js, ok := s.pairs[id]; ok {
		return js
	}
	return []string{id}
}

// release releases a gang and forgets its pair.
func (s *CellLayer) release(id string) error {
	delete(s.pairs, id)
	return s.a.Release(id)
}

// New pairs the allocator's VCs with engines: vcs must name every VC of
// the allocator once, in its declaration order. opp may be nil: then
// opportunistic jobs never run.
func NewCellLayer(a *cells.Allocator, vcs []VC, opp *engine.Engine) (*CellLayer, error) {
	names := a.VCs()
	if len(vcs) != len(names) {
		return nil, fmt.Errorf("round: %d engines for %d VCs", len(vcs), len(names))
	}
	s := &CellLayer{a: a, vcs: vcs, opp: opp, node: map[string]string{}, vcIdx: map[string]int{}, pairs: map[string][]string{}}
	for i, v := range vcs {
		if v.Name != names[i] || v.Engine == nil {
			return nil, fmt.Errorf("round: engine %d is for %q (engine set: %v), want %q", i, v.Name, v.Engine != nil, names[i])
		}
		s.vcIdx[v.Name] = i
	}
	for _, g := range a.PhysicalGPUs() {
		s.node[g.Addr] = g.Node
	}
	return s, nil
}

// Round decides one round.
func (s *CellLayer) Round(snap CellSnapshot) (*CellResult, error) {
	active := map[string]*CellJob{}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if _, dup := active[j.ID]; dup || j.ID == "" {
			return nil, fmt.Errorf("round: duplicate or empty job id %q", j.ID)
		}
		if _, ok := s.vcIdx[j.VC]; !ok && !j.Opportunistic {
			return nil, fmt.Errorf("round: job %s: unknown vc %q", j.ID, j.VC)
		}
		active[j.ID] = j
	}
	// Jobs that left release their gangs; remember the others' GPUs.
	prev := map[string][]string{}     // gang -> its GPUs
	prevJobs := map[string][]string{} // gang -> its jobs
	var prevOrder []string
	gangOf := map[string]string{} // job -> its gang
	for _, id := range s.a.Gangs() {
		if slices.ContainsFunc(s.jobsOf(id), func(j string) bool { return active[j] == nil }) {
			if err := s.release(id); err != nil {
				return nil, err
			}
			continue
		}
		g, _ := s.a.Gang(id)
		prev[id], prevJobs[id] = slices.Concat(g.Members...), s.jobsOf(id)
		prevOrder = append(prevOrder, id)
		for _, j := range s.jobsOf(id) {
			gangOf[j] = id
		}
	}
	// running: the units in force among jobs, as an engine sees them.
	running := func(jobs []engine.Job, of func(g cells.Gang) []string, gpus []cells.GPU) []engine.Assignment {
		var out []engine.Assignment
		seen := map[string]bool{}
		for _, j := range jobs {
			id, ok := gangOf[j.ID]
			if !ok || seen[id] {
				continue
			}
			seen[id] = true
			g, ok := s.a.Gang(id)
			if !ok {
				continue // preempted by guaranteed work this round
			}
			out = append(out, assignmentOf(s.jobsOf(id), of(g), gpus))
		}
		return out
	}
	res := &CellResult{VCPlans: make([]*engine.Plan, len(s.vcs)), Plan: engine.Plan{TimeS: snap.TimeS}}
	prio := map[string]float64{}
	for v, vc := range s.vcs {
		var jobs []engine.Job
		for _, j := range snap.Jobs {
			if !j.Opportunistic && j.VC == vc.Name {
				jobs = append(jobs, j.Job)
			}
		}
		if len(jobs) == 0 {
			continue
		}
		virt := s.a.VirtualGPUs(vc.Name)
		running := running(jobs, func(g cells.Gang) []string { return slices.Concat(g.Virtual...) }, virt)
		var gpus []engine.GPU
		for _, g := range virt {
			gpus = append(gpus, engine.GPU{ID: g.Addr, Type: g.Type, Server: g.Node, Failed: g.Bad})
		}
		var pairs []engine.Pair
		if !s.noSharing[vc.Name] {
			pairs = pairsAmong(snap.Pairs, jobs)
		}
		plan, err := vc.Engine.Round(&engine.Snapshot{TimeS: snap.TimeS, GPUs: gpus, Jobs: jobs, Running: running, Pairs: pairs})
		if err != nil {
			return nil, fmt.Errorf("round: vc %s: %w", vc.Name, err)
		}
		res.VCPlans[v] = plan
		res.Plan.Users = append(res.Plan.Users, usersOf(plan, vc.Name)...)
		res.Plan.Recomputed = res.Plan.Recomputed || plan.Recomputed
		if err := s.apply(plan, running, vc.Name, cells.Guaranteed, nodesOf(virt), res, prio); err != nil {
			return nil, err
		}
	}
	if s.opp != nil {
		if err := s.roundOpportunistic(snap, res, prio, running); err != nil {
			return nil, err
		}
	}
	// Merge: every placed job, in placement order.
	phys := s.a.PhysicalGPUs()
	now := map[string]bool{} // jobs placed
	for _, id := range s.a.Gangs() {
		g, _ := s.a.Gang(id)
		ids := slices.Concat(g.Members...)
		act := engine.Start
		if slices.Equal(prev[id], ids) {
			act = engine.Keep
		}
		jobs := s.jobsOf(id)
		a := engine.Assignment{Jobs: jobs, GPUs: ids, Action: act, Priority: prio[jobs[0]]}
		if len(ids) > 0 {
			a.Type = typeOfGPU(phys, ids[0])
		}
		for _, gid := range ids {
			if n := s.node[gid]; !slices.Contains(a.Servers, n) {
				a.Servers = append(a.Servers, n)
			}
		}
		res.Plan.Assignments = append(res.Plan.Assignments, a)
		for _, j := range jobs {
			now[j] = true
		}
	}
	for _, id := range prevOrder {
		for _, j := range prevJobs[id] {
			if !now[j] && !slices.Contains(res.Plan.Suspend, j) {
				res.Plan.Suspend = append(res.Plan.Suspend, j)
			}
		}
	}
	return res, nil
}

// roundOpportunistic runs the opportunistic engine on the healthy GPUs that
// guaranteed gangs do not hold.
func (s *CellLayer) roundOpportunistic(snap CellSnapshot, res *CellResult, prio map[string]float64,
	running func([]engine.Job, func(cells.Gang) []string, []cells.GPU) []engine.Assignment) error {
	var jobs []engine.Job
	for _, j := range snap.Jobs {
		if j.Opportunistic {
			jobs = append(jobs, j.Job)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	guaranteed := map[string]bool{}
	for _, id := range s.a.Gangs() {
		if g, _ := s.a.Gang(id); g.Class != cells.Opportunistic {
			for _, m := range g.Members {
				for _, gid := range m {
					guaranteed[gid] = true
				}
			}
		}
	}
	phys := s.a.PhysicalGPUs()
	var gpus []engine.GPU
	for _, g := range phys {
		if !guaranteed[g.Addr] && !g.Bad {
			gpus = append(gpus, engine.GPU{ID: g.Addr, Type: g.Type, Server: g.Node})
		}
	}
	// A gang preempted by guaranteed work this round is gone: its jobs
	// are not running for the opportunistic engine.
	inForce := running(jobs, func(g cells.Gang) []string { return slices.Concat(g.Members...) }, phys)
	plan, err := s.opp.Round(&engine.Snapshot{TimeS: snap.TimeS, GPUs: gpus, Jobs: jobs, Running: inForce,
		Pairs: pairsAmong(snap.Pairs, jobs)})
	if err != nil {
		return fmt.Errorf("round: opportunistic: %w", err)
	}
	res.OppPlan = plan
	res.Plan.Recomputed = res.Plan.Recomputed || plan.Recomputed
	return s.apply(plan, inForce, "", cells.Opportunistic, s.node, res, prio)
}

// apply carries an engine plan out on the cell layer: running jobs not kept
// on the same GPUs release their gangs, then started jobs are allocated
// with the engine's split over nodes (regrouped GPU by GPU if the cells
// left do not hold that split).
func (s *CellLayer) apply(plan *engine.Plan, running []engine.Assignment, vc string, class cells.Class, nodeOf map[string]string, res *CellResult, prio map[string]float64) error {
	kept := map[string]bool{}
	for _, a := range plan.Assignments {
		for _, j := range a.Jobs {
			prio[j] = a.Priority
		}
		if a.Action == engine.Keep {
			kept[engine.UnitKey(a.Jobs)] = true
		}
	}
	for _, r := range running {
		if id := engine.UnitKey(r.Jobs); !kept[id] {
			if _, ok := s.a.Gang(id); !ok {
				continue // preempted by guaranteed work this round
			}
			if err := s.release(id); err != nil {
				return err
			}
		}
	}
	for _, a := range plan.Assignments {
		if a.Action == engine.Keep {
			continue
		}
		id := engine.UnitKey(a.Jobs) // a pair is one gang: its GPUs in one VC's cells
		// The engine chose the GPU type (its received time and priorities
		// are per type): the cells place the gang on that type. Without it
		// the first cells that fit took the job whatever type the engine
		// chose, so a job the engine moved to a type it had received no
		// time on stayed where it was, kept top priority there every round,
		// and jobs beyond the VC's GPUs starved.
		req := cells.Request{ID: id, VC: vc, Class: class, Members: splitByNode(a.GPUs, nodeOf), GPUType: a.Type}
		pl, err := s.a.Allocate(req)
		if errors.Is(err, cells.ErrWait) {
			req.Members = slices.Repeat([]int{1}, len(a.GPUs))
			if pl, err = s.a.Allocate(req); err == nil {
				res.Regrouped++
			}
		}
		if errors.Is(err, cells.ErrWait) {
			res.Dropped = append(res.Dropped, a.Jobs...)
			continue
		}
		if err != nil {
			return fmt.Errorf("round: job %s: %w", id, err)
		}
		if len(a.Jobs) == 2 {
			s.pairs[id] = a.Jobs
		}
		for _, g := range pl.Preempted {
			res.Preempted = append(res.Preempted, s.jobsOf(g)...)
			delete(s.pairs, g)
		}
	}
	return nil
}

// split counts ids per node, in order of first appearance.
func splitByNode(ids []string, nodeOf map[string]string) []int {
	var nodes []string
	var n []int
	for _, id := range ids {
		k := slices.Index(nodes, nodeOf[id])
		if k < 0 {
			nodes = append(nodes, nodeOf[id])
			n = append(n, 0)
			k = len(n) - 1
		}
		n[k]++
	}
	return n
}

// pairsAmong are the pairs of two of jobs.
func pairsAmong(pairs []engine.Pair, jobs []engine.Job) []engine.Pair {
	if len(pairs) == 0 {
		return nil
	}
	in := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		in[j.ID] = true
	}
	var out []engine.Pair
	for _, p := range pairs {
		if in[p.Jobs[0]] && in[p.Jobs[1]] {
			out = append(out, p)
		}
	}
	return out
}

// assignmentOf describes a running gang (one job, or a pair) to an
// engine, on the GPUs of gpus.
func assignmentOf(jobs []string, ids []string, gpus []cells.GPU) engine.Assignment {
	a := engine.Assignment{Jobs: jobs, GPUs: ids, Action: engine.Keep}
	for _, gid := range ids {
		for _, g := range gpus {
			if g.Addr == gid {
				a.Type = g.Type
				if !slices.Contains(a.Servers, g.Node) {
					a.Servers = append(a.Servers, g.Node)
				}
				break
			}
		}
	}
	return a
}

func typeOfGPU(gpus []cells.GPU, id string) string {
	for _, g := range gpus {
		if g.Addr == id {
			return g.Type
		}
	}
	return ""
}

func nodesOf(gpus []cells.GPU) map[string]string {
	m := make(map[string]string, len(gpus))
	for _, g := range gpus {
		m[g.Addr] = g.Node
	}
	return m
}

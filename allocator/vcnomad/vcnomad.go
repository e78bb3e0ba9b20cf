// Package vcnomad runs the virtual-cluster scheduler (allocator/vcround:
// per-VC engines over the cell layer) on the GPUs a backend observes. It is
// the agent's Decider when the cluster config declares cells and VCs: each
// job's VC (meta rondo.vc) and priority class (guaranteed or opportunistic)
// decide which engine schedules it and on which cells.
//
// Cells map to Nomad nodes by name (`cell { nomad_node = "..." }`), or by
// node pool and/or class (Config.Selectors, selectors.go): the
// physical GPUs of a node-level cell, in cell-address order, are that
// node's GPUs in device-id order. A GPU the node does not report (or
// reports unhealthy) makes its cell leaf bad.
package vcnomad

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/vcround"
	"github.com/rondo-sched/rondo/policies"
)

// Config configures a Decider.
type Config struct {
	Spec cells.Spec
	// NodeOfCell maps node-level cell addresses (a node-level top cell's
	// name, or "top/i/..." below one) to Nomad node names.
	NodeOfCell map[string]string
	// Policies per VC, in the spec's VC order; OppPolicy schedules
	// opportunistic jobs on what the VCs leave ("" : they never run).
	Policies  []string
	OppPolicy string
	RoundS    float64
	// Warn, if set, is told about jobs skipped and cells without GPUs.
	Warn func(msg string, args ...any)
	// Selectors, when set, replace NodeOfCell: each top cell's node cells
	// are resolved every round against the snapshot's nodes (selectors.go).
	Selectors []Selector
}

// Decider adapts vcround to engine snapshots and plans.
type Decider struct {
	cfg Config
	// engines by VC name, in spec order, and the opportunistic one (nil
	// when none): their history is what MarshalHistory saves.
	engines []vcround.VC
	opp     *engine.Engine
	a       *cells.Allocator
	s       *vcround.Scheduler
	vcs     map[string]bool
	warned  map[string]bool
	// node cells per top cell, in address order; node-cell bindings kept
	// across rounds (selectors.go)
	nodeCells map[string][]string
	bound     map[string]string
}

// New builds the cell allocator and one engine per VC.
func New(cfg Config) (*Decider, error) {
	a, err := cells.New(cfg.Spec)
	if err != nil {
		return nil, fmt.Errorf("vcnomad: cells: %w", err)
	}
	names := a.VCs()
	if len(cfg.Policies) != len(names) {
		return nil, fmt.Errorf("vcnomad: %d policies for %d VCs", len(cfg.Policies), len(names))
	}
	var vcs []vcround.VC
	set := map[string]bool{}
	for i, n := range names {
		e, err := engine.New(engine.Config{Policy: cfg.Policies[i], RoundS: cfg.RoundS})
		if err != nil {
			return nil, fmt.Errorf("vcnomad: vc %s: %w", n, err)
		}
		vcs = append(vcs, vcround.VC{Name: n, Engine: e})
		set[n] = true
	}
	var opp *engine.Engine
	if cfg.OppPolicy != "" {
		if opp, err = engine.New(engine.Config{Policy: cfg.OppPolicy, RoundS: cfg.RoundS}); err != nil {
			return nil, fmt.Errorf("vcnomad: opportunistic: %w", err)
		}
	}
	s, err := vcround.New(a, vcs, opp)
	if err != nil {
		return nil, err
	}
	if cfg.Warn == nil {
		cfg.Warn = func(string, ...any) {}
	}
	d := &Decider{cfg: cfg, a: a, s: s, vcs: set, warned: map[string]bool{}, bound: map[string]string{},
		nodeCells: map[string][]string{}, engines: vcs, opp: opp}
	for _, pg := range a.PhysicalGPUs() {
		top, _, _ := strings.Cut(pg.Node, "/")
		if l := d.nodeCells[top]; len(l) == 0 || l[len(l)-1] != pg.Node {
			d.nodeCells[top] = append(l, pg.Node)
		}
	}
	return d, nil
}

// mapping pairs cell GPU addresses with the snapshot's GPU ids.
type mapping struct {
	toID   map[string]string // cell address -> GPU id
	toAddr map[string]string // GPU id -> cell address
	nodeID map[string]string // node cell address -> Nomad node id
}

func (d *Decider) mapGPUs(s *engine.Snapshot) mapping {
	m := mapping{toID: map[string]string{}, toAddr: map[string]string{}, nodeID: map[string]string{}}
	names := make(map[string]string, len(s.Nodes)) // node id -> name
	for _, n := range s.Nodes {
		names[n.ID] = n.Name
	}
	byNode := map[string][]engine.GPU{} // node name -> GPUs
	for _, g := range s.GPUs {
		n, ok := names[g.Server]
		if !ok {
			n = g.Server
		}
		byNode[n] = append(byNode[n], g)
	}
	for _, gs := range byNode {
		sort.Slice(gs, func(i, j int) bool { return gs[i].ID < gs[j].ID })
	}
	next := map[string]int{}
	nodeOf := d.cfg.NodeOfCell
	if d.cfg.Selectors != nil {
		nodeOf = d.resolve(s.Nodes)
	}
	for _, pg := range d.a.PhysicalGPUs() {
		name := nodeOf[pg.Node]
		gs := byNode[name]
		i := next[name]
		next[name]++
		bad := true
		if i < len(gs) {
			g := gs[i]
			m.toID[pg.Addr], m.toAddr[g.ID] = g.ID, pg.Addr
			m.nodeID[pg.Node] = g.Server
			bad = g.Failed
		} else if name != "" && !d.warned["cell "+pg.Node] {
			d.warned["cell "+pg.Node] = true
			d.cfg.Warn("cell has more GPUs than its Nomad node reports; the rest are treated as bad", "cell", pg.Node, "nomad_node", name)
		}
		if bad != pg.Bad {
			_ = d.a.SetHealth(pg.Addr, bad)
		}
	}
	return m
}

// Round decides one round: the VCs' engines and the cell layer, then the
// plan in the snapshot's GPU ids and node ids. A job keeps its GPUs (Keep)
// when the cells put it exactly where it runs now, so a restarted agent
// whose cell state is empty does not move running jobs that still fit; every
// running job the plan leaves out is suspended.
func (d *Decider) Round(s *engine.Snapshot) (*engine.Plan, error) {
	m := d.mapGPUs(s)
	vs := vcround.Snapshot{TimeS: s.TimeS}
	for _, j := range s.Jobs {
		opp := j.Class == engine.Opportunistic
		if !opp && !d.vcs[j.VC] {
			if !d.warned[j.ID] {
				d.warned[j.ID] = true
				d.cfg.Warn("job not scheduled: its VC is not declared in the config", "job", j.ID, "vc", j.VC)
			}
			continue
		}
		vs.Jobs = append(vs.Jobs, vcround.Job{Job: j, VC: j.VC, Opportunistic: opp})
	}
	res, err := d.s.Round(vs)
	if err != nil {
		return nil, err
	}
	running := map[string][]string{} // job -> its GPUs, sorted
	held := map[string][]string{}    // job -> its GPUs as observed
	for _, r := range s.Running {
		ids := slices.Clone(r.GPUs)
		slices.Sort(ids)
		for _, j := range r.Jobs {
			running[j], held[j] = ids, r.GPUs
		}
	}
	p := &engine.Plan{TimeS: s.TimeS, Recomputed: res.Plan.Recomputed, SolveMS: res.Plan.SolveMS,
		Allocation: mergeAllocations(append(slices.Clone(res.VCPlans), res.OppPlan))}
	in := map[string]bool{}
	for _, a := range res.Plan.Assignments {
		out := engine.Assignment{Jobs: a.Jobs, Type: a.Type, Priority: a.Priority}
		ok := true
		for _, addr := range a.GPUs {
			id, found := m.toID[addr]
			if !found {
				ok = false
				break
			}
			out.GPUs = append(out.GPUs, id)
		}
		for _, n := range a.Servers {
			if id, found := m.nodeID[n]; found && !slices.Contains(out.Servers, id) {
				out.Servers = append(out.Servers, id)
			}
		}
		if !ok || len(out.GPUs) == 0 {
			continue // placed on a cell without a Nomad GPU: cannot run
		}
		sorted := slices.Clone(out.GPUs)
		slices.Sort(sorted)
		out.Action = engine.Start
		if len(a.Jobs) == 1 && slices.Equal(running[a.Jobs[0]], sorted) {
			// Same GPUs: kept, in the order it holds them.
			out.Action, out.GPUs = engine.Keep, held[a.Jobs[0]]
		}
		for _, j := range a.Jobs {
			in[j] = true
		}
		p.Assignments = append(p.Assignments, out)
	}
	for _, r := range s.Running {
		for _, j := range r.Jobs {
			if !in[j] && !slices.Contains(p.Suspend, j) {
				p.Suspend = append(p.Suspend, j)
			}
		}
	}
	engine.Annotate(s, p, res.Preempted)
	return p, nil
}

// mergeAllocations joins the allocations in force of the VC engines and the
// opportunistic engine into one, for the status's per-job X: each job's row
// is its own engine's (a job is scheduled by one engine), over the union of
// the GPU types. Fractions are of the engine's own GPUs (a VC's virtual
// GPUs of that type, or the GPUs the VCs leave to opportunistic work).
// Objective and solve statistics are not merged. Nil when no engine has an
// allocation.
func mergeAllocations(plans []*engine.Plan) *policies.Allocation {
	var out *policies.Allocation
	col := map[string]int{}
	for _, p := range plans {
		if p == nil || p.Allocation == nil {
			continue
		}
		al := p.Allocation
		if out == nil {
			out = &policies.Allocation{Policy: "per-vc"}
		}
		for _, t := range al.Types {
			if _, ok := col[t]; !ok {
				col[t] = len(out.Types)
				out.Types = append(out.Types, t)
				for m := range out.X {
					out.X[m] = append(out.X[m], 0)
				}
				for q := range out.PairX {
					out.PairX[q] = append(out.PairX[q], 0)
				}
			}
		}
		widen := func(row []float64) []float64 {
			r := make([]float64, len(out.Types))
			for k, t := range al.Types {
				if k < len(row) {
					r[col[t]] = row[k]
				}
			}
			return r
		}
		for m, id := range al.JobIDs {
			if m < len(al.X) {
				out.JobIDs = append(out.JobIDs, id)
				out.X = append(out.X, widen(al.X[m]))
			}
		}
		for q, pr := range al.PairJobs {
			if q < len(al.PairX) {
				out.PairJobs = append(out.PairJobs, pr)
				out.PairX = append(out.PairX, widen(al.PairX[q]))
			}
		}
	}
	return out
}

// RequestReset makes every VC engine and the opportunistic one recompute
// at the next round (agent.Resetter).
func (d *Decider) RequestReset() {
	for _, vc := range d.engines {
		vc.Engine.RequestReset()
	}
	if d.opp != nil {
		d.opp.RequestReset()
	}
}

// history is the per-VC engines' history as an agent saves it.
type history struct {
	Kind          string                     `json:"kind"`
	VCs           map[string]*engine.History `json:"vcs,omitempty"`
	Opportunistic *engine.History            `json:"opportunistic,omitempty"`
}

const historyKind = "vcnomad"

// MarshalHistory saves every VC engine's history (engine.History), so that
// a restarted agent's engines decide as the stopped ones would have. The
// cell layer's bindings are not in it: they are rebuilt from the running
// placement.
func (d *Decider) MarshalHistory() ([]byte, error) {
	h := history{Kind: historyKind, VCs: map[string]*engine.History{}}
	for _, vc := range d.engines {
		h.VCs[vc.Name] = vc.Engine.History()
	}
	if d.opp != nil {
		h.Opportunistic = d.opp.History()
	}
	return json.Marshal(h)
}

// UnmarshalHistory restores MarshalHistory's output: each VC's engine takes
// its own history (a VC not in it starts fresh). It fails on another
// decider's history or a VC whose policy changed.
func (d *Decider) UnmarshalHistory(b []byte) error {
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("vcnomad: history: %w", err)
	}
	if h.Kind != historyKind {
		return fmt.Errorf("vcnomad: not a per-VC history (kind %q)", h.Kind)
	}
	// Check every policy first: all engines take their history, or none.
	for _, vc := range d.engines {
		if eh := h.VCs[vc.Name]; eh != nil && eh.Policy != vc.Engine.History().Policy {
			return fmt.Errorf("vcnomad: vc %s: history of policy %q, engine runs %q", vc.Name, eh.Policy, vc.Engine.History().Policy)
		}
	}
	if d.opp != nil && h.Opportunistic != nil && h.Opportunistic.Policy != d.opp.History().Policy {
		return fmt.Errorf("vcnomad: opportunistic: history of policy %q", h.Opportunistic.Policy)
	}
	for _, vc := range d.engines {
		if eh := h.VCs[vc.Name]; eh != nil {
			if err := vc.Engine.SetHistory(eh); err != nil {
				return fmt.Errorf("vcnomad: vc %s: %w", vc.Name, err)
			}
		}
	}
	if d.opp != nil && h.Opportunistic != nil {
		if err := d.opp.SetHistory(h.Opportunistic); err != nil {
			return fmt.Errorf("vcnomad: opportunistic: %w", err)
		}
	}
	return nil
}

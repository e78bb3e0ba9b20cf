package round

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
)

// CellsConfig configures a Cells.
type CellsConfig struct {
	Spec cells.Spec
	// NodeOfCell maps node-level cell addresses (a node-level top cell's
	// name, or "top/i/..." below one) to Nomad node names.
	NodeOfCell map[string]string
	// Policies per VC, in the spec's VC order; OppPolicy schedules
	// opportunistic jobs on what the VCs leave ("" : they never run).
	Policies  []string
	OppPolicy string
	// Mechanisms, per VC in the spec's VC order when set: a non-nil entry
	// decides that VC's jobs instead of an engine of its policy
	// (Gandiva-fair's stride scheduler, allocator/fair).
	Mechanisms []Mechanism
	RoundS     float64
	// Entities per VC, in the spec's VC order (nil, or a nil entry: that
	// VC's policy is given no entities); see engine.Config.Entities.
	Entities []map[string]policies.Entity
	// ResetFirst: every engine recomputes at its first round, whatever a
	// restored history says (a reload changed the entities).
	ResetFirst bool
	// Warn, if set, is told about jobs skipped and cells without GPUs.
	Warn func(msg string, args ...any)
	// Selectors, when set, replace NodeOfCell: each top cell's node cells
	// are resolved every round against the snapshot's nodes (selectors.go).
	Selectors []Selector
	// NoSpaceSharing names the VCs whose engines are offered no pairs
	// (space_sharing = false).
	NoSpaceSharing map[string]bool
	// Preemption per VC, in the spec's VC order (nil, or a zero entry:
	// Gavel's mechanism), and OppPreemption the opportunistic engine's:
	// preemption that respects the work (min_runtime, checkpoint_aware,
	// reserve_after).
	Preemption    []Preemption
	OppPreemption Preemption
	// LeafGPUs, per top cell, lists the GPU ids of its leaves in address
	// order (cells derived from topology, TopoCells): those cells map leaf
	// i to that GPU instead of the node's i-th GPU by id.
	LeafGPUs map[string][]string
}

// Cells decides a round for virtual clusters declared with cells: the
// per-VC engines over the cell layer (CellLayer, celllayer.go) run on the
// GPUs a backend observes. Each job's VC (meta rondo.vc) and class
// (guaranteed or opportunistic) decide which engine schedules it and on
// which cells.
//
// Cells map to nodes by name (`cell { nomad_node = "..." }`), or by node
// pool and/or class (CellsConfig.Selectors, selectors.go): the physical
// GPUs of a node-level cell, in cell-address order, are that node's GPUs
// in device-id order. A GPU the node does not report (or reports
// unhealthy) makes its cell leaf bad.
//
// Its engines (one per VC, in spec order, and the opportunistic one) keep
// the history the agent saves (Engines).
type Cells struct {
	*Engines
	cfg    CellsConfig
	a      *cells.Allocator
	s      *CellLayer
	vcs    map[string]bool
	warned map[string]bool
	// node cells per top cell, in address order; node-cell bindings kept
	// across rounds (selectors.go)
	nodeCells map[string][]string
	bound     map[string]string
}

// NewCells builds the cell allocator and one engine per VC.
func NewCells(cfg CellsConfig) (*Cells, error) {
	a, err := cells.New(cfg.Spec)
	if err != nil {
		return nil, fmt.Errorf("round: cells: %w", err)
	}
	names := a.VCs()
	if len(cfg.Policies) != len(names) {
		return nil, fmt.Errorf("round: %d policies for %d VCs", len(cfg.Policies), len(names))
	}
	if cfg.Entities != nil && len(cfg.Entities) != len(names) {
		return nil, fmt.Errorf("round: entities for %d VCs, %d VCs", len(cfg.Entities), len(names))
	}
	ecfgs := make([]engine.Config, len(names))
	for i := range names {
		ecfgs[i] = engine.Config{Policy: cfg.Policies[i], RoundS: cfg.RoundS, ResetFirst: cfg.ResetFirst}
		if cfg.Entities != nil {
			ecfgs[i].Entities = cfg.Entities[i]
		}
		if i < len(cfg.Preemption) {
			cfg.Preemption[i].Apply(&ecfgs[i])
		}
	}
	var opp *engine.Config
	if cfg.OppPolicy != "" {
		opp = &engine.Config{Policy: cfg.OppPolicy, RoundS: cfg.RoundS, ResetFirst: cfg.ResetFirst}
		cfg.OppPreemption.Apply(opp)
	}
	if cfg.Mechanisms != nil && len(cfg.Mechanisms) != len(names) {
		return nil, fmt.Errorf("round: mechanisms for %d VCs, %d VCs", len(cfg.Mechanisms), len(names))
	}
	es, err := newEngines(names, ecfgs, cfg.Mechanisms, opp)
	if err != nil {
		return nil, fmt.Errorf("round: %w", err)
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	s, err := NewCellLayer(a, es.VCs, es.Opp)
	if err != nil {
		return nil, err
	}
	s.noSharing = cfg.NoSpaceSharing
	if cfg.Warn == nil {
		cfg.Warn = func(string, ...any) {}
	}
	d := &Cells{cfg: cfg, a: a, s: s, vcs: set, warned: map[string]bool{}, bound: map[string]string{},
		nodeCells: map[string][]string{}, Engines: es}
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

func (d *Cells) mapGPUs(s *engine.Snapshot) mapping {
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
	byID := make(map[string]engine.GPU, len(s.GPUs))
	for _, g := range s.GPUs {
		byID[g.ID] = g
	}
	leafIdx := map[string]int{} // top cell -> leaves seen (LeafGPUs)
	nodeOf := d.cfg.NodeOfCell
	if d.cfg.Selectors != nil {
		nodeOf = d.resolve(s.Nodes)
	}
	for _, pg := range d.a.PhysicalGPUs() {
		name := nodeOf[pg.Node]
		gs := byNode[name]
		i := next[name]
		next[name]++
		top, _, _ := strings.Cut(pg.Node, "/")
		if ids, ok := d.cfg.LeafGPUs[top]; ok {
			gs, i = nil, leafIdx[top]
			leafIdx[top]++
			if i < len(ids) {
				if g, ok := byID[ids[i]]; ok && names[g.Server] == name {
					gs, i = []engine.GPU{g}, 0
				}
			}
		}
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
func (d *Cells) Round(s *engine.Snapshot) (*engine.Plan, error) {
	m := d.mapGPUs(s)
	vs := CellSnapshot{TimeS: s.TimeS}
	for _, j := range s.Jobs {
		opp := j.Class == engine.Opportunistic
		if !opp && !d.vcs[j.VC] {
			if !d.warned[j.ID] {
				d.warned[j.ID] = true
				d.cfg.Warn("job not scheduled: its VC is not declared in the config", "job", j.ID, "vc", j.VC)
			}
			continue
		}
		vs.Jobs = append(vs.Jobs, CellJob{Job: j, VC: j.VC, Opportunistic: opp})
	}
	vs.Pairs = s.Pairs // each engine is offered its own jobs' (CellLayer.Round)
	res, err := d.s.Round(vs)
	if err != nil {
		return nil, err
	}
	running := map[string][]string{} // job -> its GPUs, sorted
	held := map[string][]string{}    // job -> its GPUs as observed
	unit := map[string]string{}      // job -> its unit in force (alone, or its pair)
	for _, r := range s.Running {
		ids := slices.Clone(r.GPUs)
		slices.Sort(ids)
		for _, j := range r.Jobs {
			running[j], held[j], unit[j] = ids, r.GPUs, engine.UnitKey(r.Jobs)
		}
	}
	p := &engine.Plan{TimeS: s.TimeS, Recomputed: res.Plan.Recomputed, SolveMS: res.Plan.SolveMS, Users: res.Plan.Users,
		Allocation: MergeAllocations(append(slices.Clone(res.VCPlans), res.OppPlan))}
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
		if unit[a.Jobs[0]] == engine.UnitKey(a.Jobs) && slices.Equal(running[a.Jobs[0]], sorted) {
			// Same unit on the same GPUs: kept, in the order it holds them.
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
	// The engines' notices, own reasons and reservations (a VC's
	// reservation names its virtual cells' addresses, which no GPU id
	// stands for until a gang is placed on them; the opportunistic
	// engine's, physical cells, are mapped to GPU ids).
	vcNames := make([]string, 0, len(res.VCPlans)+1)
	for _, v := range d.Engines.VCs {
		vcNames = append(vcNames, v.Name)
	}
	keepEngineIntents(p, append(slices.Clone(res.VCPlans), res.OppPlan), vcNames, func(k int, addr string) (string, bool) {
		if k < len(res.VCPlans) {
			return "", false
		}
		id, ok := m.toID[addr]
		return id, ok
	})
	return p, nil
}

// Quotas are the VCs' virtual GPUs per GPU type (engine.Quotas, for
// engine.ExplainQuotas: over quota, the largest gang a VC can hold; a
// gang must also fit one of its cells, which this does not tell).
func (d *Cells) Quotas() engine.Quotas {
	out := engine.Quotas{}
	for _, vc := range d.a.VCs() {
		m := map[string]int{}
		for _, g := range d.a.VirtualGPUs(vc) {
			m[g.Type]++
		}
		out[vc] = m
	}
	return out
}

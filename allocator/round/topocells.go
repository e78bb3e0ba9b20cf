package round

import (
	"fmt"
	"maps"
	"slices"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/topocells"
)

// TopoSelector picks the nodes whose cells are derived (cells_from_topology).
type TopoSelector struct{ Pool, Class string }

// TopoCells is Cells over written cells plus cells derived every round from
// the topology of the snapshot's nodes (allocator/topocells): the ready
// nodes some selector matches and no written cell covers (named by
// nomad_node(s), or matched by a written cell's pool/class selector:
// written cells win). When the derived tree changes (a node joins, leaves or
// changes shape) the cell state is rebuilt as a config reload does: a new
// Cells whose engines take the old engines' history and recompute at their
// first round; running jobs are re-read from the snapshot. A VC quota entry
// that no observed cell provides (or that the cells observed cannot hold)
// is left out with a warning until it can be met.
type TopoCells struct {
	cfg    CellsConfig // the written cells and everything else
	from   []TopoSelector
	inner  *Cells
	key    string
	hist   []byte
	reset  bool
	warned map[string]bool
	// known remembers each derived node's GPUs: a node that is down or
	// ineligible for a while keeps its cell (its GPUs missing from the
	// snapshot read as bad leaves, as for written cells) instead of
	// rebuilding the tree twice; a node Nomad no longer lists is dropped.
	known map[string]topocells.Node
}

// NewTopoCells builds the decider; its cells are built at the first round.
func NewTopoCells(cfg CellsConfig, from []TopoSelector) *TopoCells {
	if cfg.Warn == nil {
		cfg.Warn = func(string, ...any) {}
	}
	return &TopoCells{cfg: cfg, from: from, reset: cfg.ResetFirst, warned: map[string]bool{}, known: map[string]topocells.Node{}}
}

// Derivable is the derivation input of a snapshot: nodes the selectors
// match, ready, not covered by a written selector, with their GPUs.
func Derivable(s *engine.Snapshot, from []TopoSelector, written []Selector) []topocells.Node {
	var out []topocells.Node
	for _, n := range s.Nodes {
		if !n.Ready || covered(n, written) || !slices.ContainsFunc(from, func(f TopoSelector) bool {
			return n.Pool == f.Pool && (f.Class == "" || n.Class == f.Class)
		}) {
			continue
		}
		tn := topocells.Node{Name: n.Name}
		for _, g := range s.GPUs {
			if g.Server == n.ID {
				tn.GPUs = append(tn.GPUs, topocells.GPU{UUID: g.ID, Type: g.Type, Cell: g.Cell, Index: g.Index})
			}
		}
		if len(tn.GPUs) > 0 {
			out = append(out, tn)
		}
	}
	return out
}

func covered(n engine.Node, written []Selector) bool {
	for _, w := range written {
		if slices.Contains(w.Nodes, n.Name) ||
			len(w.Nodes) == 0 && (w.Pool != "" || w.Class != "") && (w.Pool == "" || w.Pool == n.Pool) && (w.Class == "" || w.Class == n.Class) {
			return true
		}
	}
	return false
}

// Round derives the cells, rebuilds the cell state when they changed, and
// decides the round on them.
func (t *TopoCells) Round(s *engine.Snapshot) (*engine.Plan, error) {
	r := topocells.Derive(t.remember(s, Derivable(s, t.from, t.cfg.Selectors)))
	spec, notes := topocells.Apply(t.cfg.Spec, r)
	key := fmt.Sprint(spec.Types, spec.Cells, r.Cells)
	if t.inner == nil || key != t.key {
		for _, n := range append(r.Notes, notes...) {
			if !t.warned[n] {
				t.warned[n] = true
				t.cfg.Warn("cells from topology: " + n)
			}
		}
		spec.VCs = t.satisfiable(spec)
		cc := t.cfg
		cc.Spec = spec
		cc.Selectors = slices.Clone(t.cfg.Selectors)
		cc.LeafGPUs = map[string][]string{}
		for _, c := range r.Cells {
			if slices.ContainsFunc(spec.Cells, func(tc cells.TopCell) bool { return tc.Name == c.Name }) {
				cc.Selectors = append(cc.Selectors, Selector{Cell: c.Name, Nodes: []string{c.Node}})
				cc.LeafGPUs[c.Name] = c.GPUs
			}
		}
		if t.inner != nil {
			if h, err := t.inner.MarshalHistory(); err == nil {
				t.hist = h
			}
			t.reset = true
		}
		cc.ResetFirst = t.reset
		inner, err := NewCells(cc)
		if err != nil {
			return nil, err
		}
		if len(t.hist) > 0 {
			if err := inner.UnmarshalHistory(t.hist); err != nil {
				t.cfg.Warn("cells from topology: engine history not carried over", "error", err)
			}
		}
		if t.inner != nil {
			t.cfg.Warn("cells from topology: derived cells changed; cell state rebuilt", "cells", len(spec.Cells))
		}
		t.inner, t.key = inner, key
	}
	return t.inner.Round(s)
}

// remember adds to the ready nodes the derived nodes that Nomad still lists
// but that are not ready now, with the GPUs they had, and forgets nodes
// Nomad no longer lists or a written cell now covers.
func (t *TopoCells) remember(s *engine.Snapshot, ready []topocells.Node) []topocells.Node {
	listed := map[string]engine.Node{}
	for _, n := range s.Nodes {
		listed[n.Name] = n
	}
	seen := map[string]bool{}
	for _, n := range ready {
		t.known[n.Name], seen[n.Name] = n, true
	}
	out := ready
	for _, name := range slices.Sorted(maps.Keys(t.known)) {
		n, ok := listed[name]
		switch {
		case seen[name]:
		case !ok || covered(n, t.cfg.Selectors):
			delete(t.known, name)
		default:
			out = append(out, t.known[name])
		}
	}
	return out
}

// satisfiable is spec's VCs without the quota entries the cells cannot
// meet now (a type no cell provides yet, or more than the cells hold),
// each warned about once.
func (t *TopoCells) satisfiable(spec cells.Spec) []cells.VC {
	vcs := make([]cells.VC, len(spec.VCs))
	for i, v := range spec.VCs {
		vcs[i] = cells.VC{Name: v.Name, Quota: slices.Clone(v.Quota)}
	}
	for range 64 {
		qc, err := cells.CheckQuotas(cells.Spec{Types: spec.Types, Cells: spec.Cells, VCs: vcs})
		if err != nil || len(qc.Problems) == 0 {
			break
		}
		p := qc.Problems[0] // VC order: later VCs yield to earlier ones
		q := vcs[p.VC].Quota[p.Quota]
		msg := fmt.Sprintf("vc %s: quota %s = %d cannot be met by the cells observed (%s); unsatisfiable until nodes provide it",
			vcs[p.VC].Name, q.Type, q.Count, kindText(p.Kind))
		if !t.warned[msg] {
			t.warned[msg] = true
			t.cfg.Warn("cells from topology: " + msg)
		}
		vcs[p.VC].Quota = slices.Delete(vcs[p.VC].Quota, p.Quota, p.Quota+1)
	}
	return vcs
}

func kindText(k cells.ProblemKind) string {
	switch k {
	case cells.UnknownType:
		return "no such cell type yet"
	case cells.NoCell:
		return "no cell of that type"
	case cells.Ambiguous:
		return "type in several chains"
	}
	return "oversubscribed"
}

// MarshalHistory is the engines' history (agent.HistoryKeeper).
func (t *TopoCells) MarshalHistory() ([]byte, error) {
	if t.inner == nil {
		return t.hist, nil
	}
	return t.inner.MarshalHistory()
}

// UnmarshalHistory keeps h for the engines (agent.HistoryKeeper).
func (t *TopoCells) UnmarshalHistory(h []byte) error {
	t.hist = h
	if t.inner != nil {
		return t.inner.UnmarshalHistory(h)
	}
	return nil
}

// RequestReset recomputes at the next round (agent.Resetter).
func (t *TopoCells) RequestReset() {
	t.reset = true
	if t.inner != nil {
		t.inner.RequestReset()
	}
}

// Quotas are the derived cells' VC quotas (Cells.Quotas); nil before the
// first round.
func (t *TopoCells) Quotas() engine.Quotas {
	if t.inner == nil {
		return nil
	}
	return t.inner.Quotas()
}

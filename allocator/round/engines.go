package round

import (
	"encoding/json"
	"fmt"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
)

// Mechanism decides one VC's jobs on the GPUs the VC decider gives it,
// each round: Gavel's *engine.Engine (priorities over its policy's X) or
// Gandiva-fair's stride scheduler (allocator/fair, built by the caller).
// A mechanism other than the engine keeps its history through
// MarshalHistory / UnmarshalHistory when it has them.
type Mechanism interface {
	Round(*engine.Snapshot) (*engine.Plan, error)
	RequestReset()
}

// historyKeeper is a mechanism's own history (not engine.History).
type historyKeeper interface {
	MarshalHistory() ([]byte, error)
	UnmarshalHistory([]byte) error
}

// Engines are a VC round's engines: one mechanism per VC (its policy), in
// declaration order, and the opportunistic engine (nil: opportunistic jobs
// never run). Both VC deciders (cells, quota-only) keep their history,
// reset and allocations through it.
type Engines struct {
	VCs []VC
	Opp *engine.Engine
}

// NewEngines makes one engine per VC with its policy, and the
// opportunistic engine when oppPolicy is set.
func NewEngines(names, pols []string, oppPolicy string, roundS float64) (*Engines, error) {
	if len(pols) != len(names) {
		return nil, fmt.Errorf("round: %d policies for %d VCs", len(pols), len(names))
	}
	cfgs := make([]engine.Config, len(pols))
	for i, p := range pols {
		cfgs[i] = engine.Config{Policy: p, RoundS: roundS}
	}
	var opp *engine.Config
	if oppPolicy != "" {
		opp = &engine.Config{Policy: oppPolicy, RoundS: roundS}
	}
	return NewEnginesFrom(names, cfgs, opp)
}

// NewEnginesFrom makes one engine per VC from its configuration (policy,
// entities...), and the opportunistic engine when opp is set.
func NewEnginesFrom(names []string, cfgs []engine.Config, opp *engine.Config) (*Engines, error) {
	return newEngines(names, cfgs, nil, opp)
}

// newEngines is NewEnginesFrom where mechs[i], when set, is VC i's
// mechanism instead of an engine from cfgs[i].
func newEngines(names []string, cfgs []engine.Config, mechs []Mechanism, opp *engine.Config) (*Engines, error) {
	if len(cfgs) != len(names) {
		return nil, fmt.Errorf("round: %d policies for %d VCs", len(cfgs), len(names))
	}
	d := &Engines{}
	for i, n := range names {
		if i < len(mechs) && mechs[i] != nil {
			d.VCs = append(d.VCs, VC{Name: n, Engine: mechs[i]})
			continue
		}
		e, err := engine.New(cfgs[i])
		if err != nil {
			return nil, fmt.Errorf("round: vc %s: %w", n, err)
		}
		d.VCs = append(d.VCs, VC{Name: n, Engine: e})
	}
	if opp != nil {
		e, err := engine.New(*opp)
		if err != nil {
			return nil, fmt.Errorf("round: opportunistic: %w", err)
		}
		d.Opp = e
	}
	return d, nil
}

// RequestReset makes every VC engine and the opportunistic one recompute
// at the next round (agent.Resetter).
func (d *Engines) RequestReset() {
	for _, vc := range d.VCs {
		vc.Engine.RequestReset()
	}
	if d.Opp != nil {
		d.Opp.RequestReset()
	}
}

// MergeAllocations joins the allocations in force of the VC engines and the
// opportunistic engine into one, for the status's per-job X: each job's row
// is its own engine's (a job is scheduled by one engine), over the union of
// the GPU types. Fractions are of the engine's own GPUs (a VC's virtual
// GPUs of that type, or the GPUs the VCs leave to opportunistic work).
// Objective and solve statistics are not merged. Nil when no engine has an
// allocation.
func MergeAllocations(plans []*engine.Plan) *policies.Allocation {
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

// history is the per-VC engines' history as an agent saves it.
type history struct {
	Kind          string                     `json:"kind"`
	VCs           map[string]*engine.History `json:"vcs,omitempty"`
	Opportunistic *engine.History            `json:"opportunistic,omitempty"`
	// Other is the history of the VCs whose mechanism is not the engine
	// (Gandiva-fair's), in that mechanism's own format.
	Other map[string]json.RawMessage `json:"other,omitempty"`
}

// historyKind names the per-VC engines' history in the agent's state (the
// name predates the quota-only decider and the package merge; every per-VC
// decider writes it, and agents' saved states keep reading).
const historyKind = "vcnomad"

// MarshalHistory saves every VC engine's history (engine.History), so that
// a restarted agent's engines decide as the stopped ones would have. The
// cell layer's bindings are not in it: they are rebuilt from the running
// placement.
func (d *Engines) MarshalHistory() ([]byte, error) {
	h := history{Kind: historyKind, VCs: map[string]*engine.History{}}
	for _, vc := range d.VCs {
		switch m := vc.Engine.(type) {
		case *engine.Engine:
			h.VCs[vc.Name] = m.History()
		case historyKeeper:
			b, err := m.MarshalHistory()
			if err != nil {
				return nil, fmt.Errorf("round: vc %s: %w", vc.Name, err)
			}
			if h.Other == nil {
				h.Other = map[string]json.RawMessage{}
			}
			h.Other[vc.Name] = b
		}
	}
	if d.Opp != nil {
		h.Opportunistic = d.Opp.History()
	}
	return json.Marshal(h)
}

// UnmarshalHistory restores MarshalHistory's output: each VC's engine takes
// its own history (a VC not in it starts fresh). It fails on another
// decider's history or a VC whose policy changed.
func (d *Engines) UnmarshalHistory(b []byte) error {
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("round: history: %w", err)
	}
	if h.Kind != historyKind {
		return fmt.Errorf("round: not a per-VC history (kind %q)", h.Kind)
	}
	// Check every policy first: all engines take their history, or none.
	// An engine's history never goes to another mechanism, nor back.
	for _, vc := range d.VCs {
		e, isEngine := vc.Engine.(*engine.Engine)
		if eh := h.VCs[vc.Name]; eh != nil {
			if !isEngine {
				return fmt.Errorf("round: vc %s: history of policy %q, the VC now runs another mechanism", vc.Name, eh.Policy)
			}
			if eh.Policy != e.History().Policy {
				return fmt.Errorf("round: vc %s: history of policy %q, engine runs %q", vc.Name, eh.Policy, e.History().Policy)
			}
		}
		if _, ok := h.Other[vc.Name]; ok {
			if _, keeps := vc.Engine.(historyKeeper); isEngine || !keeps {
				return fmt.Errorf("round: vc %s: history of another mechanism than the VC runs", vc.Name)
			}
		}
	}
	if d.Opp != nil && h.Opportunistic != nil && h.Opportunistic.Policy != d.Opp.History().Policy {
		return fmt.Errorf("round: opportunistic: history of policy %q", h.Opportunistic.Policy)
	}
	for _, vc := range d.VCs {
		if eh := h.VCs[vc.Name]; eh != nil {
			if err := vc.Engine.(*engine.Engine).SetHistory(eh); err != nil {
				return fmt.Errorf("round: vc %s: %w", vc.Name, err)
			}
		}
		if b, ok := h.Other[vc.Name]; ok {
			if err := vc.Engine.(historyKeeper).UnmarshalHistory(b); err != nil {
				return fmt.Errorf("round: vc %s: %w", vc.Name, err)
			}
		}
	}
	if d.Opp != nil && h.Opportunistic != nil {
		if err := d.Opp.SetHistory(h.Opportunistic); err != nil {
			return fmt.Errorf("round: opportunistic: %w", err)
		}
	}
	return nil
}

// usersOf is a VC plan's user shares, named with the VC.
func usersOf(p *engine.Plan, vc string) []engine.UserShares {
	out := make([]engine.UserShares, len(p.Users))
	for i, u := range p.Users {
		u.VC = vc
		out[i] = u
	}
	return out
}

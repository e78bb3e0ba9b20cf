package dl2

import (
	"math"
	"math/rand"

	"github.com/rondo-sched/rondo/policies/dl2/nn"
)

// Policy is the learned sizer: each inference of the policy network picks
// one action (+worker, +PS, +both for a job of the window, or stop) from
// the feasible ones, until stop or nothing fits. Jobs beyond the window
// are decided in further windows of J in arrival order (DL2 §6.4).
//
// A model that is missing or fails Validate, a NaN output or an action
// the slot refuses makes the slot fall back to DRF (the slot is restored
// to its minimums first), logged once per cause: never a crash or an
// over-committed plan.
type Policy struct {
	model *Model
	bad   string // why the model is not used ("": it is)
	// Rand samples actions from the softmax (training); nil: the most
	// probable feasible action (deployment, evaluation).
	Rand *rand.Rand
	// Explore, when set, is DL2's job-aware exploration (training only).
	Explore *Exploration
	// Record, when set, sees each decision: the slot before it, the input
	// x, the mask and the action taken (training). x and mask are reused:
	// copy them.
	Record   func(s *Slot, x []float64, mask []bool, a int)
	Fallback Sizer
	Logf     func(format string, args ...any)
	// Fallbacks counts slots decided by the fallback.
	Fallbacks int
	logged    map[string]bool

	x, probs []float64
	mask     []bool
	inc      inc
}

// Exploration is DL2's job-aware exploration: in a poor state (a job whose
// workers and PSs are far apart) the policy's action is replaced, with
// probability Epsilon, by the one that evens the job out. DL2 calls a
// state poor at a ratio of 10 with its wider bounds; Rondo's default
// bounds are 1..8, so the ratio here is Ratio (default 3).
type Exploration struct {
	Epsilon float64
	Ratio   float64
	Rand    *rand.Rand
}

// NewPolicy makes the sizer of model m (nil or invalid: DRF, logged).
func NewPolicy(m *Model, logf func(string, ...any)) *Policy {
	p := &Policy{model: m, Fallback: DRF{}, Logf: logf, logged: map[string]bool{}}
	if err := m.Validate(); err != nil {
		p.bad = "model not used, deciding with DRF: " + err.Error()
		return p
	}
	l := m.Layout()
	p.x = make([]float64, l.Inputs())
	p.probs = make([]float64, l.Actions())
	p.mask = make([]bool, l.Actions())
	p.inc = m.Policy.newInc(l)
	return p
}

// Name is "dl2".
func (p *Policy) Name() string { return "dl2" }

// Model is the policy's model (nil when it falls back).
func (p *Policy) Model() *Model {
	if p.bad != "" {
		return nil
	}
	return p.model
}

func (p *Policy) log(msg string) {
	if p.Logf != nil && !p.logged[msg] {
		p.logged[msg] = true
		p.Logf("dl2: %s", msg)
	}
}

// Decide sizes the slot.
func (p *Policy) Decide(s *Slot) {
	if p.bad != "" {
		p.log(p.bad)
		p.fallback(s, nil)
		return
	}
	saved := saveSlot(s)
	m, l := p.model, p.model.Layout()
	typeOf := func(j *Job) int { return m.TypeIndex(j.Model) }
	for off := 0; off < len(s.Jobs); off += l.Window {
		l.Encode(s, off, typeOf, p.x)
		p.inc.begin(p.x)
		for {
			if l.Mask(s, off, p.mask) == 0 {
				break
			}
			logits := p.inc.logits()
			nn.MaskedSoftmax(logits, p.mask, p.probs)
			a, ok := p.choose(logits)
			if !ok {
				p.log("the policy network gave NaN; this slot decided with DRF")
				p.fallback(s, saved)
				return
			}
			a = p.explore(s, off, l, a)
			if p.Record != nil {
				p.Record(s, p.x, p.mask, a)
			}
			if a == l.StopAction() {
				break
			}
			i, k := a/3, Kind(a%3)
			if err := s.Apply(off+i, k); err != nil {
				p.log("the policy chose an infeasible action; this slot decided with DRF")
				p.fallback(s, saved)
				return
			}
			p.update(s, l, off, i)
		}
	}
}

// update refreshes job i's allocation features in x (three coordinates
// change per action) and the network's incremental inference.
func (p *Policy) update(s *Slot, l Layout, off, i int) {
	F := l.Features()
	l.encodeAlloc(s, off+i, p.x[i*F:(i+1)*F])
	p.inc.update(i, p.x)
}

// choose picks the action: sampled from the softmax or the most probable.
func (p *Policy) choose(logits []float64) (int, bool) {
	best := -1
	for a, ok := range p.mask {
		if !ok {
			continue
		}
		if math.IsNaN(logits[a]) || math.IsInf(logits[a], 0) {
			return 0, false
		}
		if best < 0 || logits[a] > logits[best] {
			best = a
		}
	}
	if p.Rand == nil {
		return best, true
	}
	u, acc := p.Rand.Float64(), 0.0
	for a, q := range p.probs {
		acc += q
		if q > 0 && u < acc {
			return a, true
		}
	}
	return best, true
}

// explore replaces a with the evening action in a poor state.
func (p *Policy) explore(s *Slot, off int, l Layout, a int) int {
	e := p.Explore
	if e == nil || e.Epsilon <= 0 {
		return a
	}
	for i := 0; i < l.Window && off+i < len(s.Jobs); i++ {
		w, ps := float64(s.Alloc[off+i].Workers), float64(s.Alloc[off+i].PS)
		if !s.Running(off + i) {
			continue
		}
		var k Kind
		switch {
		case w >= e.Ratio*ps:
			k = AddPS
		case ps >= e.Ratio*w:
			k = AddWorker
		default:
			continue
		}
		if s.Feasible(off+i, k) && e.Rand.Float64() < e.Epsilon {
			return l.Action(i, k)
		}
		return a
	}
	return a
}

func (p *Policy) fallback(s *Slot, saved *slotState) {
	if saved != nil {
		saved.restore(s)
	}
	p.Fallbacks++
	rec := s.OnAction
	s.OnAction = nil
	p.Fallback.Decide(s)
	s.OnAction = rec
}

// slotState is a slot's allocation at some point, to undo a decision.
type slotState struct {
	alloc   []Alloc
	free    []Server
	actions int
}

func saveSlot(s *Slot) *slotState {
	st := &slotState{alloc: make([]Alloc, len(s.Alloc)), free: append([]Server(nil), s.Free...), actions: s.Actions}
	for j, a := range s.Alloc {
		st.alloc[j] = Alloc{Workers: a.Workers, PS: a.PS,
			WorkerOn: append([]int(nil), a.WorkerOn...), PSOn: append([]int(nil), a.PSOn...)}
	}
	return st
}

func (st *slotState) restore(s *Slot) {
	for j, a := range st.alloc {
		s.Alloc[j] = Alloc{Workers: a.Workers, PS: a.PS,
			WorkerOn: append([]int(nil), a.WorkerOn...), PSOn: append([]int(nil), a.PSOn...)}
	}
	copy(s.Free, st.free)
	s.Actions = st.actions
}

package cells

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Allocator places gang requests on a physical cluster of cells on behalf
// of virtual clusters. It is not safe for concurrent use.
type Allocator struct {
	types  typeTable
	phys   forest
	chains []chainInfo
	vcs    []vcInfo
	virt   []forest // per VC
	vcIdx  map[string]int
	s      *state
	// check runs checkInvariants after every change (tests turn it on).
	check bool
}

type chainInfo struct {
	name  string // top cell type
	level int    // top level
	gpus  []int  // GPUs of a cell per level (index = level)
}

type vcInfo struct {
	name   string
	pinned []bool // per virtual top: bound for good to a pinned cell
}

// Request asks for a gang: each member needs Members[i] GPUs inside one node.
type Request struct {
	ID       string
	VC       string // ignored for opportunistic requests except for reporting
	Priority Priority
	Members  []int
}

// Placement is where a request went: leaf addresses per member, and the
// opportunistic gangs preempted to make room (whole gangs, by id).
type Placement struct {
	Members   [][]string
	Preempted []string
}

// ErrWait means the request cannot be placed now; it may fit later.
var ErrWait = errors.New("no room now")

// New builds an allocator. Top cells of one chain must share a type; a
// quota's type must lie in its chain, and the quotas must satisfy sharing
// safety on the empty cluster.
func New(spec Spec) (*Allocator, error) {
	t, err := newTypeTable(spec.Types)
	if err != nil {
		return nil, err
	}
	a := &Allocator{types: t, vcIdx: map[string]int{}}
	chainOf := map[string]int{}
	topIdx := map[string]int{}
	for _, tc := range spec.Cells {
		if _, ok := t.byName[tc.Type]; !ok {
			return nil, fmt.Errorf("cell %q: unknown type %q", tc.Name, tc.Type)
		}
		if _, dup := topIdx[tc.Name]; dup || tc.Name == "" || strings.Contains(tc.Name, "/") {
			return nil, fmt.Errorf("cell %q: duplicate or invalid name", tc.Name)
		}
		ch, ok := chainOf[tc.Type]
		if !ok {
			ch = len(a.chains)
			chainOf[tc.Type] = ch
			ci := chainInfo{name: tc.Type, level: t.level(tc.Type), gpus: make([]int, t.level(tc.Type)+1)}
			for n := tc.Type; n != ""; n = t.byName[n].Child {
				ci.gpus[t.level(n)] = gpusOf(t, n)
			}
			a.chains = append(a.chains, ci)
		}
		topIdx[tc.Name] = len(a.phys.tops)
		a.phys.add(t, tc.Name, tc.Type, ch)
	}
	s := &state{
		free:     make([]bool, len(a.phys.cells)),
		boundVC:  make([]int, len(a.phys.cells)),
		boundTop: make([]int, len(a.phys.cells)),
		leafGang: make([]string, len(a.phys.leaves)),
		bad:      make([]bool, len(a.phys.leaves)),
		gangs:    map[string]*gang{},
	}
	for c := range s.boundVC {
		s.boundVC[c], s.boundTop[c] = -1, -1
	}
	for _, top := range a.phys.tops {
		s.free[top] = true
	}
	for vi, vc := range spec.VCs {
		if _, dup := a.vcIdx[vc.Name]; dup || vc.Name == "" {
			return nil, fmt.Errorf("vc %q: duplicate or empty name", vc.Name)
		}
		a.vcIdx[vc.Name] = vi
		info := vcInfo{name: vc.Name}
		var f forest
		for _, q := range vc.Quota {
			ch, err := a.resolveChain(q)
			if err != nil {
				return nil, fmt.Errorf("vc %q: %w", vc.Name, err)
			}
			if q.Count < 0 {
				return nil, fmt.Errorf("vc %q: quota %s = %d", vc.Name, q.Type, q.Count)
			}
			for i := 0; i < q.Count; i++ {
				f.add(t, fmt.Sprintf("%s#%d", vc.Name, len(f.tops)), q.Type, ch)
				info.pinned = append(info.pinned, false)
			}
		}
		a.vcs = append(a.vcs, info)
		a.virt = append(a.virt, f)
	}
	// Pinned cells become virtual tops bound for good.
	type pin struct{ vc, top int }
	pinnedAt := map[int]pin{}
	for _, tc := range spec.Cells {
		if tc.Pinned == "" {
			continue
		}
		vi, ok := a.vcIdx[tc.Pinned]
		if !ok {
			return nil, fmt.Errorf("cell %q: pinned to unknown vc %q", tc.Name, tc.Pinned)
		}
		k := len(a.virt[vi].tops)
		a.virt[vi].add(t, fmt.Sprintf("%s#%d", tc.Pinned, k), tc.Type, chainOf[tc.Type])
		a.vcs[vi].pinned = append(a.vcs[vi].pinned, true)
		pinnedAt[a.phys.tops[topIdx[tc.Name]]] = pin{vi, k}
	}
	for vi := range a.vcs {
		f := &a.virt[vi]
		s.vcs = append(s.vcs, vcState{bind: make([]int, len(f.tops)), doomed: make([]bool, len(f.tops)), leaf: make([]string, len(f.leaves))})
		for k := range f.tops {
			s.vcs[vi].bind[k] = -1
		}
	}
	for _, tc := range spec.Cells {
		p := a.phys.tops[topIdx[tc.Name]]
		if pn, ok := pinnedAt[p]; ok {
			s.free[p] = false
			s.vcs[pn.vc].bind[pn.top], s.boundVC[p], s.boundTop[p] = p, pn.vc, pn.top
		}
		for _, b := range tc.Bad {
			c, ok := a.phys.lookup(tc.Name + "/" + b)
			if !ok || len(a.phys.cells[c].children) > 0 {
				return nil, fmt.Errorf("cell %q: bad %q is not a leaf address", tc.Name, b)
			}
			s.bad[a.phys.cells[c].lo] = true
		}
	}
	if err := a.safe(s); err != nil {
		return nil, fmt.Errorf("quotas exceed the cluster: %w", err)
	}
	a.rebalanceDoomed(s)
	a.s = s
	return a, a.verify()
}

func gpusOf(t typeTable, name string) int {
	n := 1
	for c := t.byName[name]; c.Child != ""; c = t.byName[c.Child] {
		n *= c.Count
	}
	return n
}

func (a *Allocator) resolveChain(q Quota) (int, error) {
	if _, ok := a.types.byName[q.Type]; !ok {
		return -1, fmt.Errorf("quota names unknown cell type %q", q.Type)
	}
	found := -1
	for ch, ci := range a.chains {
		if (q.Chain == "" || q.Chain == ci.name) && a.types.contains(ci.name, q.Type) {
			if found >= 0 {
				return -1, fmt.Errorf("cell type %q is in chains %s and %s", q.Type, a.chains[found].name, ci.name)
			}
			found = ch
		}
	}
	if found < 0 {
		return -1, fmt.Errorf("no physical cell holds a %q", q.Type)
	}
	return found, nil
}

// SetChecking makes every change verify all invariants (for tests and
// debugging; it costs a pass over the cluster).
func (a *Allocator) SetChecking(on bool) { a.check = on }

func (a *Allocator) verify() error {
	if !a.check {
		return nil
	}
	if err := a.checkInvariants(a.s); err != nil {
		return fmt.Errorf("cells: invariant broken: %w", err)
	}
	return nil
}

// CheckInvariants verifies the allocator's accounting.
func (a *Allocator) CheckInvariants() error { return a.checkInvariants(a.s) }

// physOfVirt maps a virtual leaf of VC v to its physical leaf, -1 if unbound.
func (a *Allocator) physOfVirt(s *state, v, vl int) int {
	f := &a.virt[v]
	k := f.cells[f.leaves[vl]].top
	p := s.vcs[v].bind[k]
	if p < 0 {
		return -1
	}
	return a.phys.cells[p].lo + vl - f.cells[f.tops[k]].lo
}

// Allocate places a request, all or nothing. It returns ErrWait when the
// request does not fit now; other errors are malformed requests.
func (a *Allocator) Allocate(r Request) (Placement, error) {
	if r.ID == "" {
		return Placement{}, errors.New("request without id")
	}
	if _, dup := a.s.gangs[r.ID]; dup {
		return Placement{}, fmt.Errorf("request %q is already placed", r.ID)
	}
	if len(r.Members) == 0 {
		return Placement{}, fmt.Errorf("request %q has no members", r.ID)
	}
	for i, m := range r.Members {
		if m <= 0 {
			return Placement{}, fmt.Errorf("request %q: member %d asks for %d GPUs", r.ID, i, m)
		}
	}
	t := a.s.clone()
	var victims []string
	var err error
	switch r.Priority {
	case Guaranteed:
		v, ok := a.vcIdx[r.VC]
		if !ok {
			return Placement{}, fmt.Errorf("request %q: unknown vc %q", r.ID, r.VC)
		}
		victims, err = a.placeGuaranteed(t, v, r)
	case Opportunistic:
		err = a.placeOpportunistic(t, r)
	default:
		return Placement{}, fmt.Errorf("request %q: unknown priority %d", r.ID, r.Priority)
	}
	if err != nil {
		return Placement{}, err
	}
	a.rebalanceDoomed(t) // binding may have used up healthy supply
	a.s = t
	if err := a.verify(); err != nil {
		return Placement{}, err
	}
	return Placement{Members: a.addresses(t.gangs[r.ID]), Preempted: victims}, nil
}

func (a *Allocator) addresses(g *gang) [][]string {
	out := make([][]string, len(g.phys))
	for m, leaves := range g.phys {
		for _, l := range leaves {
			out[m] = append(out[m], a.phys.cells[a.phys.leaves[l]].addr)
		}
	}
	return out
}

// placeGuaranteed places r inside VC v's virtual cluster, binds the virtual
// top cells it touches, and preempts the opportunistic gangs in the way.
func (a *Allocator) placeGuaranteed(s *state, v int, r Request) ([]string, error) {
	f := &a.virt[v]
	usable := func(vl int) bool {
		if s.vcs[v].leaf[vl] != "" {
			return false
		}
		pl := a.physOfVirt(s, v, vl)
		return pl < 0 || !s.bad[pl]
	}
	virt := placeGang(f, usable, func(int) int { return 0 }, r.Members)
	if virt == nil {
		return nil, ErrWait
	}
	g := &gang{id: r.ID, vc: v, prio: Guaranteed, virt: virt, phys: make([][]int, len(virt)), seq: s.seq}
	s.seq++
	var victims []string
	for m, leaves := range virt {
		for _, vl := range leaves {
			k := f.cells[f.leaves[vl]].top
			if s.vcs[v].bind[k] < 0 {
				top := f.cells[f.tops[k]]
				if a.buddyBind(s, top.chain, top.level, false, v, k) < 0 {
					return nil, fmt.Errorf("cells: vc %s cannot bind a level-%d cell despite sharing safety", a.vcs[v].name, top.level)
				}
			}
			pl := a.physOfVirt(s, v, vl)
			if s.bad[pl] {
				return nil, ErrWait // freshly bound onto a bad cell: no healthy supply left
			}
			if owner := s.leafGang[pl]; owner != "" {
				if s.gangs[owner].prio != Opportunistic {
					return nil, fmt.Errorf("cells: leaf %s of vc %s held by guaranteed gang %s", a.phys.cells[a.phys.leaves[pl]].addr, a.vcs[v].name, owner)
				}
				victims = append(victims, owner)
				a.releaseGang(s, owner)
			}
			s.leafGang[pl] = r.ID
			s.vcs[v].leaf[vl] = r.ID
			g.phys[m] = append(g.phys[m], pl)
		}
	}
	s.gangs[r.ID] = g
	return victims, nil
}

// placeOpportunistic places r on free healthy GPUs anywhere, away from
// bound cells and packed with other opportunistic work.
func (a *Allocator) placeOpportunistic(s *state, r Request) error {
	usable := func(l int) bool { return s.leafGang[l] == "" && !s.bad[l] }
	boundLeaf := make([]bool, len(a.phys.leaves))
	for c := range a.phys.cells {
		if s.boundVC[c] >= 0 {
			for l := a.phys.cells[c].lo; l < a.phys.cells[c].hi; l++ {
				boundLeaf[l] = true
			}
		}
	}
	rank := func(c int) int {
		n := 0
		for l := a.phys.cells[c].lo; l < a.phys.cells[c].hi; l++ {
			if boundLeaf[l] {
				n++
			}
		}
		return n
	}
	phys := placeGang(&a.phys, usable, rank, r.Members)
	if phys == nil {
		return ErrWait
	}
	for _, leaves := range phys {
		for _, l := range leaves {
			s.leafGang[l] = r.ID
		}
	}
	s.gangs[r.ID] = &gang{id: r.ID, vc: -1, prio: Opportunistic, phys: phys, seq: s.seq}
	s.seq++
	return nil
}

// Release frees a placed request's GPUs; virtual cells left unused are
// unbound and their physical cells merge with free buddies.
func (a *Allocator) Release(id string) error {
	if _, ok := a.s.gangs[id]; !ok {
		return fmt.Errorf("request %q is not placed", id)
	}
	t := a.s.clone()
	a.releaseGang(t, id)
	a.rebalanceDoomed(t)
	a.s = t
	return a.verify()
}

func (a *Allocator) releaseGang(s *state, id string) {
	g := s.gangs[id]
	delete(s.gangs, id)
	for _, leaves := range g.phys {
		for _, l := range leaves {
			s.leafGang[l] = ""
		}
	}
	if g.prio != Guaranteed {
		return
	}
	f := &a.virt[g.vc]
	var tops []int
	for _, leaves := range g.virt {
		for _, vl := range leaves {
			s.vcs[g.vc].leaf[vl] = ""
			if k := f.cells[f.leaves[vl]].top; !slices.Contains(tops, k) {
				tops = append(tops, k)
			}
		}
	}
	for _, k := range tops {
		if !a.vcs[g.vc].pinned[k] && !s.vcs[g.vc].doomed[k] && !a.vtopUsed(s, g.vc, k) {
			a.unbind(s, g.vc, k)
		}
	}
}

// unbind returns a virtual top's physical cell to the free list and merges
// buddies upward while all of a parent's children are free.
func (a *Allocator) unbind(s *state, v, k int) {
	p := s.vcs[v].bind[k]
	s.vcs[v].bind[k], s.vcs[v].doomed[k] = -1, false
	s.boundVC[p], s.boundTop[p] = -1, -1
	s.free[p] = true
	for par := a.phys.cells[p].parent; par >= 0; par = a.phys.cells[par].parent {
		ch := a.phys.cells[par].children
		if slices.ContainsFunc(ch, func(c int) bool { return !s.free[c] }) {
			break
		}
		for _, c := range ch {
			s.free[c] = false
		}
		s.free[par] = true
	}
}

// Health

// SetHealth marks a physical GPU (leaf address) bad or good. Running gangs
// keep their GPUs; doomed bindings are recomputed.
func (a *Allocator) SetHealth(addr string, bad bool) error {
	c, ok := a.phys.lookup(addr)
	if !ok || len(a.phys.cells[c].children) > 0 {
		return fmt.Errorf("%q is not a GPU address", addr)
	}
	t := a.s.clone()
	t.bad[a.phys.cells[c].lo] = bad
	a.rebalanceDoomed(t)
	a.s = t
	return a.verify()
}

func (a *Allocator) cellBad(s *state, c int) bool {
	return slices.Contains(s.bad[a.phys.cells[c].lo:a.phys.cells[c].hi], true)
}

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
	ID      string
	VC      string // ignored for opportunistic requests except for reporting
	Class   Class
	Members []int
	// GPUType, when set, restricts the gang to leaves of that GPU type (a
	// round engine chose the type: its received-time accounting and
	// priorities are per type).
	GPUType string
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
			a.chains = append(a.chains, newChainInfo(t, tc.Type))
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
	// Quotas resolve to chains and meet sharing safety on the empty cluster
	// (pinned cells are not free): the check hcl runs on a config.
	qc, err := CheckQuotas(spec)
	if err != nil {
		return nil, err
	}
	if len(qc.Problems) > 0 {
		p := qc.Problems[0]
		q := spec.VCs[p.VC].Quota[p.Quota]
		if p.Kind == Oversubscribed {
			return nil, fmt.Errorf("quotas exceed the cluster: vc %q: quota %s = %d: VCs claim %d cells of level %d in chain %s, the cluster has %d (sharing safety)",
				spec.VCs[p.VC].Name, q.Type, q.Count, p.Demand, p.Level, p.Chain, p.Have)
		}
		return nil, fmt.Errorf("vc %q: quota %s: %v", spec.VCs[p.VC].Name, q.Type, p)
	}
	for vi, vc := range spec.VCs {
		if _, dup := a.vcIdx[vc.Name]; dup || vc.Name == "" {
			return nil, fmt.Errorf("vc %q: duplicate or empty name", vc.Name)
		}
		a.vcIdx[vc.Name] = vi
		info := vcInfo{name: vc.Name}
		var f forest
		for qi, q := range vc.Quota {
			ch := chainOf[qc.Chains[vi][qi]]
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
		s.vcs = append(s.vcs, vcState{bind: make([]int, len(f.tops)), doomed: make([]bool, len(f.tops)), leaf: make([]string, len(f.leaves)),
			vmap: slices.Repeat([]int{-1}, len(f.cells))})
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

// vphys is the physical cell virtual cell c of VC v is bound to, -1 if
// unbound: a top's buddy binding, else its lower binding.
func (a *Allocator) vphys(s *state, v, c int) int {
	f := &a.virt[v]
	if f.cells[c].parent < 0 {
		return s.vcs[v].bind[f.cells[c].top]
	}
	return s.vcs[v].vmap[c]
}

// physOfVirt maps a virtual leaf of VC v to its physical leaf, -1 if unbound.
func (a *Allocator) physOfVirt(s *state, v, vl int) int {
	if c := a.vphys(s, v, a.virt[v].leaves[vl]); c >= 0 {
		return a.phys.cells[c].lo
	}
	return -1
}

// leafTarget is the physical leaf virtual leaf vl of VC v maps to, binding
// the unbound cells on its path below its (bound) top when commit is set:
// each takes the best physical child of its parent's cell not held by a
// sibling (pickChild). Without commit it is where vl would go now. It
// returns a physical leaf position, -1 when the top is unbound.
func (a *Allocator) leafTarget(s *state, v, vl int, commit bool) int {
	f := &a.virt[v]
	var path []int
	for c := f.leaves[vl]; c >= 0; c = f.cells[c].parent {
		path = append(path, c)
	}
	p := a.vphys(s, v, path[len(path)-1])
	if p < 0 {
		return -1
	}
	for i := len(path) - 2; i >= 0; i-- {
		c := path[i]
		if q := s.vcs[v].vmap[c]; q >= 0 {
			p = q
			continue
		}
		q := a.pickChild(s, v, path[i+1], p)
		if commit {
			s.vcs[v].vmap[c] = q
		}
		p = q
	}
	return a.phys.cells[p].lo
}

// pickChild chooses, for an unbound child of virtual cell vparent (bound to
// physical p), a child of p that no sibling holds: fewest bad GPUs, then
// fewest opportunistic GPUs (free before preemptible), then address order.
func (a *Allocator) pickChild(s *state, v, vparent, p int) int {
	taken := map[int]bool{}
	for _, vc := range a.virt[v].cells[vparent].children {
		if q := s.vcs[v].vmap[vc]; q >= 0 {
			taken[q] = true
		}
	}
	best, bestKey := -1, [2]int{}
	for _, q := range a.phys.cells[p].children {
		if taken[q] {
			continue
		}
		ci := a.phys.cells[q]
		bad := 0
		for l := ci.lo; l < ci.hi; l++ {
			if s.bad[l] {
				bad++
			}
		}
		key := [2]int{bad, a.oppUsed(s, q)}
		if best < 0 || key[0] < bestKey[0] || (key[0] == bestKey[0] && key[1] < bestKey[1]) {
			best, bestKey = q, key
		}
	}
	return best
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
	switch r.Class {
	case Guaranteed:
		v, ok := a.vcIdx[r.VC]
		if !ok {
			return Placement{}, fmt.Errorf("request %q: unknown vc %q", r.ID, r.VC)
		}
		victims, err = a.placeGuaranteed(t, v, r)
	case Opportunistic:
		err = a.placeOpportunistic(t, r)
	default:
		return Placement{}, fmt.Errorf("request %q: unknown class %d", r.ID, r.Class)
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
	// The virtual choice sees only the VC's own state (as on its private
	// cluster); a free leaf is unusable only when it would map to a bad GPU.
	ok := make([]bool, len(f.leaves))
	for vl := range ok {
		if s.vcs[v].leaf[vl] == "" {
			pl := a.leafTarget(s, v, vl, false)
			ok[vl] = (pl < 0 || !s.bad[pl]) && (r.GPUType == "" || a.gpuType(f, f.leaves[vl]) == r.GPUType)
		}
	}
	usable := func(vl int) bool { return ok[vl] }
	virt := placeGang(f, usable, func(int) int { return 0 }, r.Members)
	if virt == nil {
		return nil, ErrWait
	}
	g := &gang{id: r.ID, vc: v, class: Guaranteed, virt: virt, phys: make([][]int, len(virt)), seq: s.seq}
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
			pl := a.leafTarget(s, v, vl, true)
			if s.bad[pl] {
				return nil, ErrWait // freshly bound onto a bad cell: no healthy supply left
			}
			if owner := s.leafGang[pl]; owner != "" {
				if s.gangs[owner].class != Opportunistic {
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
	usable := func(l int) bool {
		return s.leafGang[l] == "" && !s.bad[l] && (r.GPUType == "" || a.gpuType(&a.phys, a.phys.leaves[l]) == r.GPUType)
	}
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
	s.gangs[r.ID] = &gang{id: r.ID, vc: -1, class: Opportunistic, phys: phys, seq: s.seq}
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
	if g.class != Guaranteed {
		return
	}
	f := &a.virt[g.vc]
	vs := &s.vcs[g.vc]
	var tops []int
	for _, leaves := range g.virt {
		for _, vl := range leaves {
			vs.leaf[vl] = ""
			if k := f.cells[f.leaves[vl]].top; !slices.Contains(tops, k) {
				tops = append(tops, k)
			}
		}
	}
	// Lower cells left without used leaves unbind, bottom up.
	for _, leaves := range g.virt {
		for _, vl := range leaves {
			for c := f.leaves[vl]; f.cells[c].parent >= 0 && vs.vmap[c] >= 0; c = f.cells[c].parent {
				if slices.ContainsFunc(vs.leaf[f.cells[c].lo:f.cells[c].hi], func(id string) bool { return id != "" }) {
					break
				}
				vs.vmap[c] = -1
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

package cells

import (
	"fmt"
	"slices"
)

// Class of a gang. Guaranteed work runs in its VC's cells; opportunistic
// work uses free GPUs anywhere and is preempted when guaranteed work needs
// the GPU. (Not a priority: in Rondo "priority" is Gavel's, the ratio of a
// job's allocation to the time it received.)
type Class int

const (
	Opportunistic Class = -1
	Guaranteed    Class = 0
)

func (p Class) String() string {
	if p == Opportunistic {
		return "opportunistic"
	}
	return "guaranteed"
}

// gang is one placed request. Values are never mutated once stored, so
// copying the gang map is enough to copy the state.
type gang struct {
	id    string
	vc    int // -1 for opportunistic
	class Class
	phys  [][]int // leaf positions per member, in request order
	virt  [][]int // virtual leaf positions per member (guaranteed only)
	seq   int     // arrival order, for deterministic iteration
}

// vcState is one VC's mutable accounting.
type vcState struct {
	bind   []int    // virtual top -> bound physical cell, -1 when unbound
	doomed []bool   // virtual top bound to a bad cell to expose lost capacity
	leaf   []string // virtual leaf -> guaranteed gang id, "" when free
	// vmap maps a virtual cell below a top to a physical cell (a child of
	// its parent's physical cell), -1 when unbound. Lower cells bind lazily
	// like tops, so the VC's virtual choices stay its own while the physical
	// cells are chosen by physical state (free before preemptible).
	vmap []int
}

// state is the allocator's whole mutable accounting. Invariants (checked by
// checkInvariants):
//
//  1. Partition: every physical leaf has exactly one ancestor-or-self that is
//     either in the buddy free list (free) or a binding point (bound).
//  2. Buddies are merged: no cell has all of its children free.
//  3. Bindings are mutual and typed: bind[k] = p iff boundVC[p] = v and
//     boundTop[p] = k, and p has the virtual top's chain and level.
//  4. Lazy binding: a bound, unpinned virtual top is either used by a
//     guaranteed gang or doomed.
//  5. Usage: each gang's leaves are owned by it and by nothing else; each
//     member lies inside one node; a guaranteed gang's physical leaves are
//     its virtual leaves through the binding.
//  7. Lower bindings: a virtual cell below a top is bound iff one of its
//     virtual leaves is used; then its parent is bound and it maps to a
//     child of its parent's physical cell, distinct from its siblings'.
//  6. Sharing safety, per chain and level: free cells (counted in cells of
//     that level) hold every VC's unbound virtual cells at that level and
//     above.
type state struct {
	free     []bool // physical cell is in the buddy free list
	boundVC  []int  // physical binding point -> VC, -1 otherwise
	boundTop []int  // physical binding point -> virtual top index
	leafGang []string
	bad      []bool // physical leaf is unhealthy
	vcs      []vcState
	gangs    map[string]*gang
	seq      int
}

func (s *state) clone() *state {
	t := &state{
		free:     slices.Clone(s.free),
		boundVC:  slices.Clone(s.boundVC),
		boundTop: slices.Clone(s.boundTop),
		leafGang: slices.Clone(s.leafGang),
		bad:      slices.Clone(s.bad),
		vcs:      make([]vcState, len(s.vcs)),
		gangs:    make(map[string]*gang, len(s.gangs)),
		seq:      s.seq,
	}
	for i, v := range s.vcs {
		t.vcs[i] = vcState{bind: slices.Clone(v.bind), doomed: slices.Clone(v.doomed), leaf: slices.Clone(v.leaf), vmap: slices.Clone(v.vmap)}
	}
	for k, g := range s.gangs {
		t.gangs[k] = g
	}
	return t
}

// sortedGangs lists gangs in arrival order.
func (s *state) sortedGangs() []*gang {
	out := make([]*gang, 0, len(s.gangs))
	for _, g := range s.gangs {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *gang) int { return a.seq - b.seq })
	return out
}

// vtopUsed reports whether any virtual leaf of VC v's top k is in use.
func (a *Allocator) vtopUsed(s *state, v, k int) bool {
	c := a.virt[v].cells[a.virt[v].tops[k]]
	for l := c.lo; l < c.hi; l++ {
		if s.vcs[v].leaf[l] != "" {
			return true
		}
	}
	return false
}

// checkInvariants verifies the invariants documented on state.
func (a *Allocator) checkInvariants(s *state) error {
	p := &a.phys
	// 1 and 2.
	for l := range p.leaves {
		n := 0
		for c := p.leaves[l]; c >= 0; c = p.cells[c].parent {
			if s.free[c] || s.boundVC[c] >= 0 {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("leaf %s is covered by %d free or bound cells, want 1", p.cells[p.leaves[l]].addr, n)
		}
	}
	for c := range p.cells {
		if s.free[c] && s.boundVC[c] >= 0 {
			return fmt.Errorf("cell %s is both free and bound", p.cells[c].addr)
		}
		ch := p.cells[c].children
		if len(ch) > 0 && !slices.ContainsFunc(ch, func(x int) bool { return !s.free[x] }) {
			return fmt.Errorf("cell %s has all children free but is not merged", p.cells[c].addr)
		}
	}
	// 3 and 4.
	nbound := 0
	for v := range a.vcs {
		vs := &s.vcs[v]
		for k, pc := range vs.bind {
			if pc < 0 {
				if vs.doomed[k] {
					return fmt.Errorf("vc %s: unbound virtual top %d is doomed", a.vcs[v].name, k)
				}
				continue
			}
			nbound++
			vc := a.virt[v].cells[a.virt[v].tops[k]]
			if s.boundVC[pc] != v || s.boundTop[pc] != k {
				return fmt.Errorf("vc %s: virtual top %d bound to %s which points elsewhere", a.vcs[v].name, k, p.cells[pc].addr)
			}
			if p.cells[pc].chain != vc.chain || p.cells[pc].level != vc.level {
				return fmt.Errorf("vc %s: virtual top %d (level %d) bound to %s (level %d)", a.vcs[v].name, k, vc.level, p.cells[pc].addr, p.cells[pc].level)
			}
			if !a.vcs[v].pinned[k] && !vs.doomed[k] && !a.vtopUsed(s, v, k) {
				return fmt.Errorf("vc %s: virtual top %d bound to %s but unused", a.vcs[v].name, k, p.cells[pc].addr)
			}
		}
	}
	for c := range p.cells {
		if s.boundVC[c] >= 0 {
			nbound--
		}
	}
	// 7.
	for v := range a.vcs {
		if err := a.checkLowerBindings(s, v); err != nil {
			return err
		}
	}
	if nbound != 0 {
		return fmt.Errorf("%d physical binding points without a virtual cell", -nbound)
	}
	// 5.
	owned := 0
	for _, g := range s.sortedGangs() {
		for m, leaves := range g.phys {
			node := -1
			for i, l := range leaves {
				if s.leafGang[l] != g.id {
					return fmt.Errorf("gang %s: leaf %s owned by %q", g.id, p.cells[p.leaves[l]].addr, s.leafGang[l])
				}
				owned++
				n := p.nodeOf(p.leaves[l])
				if node >= 0 && n != node {
					return fmt.Errorf("gang %s member %d spans nodes", g.id, m)
				}
				node = n
				if g.class == Guaranteed {
					vl := g.virt[m][i]
					if s.vcs[g.vc].leaf[vl] != g.id {
						return fmt.Errorf("gang %s: virtual leaf %d not owned", g.id, vl)
					}
					if pl := a.physOfVirt(s, g.vc, vl); pl != l {
						return fmt.Errorf("gang %s: virtual leaf %d maps to %d, placed on %d", g.id, vl, pl, l)
					}
				}
			}
		}
	}
	for _, id := range s.leafGang {
		if id != "" {
			owned--
		}
	}
	if owned != 0 {
		return fmt.Errorf("leaf owners and gangs disagree by %d", owned)
	}
	for v := range a.vcs {
		for vl, id := range s.vcs[v].leaf {
			if g := s.gangs[id]; id != "" && (g == nil || g.vc != v || !slices.ContainsFunc(g.virt, func(x []int) bool { return slices.Contains(x, vl) })) {
				return fmt.Errorf("vc %s: virtual leaf %d owned by unknown gang %q", a.vcs[v].name, vl, id)
			}
		}
	}
	// 6.
	return a.safe(s)
}

// checkLowerBindings verifies invariant 7 for VC v.
func (a *Allocator) checkLowerBindings(s *state, v int) error {
	f := &a.virt[v]
	vs := &s.vcs[v]
	for c, ci := range f.cells {
		if ci.parent < 0 {
			if vs.vmap[c] != -1 {
				return fmt.Errorf("vc %s: top %s has a lower binding", a.vcs[v].name, ci.addr)
			}
			continue
		}
		used := slices.ContainsFunc(vs.leaf[ci.lo:ci.hi], func(id string) bool { return id != "" })
		q := vs.vmap[c]
		if used != (q >= 0) {
			return fmt.Errorf("vc %s: cell %s used=%v but mapped to %d", a.vcs[v].name, ci.addr, used, q)
		}
		if q < 0 {
			continue
		}
		pp := a.vphys(s, v, ci.parent)
		if pp < 0 || a.phys.cells[q].parent != pp || a.phys.cells[q].level != ci.level {
			return fmt.Errorf("vc %s: cell %s maps to %s, not a child of its parent's cell", a.vcs[v].name, ci.addr, a.phys.cells[q].addr)
		}
		for _, sib := range f.cells[ci.parent].children {
			if sib != c && vs.vmap[sib] == q {
				return fmt.Errorf("vc %s: cells %s and %s both map to %s", a.vcs[v].name, ci.addr, f.cells[sib].addr, a.phys.cells[q].addr)
			}
		}
	}
	return nil
}

// safe checks sharing safety for every chain and level on the state: free
// cells against every VC's unbound virtual top cells (shortfall, the one
// implementation CheckQuotas also uses).
func (a *Allocator) safe(s *state) error {
	for ch := range a.chains {
		top := a.chains[ch].level
		freeAt := make([]int, top+1)
		need := make([]int, top+1)
		for c := range a.phys.cells {
			if s.free[c] && a.phys.cells[c].chain == ch {
				freeAt[a.phys.cells[c].level]++
			}
		}
		for v := range a.vcs {
			for k, pc := range s.vcs[v].bind {
				vc := a.virt[v].cells[a.virt[v].tops[k]]
				if pc < 0 && vc.chain == ch {
					need[vc.level]++
				}
			}
		}
		if l, want, have := shortfall(a.chains[ch].gpus, freeAt, need, top); l > 0 {
			return fmt.Errorf("sharing safety: chain %s level %d has %d free cells, VCs may claim %d", a.chains[ch].name, l, have, want)
		}
	}
	return nil
}

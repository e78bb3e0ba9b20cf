package cells

import "slices"

// buddyBind binds VC v's virtual top k (chain ch, level l) to a physical
// cell: the smallest free cell at or above l, split down to l. Candidates
// are ranked healthy first (or bad first when wantBad: doomed bindings),
// then fewer opportunistic GPUs (fewer preemptions), then lower level (less
// fragmentation), then address order. Each candidate is tried on a copy
// and kept only if sharing safety still holds, so higher cells are split only
// when they are spare. It returns the physical cell, or -1 with s unchanged.
func (a *Allocator) buddyBind(s *state, ch, l int, wantBad bool, v, k int) int {
	type cand struct{ c, bad, level, opp int }
	var cands []cand
	for c := range a.phys.cells {
		ci := a.phys.cells[c]
		if !s.free[c] || ci.chain != ch || ci.level < l {
			continue
		}
		bad := 0
		if a.cellBad(s, c) != wantBad {
			bad = 1
		}
		if wantBad && bad == 1 {
			continue
		}
		cands = append(cands, cand{c, bad, ci.level, a.oppUsed(s, c)})
	}
	slices.SortFunc(cands, func(x, y cand) int {
		if x.bad != y.bad {
			return x.bad - y.bad
		}
		if x.opp != y.opp {
			return x.opp - y.opp
		}
		if x.level != y.level {
			return x.level - y.level
		}
		return x.c - y.c
	})
	for _, cd := range cands {
		t := s.clone()
		p := a.splitTake(t, cd.c, l, wantBad)
		t.vcs[v].bind[k], t.boundVC[p], t.boundTop[p] = p, v, k
		if a.safe(t) == nil {
			*s = *t
			return p
		}
	}
	return -1
}

// splitTake removes free cell c from the free list and splits it down to
// level l: at each step the children join the free list and the best child
// is taken.
func (a *Allocator) splitTake(s *state, c, l int, wantBad bool) int {
	s.free[c] = false
	for a.phys.cells[c].level > l {
		best := -1
		bestKey := [2]int{}
		for _, ch := range a.phys.cells[c].children {
			s.free[ch] = true
			bad := 0
			if a.cellBad(s, ch) != wantBad {
				bad = 1
			}
			key := [2]int{bad, a.oppUsed(s, ch)}
			if best < 0 || key[0] < bestKey[0] || (key[0] == bestKey[0] && key[1] < bestKey[1]) {
				best, bestKey = ch, key
			}
		}
		s.free[best] = false
		c = best
	}
	return c
}

// oppUsed counts GPUs of c used by opportunistic gangs.
func (a *Allocator) oppUsed(s *state, c int) int {
	n := 0
	for l := a.phys.cells[c].lo; l < a.phys.cells[c].hi; l++ {
		// The gang being placed owns leaves before it is stored: not opportunistic.
		if g := s.gangs[s.leafGang[l]]; g != nil && g.class == Opportunistic {
			n++
		}
	}
	return n
}

// healthyAt counts the healthy level-l cells obtainable from free cells of
// chain ch.
func (a *Allocator) healthyAt(s *state, ch, l int) int {
	n := 0
	for c := range a.phys.cells {
		ci := a.phys.cells[c]
		if !s.free[c] || ci.chain != ch || ci.level < l {
			continue
		}
		for d := c; d < ci.end; d++ {
			if a.phys.cells[d].level == l && !a.cellBad(s, d) {
				n++
			}
		}
	}
	return n
}

// rebalanceDoomed makes bad hardware visible to the VCs that would otherwise
// be promised it: unused doomed bindings are dropped, then, per chain, level
// (top down) and VC (declaration order), while the VC's unbound virtual cells
// outnumber the healthy free supply, a bad free cell is bound to it.
func (a *Allocator) rebalanceDoomed(s *state) {
	for v := range a.vcs {
		for k := range s.vcs[v].bind {
			if s.vcs[v].doomed[k] && !a.vtopUsed(s, v, k) {
				a.unbind(s, v, k)
			}
		}
	}
	for ch := range a.chains {
		for l := a.chains[ch].level; l >= 1; l-- {
			for v := range a.vcs {
				f := &a.virt[v]
				var unbound []int
				for k, p := range s.vcs[v].bind {
					top := f.cells[f.tops[k]]
					if p < 0 && top.chain == ch && top.level == l {
						unbound = append(unbound, k)
					}
				}
				healthy := a.healthyAt(s, ch, l)
				for i := 0; len(unbound)-i > healthy && i < len(unbound); i++ {
					k := unbound[len(unbound)-1-i]
					if a.buddyBind(s, ch, l, true, v, k) < 0 {
						break
					}
					s.vcs[v].doomed[k] = true
				}
			}
		}
	}
}

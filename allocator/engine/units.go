package engine

import (
	"cmp"
	"slices"
)

// The units of a round, in the reference's priority-table order: each job
// in arrival order followed by the pairs whose later job it is, by their
// earlier job. With packing every two jobs of equal scale factor form a
// pair — tens of thousands at a few hundred active jobs — and almost all
// of them never run and never get a share. Such a pair is dormant: it
// stays out of e.units and e.order, so the per-round passes (priorities,
// recompute bookkeeping) visit only the units that matter, and it is seen
// only where the full order matters: the trivial units' place in the
// ranking (candidates) and the half-round credit each unit adds to the
// type's total in compat mode (prepare). A dormant pair becomes active —
// for good — when it gets a share (setXInOrder), is selected
// (selectUnits), or the snapshot shows it ran.
//
//	snapshot ─► syncUnits ─► e.full (every unit, dense) ─► e.order (active)

// slot is one unit's place in the full order.
type slot struct {
	u  *unit
	pi int32 // index in the snapshot's pairs (-1: a job)
	oi int32 // index in e.order (-1: a dormant pair)
}

// pairTab is the snapshot's pairs as the engine last read them, dense and
// in the snapshot's order.
type pairTab struct {
	k   []ukey
	u   []*unit    // nil where the pair is not a unit (scale factors differ)
	j   [][2]int32 // the jobs' positions in e.snapJobs
	dor []bool     // dormant
	inX []bool     // in the allocation in force (read by a dormant pair's activation)
}

func (t *pairTab) reset() {
	// Stale unit pointers would keep departed units' slabs alive.
	clear(t.u[:cap(t.u)])
	clear(t.k[:cap(t.k)])
	t.k, t.u, t.j, t.dor, t.inX = t.k[:0], t.u[:0], t.j[:0], t.dor[:0], t.inX[:0]
}

func (t *pairTab) add(k ukey, u *unit, a, b int32, dormant, inX bool) {
	t.k = append(t.k, k)
	t.u = append(t.u, u)
	t.j = append(t.j, [2]int32{a, b})
	t.dor = append(t.dor, dormant)
	t.inX = append(t.inX, inX)
}

// syncUnits brings the units up to date with the snapshot. When the
// snapshot lists the same jobs and pairs as last round only the active
// units' maps are re-read.
func (e *Engine) syncUnits(s *Snapshot) {
	pairs := s.Pairs
	if !e.packing {
		pairs = nil
	}
	e.curPairs = pairs
	same := len(s.Jobs) == len(e.snapJobs) && len(pairs) == len(e.pt.k)
	for i := 0; same && i < len(s.Jobs); i++ {
		u := e.snapJobs[i]
		same = u.key == s.Jobs[i].ID && u.sf == max(s.Jobs[i].ScaleFactor, 1)
	}
	for i := 0; same && i < len(pairs); i++ {
		// A dormant pair that ran was selected, which activated it; a
		// backend showing one anyway gets a full rebuild.
		same = ukey(pairs[i].Jobs) == e.pt.k[i] && (!e.pt.dor[i] || pairs[i].ReceivedS == nil)
	}
	if !same {
		e.rebuildUnits(s, pairs)
		return
	}
	if e.orderDirty {
		e.rebuildOrder()
	}
	for i, j := range s.Jobs {
		u := e.snapJobs[i]
		u.jt, u.cum = j.Throughput, j.ReceivedS
	}
	e.readRunningPairs(s)
}

// readRunningPairs re-reads the pairs that ran last round: only their
// received time can have grown.
func (e *Engine) readRunningPairs(s *Snapshot) {
	for _, a := range s.Running {
		if len(a.Jobs) != 2 {
			continue
		}
		if u := e.units[ukey{a.Jobs[0], a.Jobs[1]}]; u != nil && u.isPair() && u.seen == e.stamp && u.pi < len(e.curPairs) {
			p := &e.curPairs[u.pi]
			u.pt = p.Throughput
			u.setPairCum(p.ReceivedS)
		}
	}
}

// rebuildUnits reads the snapshot's jobs and pairs afresh. Last round's
// pairs are a hint: a backend usually keeps their order and only drops
// the pairs of departed jobs and adds new ones, so walking both lists
// finds most units, and their jobs' new positions, without a lookup.
func (e *Engine) rebuildUnits(s *Snapshot, pairs []Pair) {
	e.stamp++
	oldJobs := e.snapJobs
	e.snapJobs = e.spareJobs[:0]
	// Last round's jobs are a hint as well: walked beside the snapshot's,
	// a job still in its place (w) needs no lookup; after a lookup the
	// walk resumes behind the job found.
	w := 0
	for i, j := range s.Jobs {
		var u *unit
		if w < len(oldJobs) && oldJobs[w].key == j.ID {
			u = oldJobs[w]
			w++
		} else {
			k := ukey{j.ID, ""}
			if u = e.units[k]; u == nil {
				u = e.newUnit()
				u.key, u.jobs = j.ID, []string{j.ID}
				u.xrow, u.inX = e.jobX(j.ID)
				u.setQuiet()
				e.units[k] = u
			} else if u.pos < len(oldJobs) && oldJobs[u.pos] == u {
				w = u.pos + 1
			}
		}
		u.seen = e.stamp
		u.pos, u.sf, u.jt, u.cum = i, max(j.ScaleFactor, 1), j.Throughput, j.ReceivedS
		e.snapJobs = append(e.snapJobs, u)
	}
	// jobIdx (job -> position) only for pairs the walk below does not
	// find in last round's order.
	var jobIdx map[string]int32
	index := func(id string) (int32, bool) {
		if jobIdx == nil {
			jobIdx = make(map[string]int32, len(s.Jobs))
			for i := range s.Jobs {
				jobIdx[s.Jobs[i].ID] = int32(i)
			}
		}
		v, ok := jobIdx[id]
		return v, ok
	}
	// remap: a job's old position to its new one (-1: gone).
	remap := e.remap[:0]
	for _, u := range oldJobs {
		p := int32(-1)
		if u.seen == e.stamp {
			p = int32(u.pos)
		}
		remap = append(remap, p)
	}
	e.remap = remap
	clear(oldJobs)
	e.spareJobs = oldJobs

	old := e.pt
	e.pt, e.spareTab = e.spareTab, old
	e.pt.reset()
	gone := func(w int) bool {
		return old.u[w] == nil || remap[old.j[w][0]] < 0 || remap[old.j[w][1]] < 0
	}
	w = 0
	for i := range pairs {
		p := &pairs[i]
		k := ukey(p.Jobs)
		for w < len(old.k) && old.k[w] != k && gone(w) {
			w++
		}
		var u *unit
		var ja, jb int32
		dormant, inX := false, false
		if w < len(old.k) && old.k[w] == k && !gone(w) {
			u, ja, jb = old.u[w], remap[old.j[w][0]], remap[old.j[w][1]]
			dormant, inX = old.dor[w], old.inX[w]
			w++
		} else {
			var okA, okB bool
			ja, okA = index(p.Jobs[0])
			jb, okB = index(p.Jobs[1])
			if !okA || !okB || ja == jb {
				e.pt.add(k, nil, 0, 0, false, false)
				continue
			}
			if u = e.units[k]; u == nil {
				a, b := e.snapJobs[ja], e.snapJobs[jb]
				u = e.newUnit()
				u.key, u.jobs = UnitKey(k[:]), []string{k[0], k[1]}
				u.ja, u.jb, u.sf, u.pt = a, b, a.sf, p.Throughput
				// A pair is in the allocation only if both its jobs are
				// (a new job's pairs never are: no lookup).
				if a.inX && b.inX {
					u.setX(e.xLookup(), k)
					inX = u.inX
				}
				u.setQuiet()
				if dormant = allZero(u.xrow); dormant {
					u.xrow = nil
				} else {
					e.units[k] = u // a share: active
				}
			}
		}
		a, b := e.snapJobs[ja], e.snapJobs[jb]
		if a.sf != b.sf {
			if !dormant {
				u.seen = e.stamp // keeps its history, out of the order
			}
			e.pt.add(k, nil, 0, 0, false, false)
			continue
		}
		e.pt.add(k, u, ja, jb, dormant, inX)
		if dormant && p.ReceivedS != nil {
			e.activate(int32(i))
			dormant = false
		}
		if !dormant {
			u.seen = e.stamp
			u.ja, u.jb, u.sf, u.pt = a, b, a.sf, p.Throughput
			u.keepPairCum(p.ReceivedS)
		}
	}
	// Dormant pairs that left with a job: drop their references, as
	// resetReceived does for dead units (slabs, newUnit).
	for w, u := range old.u {
		if u != nil && old.dor[w] && gone(w) {
			u.ja, u.jb, u.pt = nil, nil, nil
		}
	}
	e.buildFull()
	e.readRunningPairs(s)
}

// buildFull orders the units: each job, then the pairs whose later job it
// is, by their earlier job (a counting sort on the later job; the snapshot
// usually lists pairs by earlier job already).
func (e *Engine) buildFull() {
	n := len(e.snapJobs)
	start := slices.Grow(e.bucketStart[:0], n+1)[:n+1]
	clear(start)
	for i, u := range e.pt.u {
		if u != nil {
			start[max(e.pt.j[i][0], e.pt.j[i][1])+1]++
		}
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	npairs := int(start[n])
	byLate := slices.Grow(e.byLate[:0], npairs)[:npairs]
	fill := slices.Grow(e.bucketFill[:0], n)[:n]
	copy(fill, start[:n])
	for i, u := range e.pt.u {
		if u != nil {
			l := max(e.pt.j[i][0], e.pt.j[i][1])
			byLate[fill[l]] = int32(i)
			fill[l]++
		}
	}
	early := func(pi int32) int32 { return min(e.pt.j[pi][0], e.pt.j[pi][1]) }
	full := e.full[:0]
	for l := 0; l < n; l++ {
		full = append(full, slot{u: e.snapJobs[l], pi: -1})
		bk := byLate[start[l]:start[l+1]]
		if !slices.IsSortedFunc(bk, func(x, y int32) int { return cmp.Compare(early(x), early(y)) }) {
			slices.SortStableFunc(bk, func(x, y int32) int { return cmp.Compare(early(x), early(y)) })
		}
		for _, pi := range bk {
			full = append(full, slot{u: e.pt.u[pi], pi: pi})
		}
	}
	clear(full[len(full):cap(full)]) // no stale units (slabs) kept alive
	e.full, e.byLate, e.bucketStart, e.bucketFill = full, byLate, start, fill
	e.rebuildOrder()
}

// rebuildOrder lists the active units of the full order in e.order.
func (e *Engine) rebuildOrder() {
	clear(e.order)
	e.order = e.order[:0]
	for q := range e.full {
		sl := &e.full[q]
		if sl.pi >= 0 && e.pt.dor[sl.pi] {
			sl.oi = -1
			continue
		}
		sl.oi = int32(len(e.order))
		sl.u.idx, sl.u.oi = q, len(e.order)
		if sl.pi >= 0 {
			sl.u.pi = int(sl.pi)
		}
		e.order = append(e.order, sl.u)
	}
	e.orderDirty = false
	e.zGen++ // unit order changed
}

// activate makes the dormant pair pi (an index in the snapshot's pairs) a
// unit of e.units; e.order takes it at its next rebuild.
func (e *Engine) activate(pi int32) {
	u := e.pt.u[pi]
	e.pt.dor[pi] = false
	e.units[e.pt.k[pi]] = u
	u.seen = e.stamp
	// Its allocation row, if it has one, is all zeros (a share would
	// have activated it): a nil row reads the same.
	u.xrow, u.inX = nil, e.pt.inX[pi]
	u.setQuiet()
	e.orderDirty = true
}

// newUnit allocates units from slabs: the units made together (a new
// job's pairs) sit together in memory, in the order the per-round passes
// visit them, instead of scattered over the heap.
func (e *Engine) newUnit() *unit {
	if len(e.slab) == 0 {
		// Small enough that a few long-lived units do not keep much
		// garbage alive with them.
		e.slab = make([]unit, 64)
	}
	u := &e.slab[0]
	e.slab = e.slab[1:]
	return u
}

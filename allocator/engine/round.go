package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// ukey identifies a unit: {job, ""} or the pair's two jobs.
type ukey [2]string

// unit is a schedulable entity: one job, or a pair sharing GPUs. Units
// persist across rounds; the snapshot's maps are re-read every round.
type unit struct {
	key    string
	jobs   []string
	sf     int
	ja, jb *unit // a pair's job units
	pos    int   // a job's index in the snapshot
	jt     map[string]float64
	pt     map[string][2]float64
	cum    map[string]float64 // cumulative received time (snapshot)
	cumV   []float64          // a pair's cum per e.resetTypes (pairCum)
	cumAt  int                // e.typesGen+1 when cumV was read; 0: stale
	hasCum bool               // a pair's len(cum) > 0
	inl    [3][4]float64      // baseV, defV, cumV's storage for up to 4 types
	// The received time at the unit's last reset (baseline) and the
	// deficit it carries, per type of vtypes (the types at that reset;
	// other types: a zero baseline, the deficit in defOld). Dense, not
	// maps by type name: every recompute updates every unit's.
	vtypes []string
	vgen   int                // e.typesGen+1 when vtypes was e.resetTypes; 0: none
	baseV  []float64          // baseline per vtypes
	defV   []float64          // deficit per vtypes
	defOld map[string]float64 // deficit on types not in vtypes (nil: none)
	xrow   []float64          // allocation row
	inX    bool               // in the allocation in force
	quiet  bool               // no share, no deficit, zero baseline
	seen   int                // stamp of the last snapshot it was in
	taken  int                // round it was selected in (jobs)
	idx    int                // position in this round's full order (units.go)
	oi     int                // position in e.order (active units)
	pi     int                // a pair's index in the snapshot's pairs (active units)
	zMark  []int              // per type buffer: the cache build it is in (candidates)
}

func (u *unit) isPair() bool { return u.ja != nil }

// keyOf is the key of the unit of jobs (one job, or a pair in its order);
// ok is false for any other count.
func keyOf(jobs []string) (k ukey, ok bool) {
	switch len(jobs) {
	case 1:
		return ukey{jobs[0], ""}, true
	case 2:
		return ukey{jobs[0], jobs[1]}, true
	}
	return k, false
}

// col is t's index in u.vtypes (-1: absent); bi is t's index in
// e.resetTypes (-1: absent). A unit last reset on the current types is
// read by that index, others by name.
func (e *Engine) col(u *unit, t string, bi int) int {
	if u.vgen == e.typesGen+1 {
		return bi
	}
	return slices.Index(u.vtypes, t)
}

// deficit is u's carried deficit on t (bi as col's).
func (e *Engine) deficit(u *unit, t string, bi int) float64 {
	if i := e.col(u, t, bi); i >= 0 {
		return u.defV[i]
	}
	return u.defOld[t]
}

// baseline is u's received time on t at its last reset (bi as col's).
func (e *Engine) baseline(u *unit, t string, bi int) float64 {
	if i := e.col(u, t, bi); i >= 0 {
		return u.baseV[i]
	}
	return 0
}

// retype re-indexes u's baselines and deficits by types (the types of
// this reset, e.typesGen's): a baseline on a type no longer there is
// dropped, its deficit kept in defOld, as a type may come back.
func (u *unit) retype(types []string, gen int) {
	nb, nd := make([]float64, len(types)), make([]float64, len(types))
	for i, t := range types {
		if j := slices.Index(u.vtypes, t); j >= 0 {
			nb[i], nd[i] = u.baseV[j], u.defV[j]
		} else if v, ok := u.defOld[t]; ok {
			nd[i] = v
			delete(u.defOld, t)
		}
	}
	for j, t := range u.vtypes {
		if !slices.Contains(types, t) {
			if u.defOld == nil {
				u.defOld = map[string]float64{}
			}
			u.defOld[t] = u.defV[j]
		}
	}
	if len(types) <= len(u.inl[0]) {
		// In the unit itself: no pointer to chase per round.
		u.baseV, u.defV = u.inl[0][:len(types)], u.inl[1][:len(types)]
		copy(u.baseV, nb)
		copy(u.defV, nd)
	} else {
		u.baseV, u.defV = nb, nd
	}
	u.vtypes, u.vgen = types, gen
}

// baseMap and defMap are the baselines and deficits by type (History).
func (u *unit) baseMap() map[string]float64 {
	if len(u.vtypes) == 0 {
		return nil
	}
	m := make(map[string]float64, len(u.vtypes))
	for i, t := range u.vtypes {
		m[t] = u.baseV[i]
	}
	return m
}

func (u *unit) defMap() map[string]float64 {
	if len(u.vtypes)+len(u.defOld) == 0 {
		return nil
	}
	m := maps.Clone(u.defOld)
	if m == nil {
		m = make(map[string]float64, len(u.vtypes))
	}
	for i, t := range u.vtypes {
		m[t] = u.defV[i]
	}
	return m
}

// setBaseDef sets u's baselines and deficits from maps by type (a
// restored history), to be read by name until its next reset.
func (u *unit) setBaseDef(base, def map[string]float64) {
	u.vtypes = slices.Sorted(maps.Keys(base))
	u.baseV, u.defV = make([]float64, len(u.vtypes)), make([]float64, len(u.vtypes))
	u.defOld = nil
	for i, t := range u.vtypes {
		u.baseV[i], u.defV[i] = base[t], def[t]
	}
	for t, v := range def {
		if _, ok := base[t]; !ok {
			if u.defOld == nil {
				u.defOld = map[string]float64{}
			}
			u.defOld[t] = v
		}
	}
	u.vgen = 0
}

// tput is the unit's throughput on t ([1] unused for a job).
func (u *unit) tput(t string) [2]float64 {
	if u.isPair() {
		return u.pt[t]
	}
	return [2]float64{u.jt[t], 0}
}

func (u *unit) setX(idx map[ukey][]float64, k ukey) {
	u.xrow, u.inX = idx[k]
}

func (u *unit) setQuiet() {
	u.quiet = allZero(u.xrow) && allZero(u.defV) && allZeroMap(u.defOld) && allZero(u.baseV)
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func allZeroMap(m map[string]float64) bool {
	if len(m) == 0 {
		return true
	}
	for _, x := range m {
		if x != 0 {
			return false
		}
	}
	return true
}

// trivial: received time, deficit and share are zero on every type.
func (u *unit) trivial() bool {
	if u.isPair() {
		return u.quiet && !u.hasCum
	}
	return u.quiet && len(u.cum) == 0
}

// setPairCum gives a pair its received-time map. A pair's map is re-read
// only when the pair list changes or the pair ran (Pair.ReceivedS), so
// its values are kept densely (pairCum) between those times.
func (u *unit) setPairCum(m map[string]float64) {
	u.cum, u.hasCum, u.cumAt = m, len(m) > 0, 0
}

// keepPairCum is setPairCum for a pair that did not run: its dense copy
// stays valid if the map is the same.
func (u *unit) keepPairCum(m map[string]float64) {
	if mapID(m) != mapID(u.cum) {
		u.setPairCum(m)
	}
}

// pairCum is a pair's cumulative received time on e.resetTypes[bi],
// read from its map once per reset or run.
func (e *Engine) pairCum(u *unit, bi int) float64 {
	if u.cumAt != e.typesGen+1 {
		if len(e.resetTypes) <= len(u.inl[2]) {
			u.cumV = u.inl[2][:0]
		}
		u.cumV = slices.Grow(u.cumV[:0], len(e.resetTypes))
		for _, t := range e.resetTypes {
			u.cumV = append(u.cumV, u.cum[t])
		}
		u.cumAt = e.typesGen + 1
	}
	return u.cumV[bi]
}

type candidate struct {
	u        *unit
	priority float64
	deficit  float64
	x        float64
	ord      int // the unit's position in the full order (ties)
}

// Round decides one round: it brings the allocation up to date, selects
// units per GPU type in priority order and places them. The preemption
// options (preempt.go) hold units before selection and re-weigh, notice
// and backfill after it.
func (e *Engine) Round(s *Snapshot) (*Plan, error) {
	recomputed, solveMS, err := e.Allocate(s)
	if err != nil {
		return nil, err
	}
	e.rounds++
	plan := &Plan{TimeS: s.TimeS, Recomputed: recomputed, SolveMS: solveMS, Allocation: e.alloc}

	order := e.typeOrder(s.GPUs)
	free := healthyCounts(s.GPUs)
	if e.pre {
		e.preBegin(s, order, free) // pins, a reservation (made now), its start or its GPUs held back
	}
	selected := e.selectUnits(order, free)
	if e.pr != nil {
		e.preSelected(order, selected, free) // checkpoint-aware choice, notices, backfill
	}
	ps, extras := e.elasticPrepare(s)
	plan.Assignments = e.place(ps, order, selected)
	e.elasticGrow(s, order, plan.Assignments, extras)
	if e.pr != nil {
		e.preFinish(plan) // the reservation kept or dropped, notices to its holders, records
	}

	// Jobs that ran and are neither placed nor suspended yet (placed
	// marks both), by the round's two maps, reused: filled every round.
	placed, active := e.roundMaps(len(s.Jobs))
	for _, a := range plan.Assignments {
		for _, j := range a.Jobs {
			placed[j] = true
		}
	}
	for i := range s.Jobs {
		active[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for _, a := range s.Running {
		for _, j := range a.Jobs {
			if active[j] != nil && !placed[j] {
				placed[j] = true
				plan.Suspend = append(plan.Suspend, j)
			}
		}
	}
	annotate(s, plan, nil, active, &e.annMaps)
	return plan, nil
}

// Recycle hands back a plan of this engine's that its caller, and every
// one it gave the plan to, no longer reads: the next Round reuses its
// intents' memory (hundreds of intents a round, the simulator's largest
// allocation). Its assignments are not reused: a backend keeps them as the
// next snapshot's Running.
func (e *Engine) Recycle(p *Plan) {
	if p != nil && cap(p.Intents) > cap(e.annMaps.spare) {
		e.annMaps.spare, p.Intents = p.Intents[:0], nil
	}
}

// RecycleRunning hands back the assignments a backend listed as Running in
// a round that is over and will list no more (a plan's assignments are
// the next snapshot's Running, so they come back a round after their
// plan): the next Round's assignments reuse their memory. Only without the
// preemption options, whose state keeps a snapshot.
func (e *Engine) RecycleRunning(r []Assignment) {
	if e.pr == nil && cap(r) > cap(e.spareRunning) {
		e.spareRunning = r[:0]
	}
}

// roundMaps are Round's job sets, emptied (a round's maps hold hundreds of
// jobs: cleared, not rebuilt from empty).
func (e *Engine) roundMaps(n int) (map[string]bool, map[string]*Job) {
	if e.rPlaced == nil {
		e.rPlaced, e.rActive = make(map[string]bool, n), make(map[string]*Job, n)
	}
	clear(e.rPlaced)
	clear(e.rActive)
	return e.rPlaced, e.rActive
}

var gavelTypeOrder = []string{"v100", "p100", "k80"}

func (e *Engine) typeOrder(gpus []GPU) []string {
	present := map[string]bool{}
	for _, t := range typeNames(gpus) {
		present[t] = true
	}
	pref := e.cfg.TypeOrder
	if pref == nil {
		pref = gavelTypeOrder
	}
	var out []string
	for _, t := range pref {
		if present[t] {
			out = append(out, t)
			delete(present, t)
		}
	}
	for _, t := range typeNames(gpus) {
		if present[t] {
			out = append(out, t)
		}
	}
	if e.shuffle {
		e.shuffler.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// selectUnits is the greedy selection: per type in order, candidates by
// (priority, deficit, X) descending; a job runs at most once per round, a
// unit only where its whole scale factor fits.
//
// Units with priority 0 on a type (no share of it) may take the GPUs left
// over, except under FIFO. Gavel (GavelCompat) does that within the same
// pass over types, so a job whose share is on a later type (Recommendation
// models: P100, where they run twice as fast as on V100) takes a leftover
// V100 first and can then no longer run where its share is, and a pair
// with no share (ranked above its own jobs once they have a negative
// deficit) takes one leftover GPU while GPUs that could run both jobs alone
// stay idle. By default the leftover GPUs are handed out after every type's
// positive-priority units were chosen, to single jobs first and only then
// to pairs. Agnostic policies keep the single pass: their type order is
// shuffled every round (as in Gavel) and their shares' split over types is
// a type-blind LP's tie-break, so following it first only loses the
// shuffle's spread (agnostic LAS at 2.4 jobs/h: 28.2 h instead of 23.1 h).
func (e *Engine) selectUnits(order []string, free map[string]int) map[string][]*candidate {
	// Without the preemption options (whose final fill calls selectUnits
	// again within the round, on top of this call's result) the map, its
	// lists and the slab below are last round's, emptied: no candidate
	// outlives its round.
	reuse := e.pr == nil
	if e.selected == nil || !reuse {
		e.selected, e.selSlab = map[string][]*candidate{}, nil
	}
	selected := e.selected
	for t, l := range selected {
		clear(l)
		selected[t] = l[:0]
	}
	stamp := e.rounds
	busy := func(u *unit) bool {
		if u.isPair() {
			return u.ja.taken == stamp || u.jb.taken == stamp
		}
		return u.taken == stamp
	}
	const (
		all       = iota // Gavel's single pass
		shares           // positive priority only
		leftJobs         // priority 0, single jobs
		leftPairs        // priority 0, pairs
	)
	// Jobs not selected yet: once there are none, every unit left is busy
	// and the rest of the ranking (with packing, thousands of pairs) need
	// not be visited.
	left := len(e.snapJobs) - e.preTaken
	// Selected candidates are copies (candidates reuses its buffers on
	// the next call, and the default mechanism calls it up to three times
	// per type in a round), kept in one slab: a pointer into a slab that
	// grew still reads the value it was given.
	clear(e.selSlab) // no dead unit kept alive by a stale candidate
	slab := e.selSlab[:0]
	if reuse {
		defer func() { e.selSlab = slab }() // the largest, when it grew
	}
	pass := func(t string, mode int) {
		ft := free[t] // written back once, not looked up per candidate
		if ft == 0 || left == 0 {
			return
		}
		sel := selected[t]
		n0 := len(sel)
		e.candidates(t, stamp, func(c *candidate) bool {
			if ft == 0 || left == 0 {
				return false
			}
			if c.priority <= 0 && (e.fifo || mode == shares) {
				// Ranked by priority first: the rest are priority 0 too.
				return false
			}
			u := c.u
			if busy(u) || (mode == leftJobs && u.isPair()) || (mode == leftPairs && !u.isPair()) {
				return true
			}
			tp := u.tput(t)
			if tp[0] <= 0 || (u.isPair() && tp[1] <= 0) {
				return true
			}
			if u.sf > ft {
				return true
			}
			ft -= u.sf
			if u.isPair() {
				u.ja.taken, u.jb.taken = stamp, stamp
				left -= 2
			} else {
				u.taken = stamp
				left--
			}
			if sl := e.full[c.ord]; sl.oi < 0 && e.pt.dor[sl.pi] {
				e.activate(sl.pi) // it runs: from now on it has a history
			}
			slab = append(slab, *c)
			sel = append(sel, &slab[len(slab)-1])
			return true
		})
		free[t] = ft
		if len(sel) > n0 || selected[t] != nil {
			selected[t] = sel
		}
	}
	if e.cfg.GavelCompat || e.fifo || e.shuffle {
		for _, t := range order {
			pass(t, all)
		}
		return selected
	}
	for _, mode := range []int{shares, leftJobs, leftPairs} {
		if mode == leftPairs && !e.packing {
			break
		}
		for _, t := range order {
			pass(t, mode)
		}
	}
	return selected
}

// byRank orders candidates by (priority, deficit, X) descending, then by
// unit order: what a stable sort of the units by the first three gives.
func byRank(a, b *candidate) int {
	if a.priority != b.priority {
		if a.priority > b.priority {
			return -1
		}
		return 1
	}
	if a.deficit != b.deficit {
		if a.deficit > b.deficit {
			return -1
		}
		return 1
	}
	if a.x != b.x {
		if a.x > b.x {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.ord, b.ord)
}

// candidates yields this round's units for type t in rank order until
// yield returns false. Trivial units (never ran, no share, no deficit:
// priority, deficit and X all 0) are not ranked one by one: they are
// merged, in unit order, into the ranked others where their all-zero key
// falls, so only as many are visited as selection needs.
//
// The ranking inputs of every type are prepared in one pass over the units
// per round (prepare), which the calls for each type (up to three per type
// in the default mechanism) share: nothing they read changes within a
// round.
//
// Dormant pairs with a job taken (unit.taken == taken) are passed over
// without a visit: selection would skip them, and there may be tens of
// thousands (taken < 0: none is skipped).
func (e *Engine) candidates(t string, taken int, yield func(*candidate) bool) {
	cb := e.prepared(t)
	if cb.needZ {
		e.buildZ(t, cb)
	}
	zs, class, nTriv := cb.z, cb.class, cb.nTriv
	// Trivial units' candidates are made only when visited.
	clear(cb.trivs) // the last call's: no stale units kept alive
	trivs := cb.trivs[:0]
	if cap(trivs) < nTriv {
		trivs = make([]candidate, 0, nTriv)
	}
	// Merge the three streams (ranked, zero, trivial in unit order) by
	// rank: byRank is a total order, so this is the full sort's order.
	i, j, k := 0, 0, 0
	for {
		rc := cb.rankedAt(i)
		if rc == nil && j >= len(zs) && nTriv <= 0 {
			break
		}
		c := rc
		if j < len(zs) && (c == nil || byRank(&zs[j], c) < 0) {
			c = &zs[j]
		}
		if nTriv > 0 {
			// The next trivial unit of the full order: active, or a
			// dormant pair.
			for e.full[k].oi >= 0 && class[e.full[k].oi] != classTrivial {
				k++
			}
			sl := e.full[k]
			if sl.oi < 0 && taken >= 0 {
				// Taken stays taken for the round: skipping now is
				// skipping at its turn.
				jp := e.pt.j[sl.pi]
				if e.snapJobs[jp[0]].taken == taken || e.snapJobs[jp[1]].taken == taken {
					k++
					nTriv--
					continue
				}
			}
			if sl.oi < 0 {
				// A dormant pair's job sizes and throughputs may have
				// changed since it was made.
				sl.u.sf, sl.u.pt = sl.u.ja.sf, e.curPairs[sl.pi].Throughput
			}
			tc := candidate{u: sl.u, ord: k}
			if c == nil || byRank(&tc, c) < 0 {
				trivs = append(trivs, tc)
				c = &trivs[len(trivs)-1]
				k++
				nTriv--
			}
		}
		switch {
		case rc != nil && c == rc:
			i++
		case j < len(zs) && c == &zs[j]:
			j++
		}
		if !yield(c) {
			break
		}
	}
	cb.trivs = trivs
}

// prepared is type t's candidate buffers, prepared for this round.
func (e *Engine) prepared(t string) *candBuf {
	cb := e.candBufs[t]
	if cb == nil || cb.prepRound != e.rounds || cb.prepStamp != e.prepStamp {
		types := []string{t}
		for tt := range e.typeIndex {
			if tt != t {
				types = append(types, tt)
			}
		}
		e.prepare(types)
		cb = e.candBufs[t]
	}
	return cb
}

// buildZ sorts the type's non-trivial priority-0 units by rank. After a
// recompute most keep their key (a unit without a share that did not run
// keeps its deficit), so those keep their order from the last build and
// only the others are sorted, then merged in.
func (e *Engine) buildZ(t string, cb *candBuf) {
	ti, hasT := e.typeIndex[t]
	bi := slices.Index(e.resetTypes, t)
	key := func(u *unit) (float64, float64) {
		x := 0.0
		if hasT && u.xrow != nil {
			x = u.xrow[ti]
		}
		return x, e.deficit(u, t, bi)
	}
	mark := func(u *unit, id int) {
		for len(u.zMark) <= cb.id {
			u.zMark = append(u.zMark, 0)
		}
		u.zMark[cb.id] = id
	}
	e.zBuild++
	id := e.zBuild
	keep := cb.zKeep[:0]
	if cb.zBuilt {
		for _, c := range cb.z {
			u := c.u
			if u.oi < 0 || u.oi >= len(e.order) || e.order[u.oi] != u || cb.class[u.oi] != classZero {
				continue // gone, or no longer of priority 0 here
			}
			if x, d := key(u); x != c.x || d != c.deficit {
				continue
			}
			c.ord = u.idx
			keep = append(keep, c)
			mark(u, id)
		}
	}
	fresh := cb.zFresh[:0]
	for i, u := range e.order {
		if cb.class[i] != classZero || (cb.id < len(u.zMark) && u.zMark[cb.id] == id) {
			continue
		}
		x, d := key(u)
		fresh = append(fresh, candidate{u: u, x: x, deficit: d, ord: u.idx})
		mark(u, id)
	}
	rank := func(a, b candidate) int { return byRank(&a, &b) }
	slices.SortFunc(fresh, rank)
	if !slices.IsSortedFunc(keep, rank) {
		slices.SortFunc(keep, rank) // a backend reordered the units
	}
	z := cb.zAlt[:0]
	i, j := 0, 0
	for i < len(keep) && j < len(fresh) {
		if byRank(&fresh[j], &keep[i]) < 0 {
			z = append(z, fresh[j])
			j++
		} else {
			z = append(z, keep[i])
			i++
		}
	}
	z = append(z, keep[i:]...)
	z = append(z, fresh[j:]...)
	clear(cb.z)
	clear(keep)
	clear(fresh)
	cb.zAlt, cb.zKeep, cb.zFresh = cb.z, keep, fresh
	cb.z, cb.zGen, cb.zKeyGen, cb.zBuild, cb.zBuilt = z, e.zGen, e.zKeyGen, id, true
	cb.needZ = false
}

// prepare computes, for each of types, this round's ranked candidates
// (priority > 0, sorted), the classes of the units and whether the cached
// sorted priority-0 candidates must be rebuilt — in one pass over the
// units for all types.
func (e *Engine) prepare(types []string) {
	// Fractions of the type's received time since the last recompute.
	credit := 0.0
	if e.cfg.GavelCompat {
		credit = e.cfg.RoundS / 2
	}
	if e.candBufs == nil {
		e.candBufs = map[string]*candBuf{}
	}
	n := len(e.order)
	type tstate struct {
		cb     *candBuf
		t      string
		ti, bi int
		hasT   bool
		total  float64
		nZ     int
		zValid bool
		pos    []int // units with a share and a throughput here
	}
	ts := make([]tstate, len(types))
	for q, t := range types {
		cb := e.candBufs[t]
		if cb == nil {
			cb = &candBuf{id: len(e.candBufs)}
			e.candBufs[t] = cb
		}
		if cap(cb.recv) < n {
			cb.recv = make([]float64, n)
			cb.class = make([]uint8, n)
		}
		cb.recv, cb.class = cb.recv[:n], cb.class[:n]
		// Units of priority 0 that are not trivial (no share here, or no
		// throughput, but a history) keep their key — deficit and X —
		// until the next recompute or change of units: their sorted order
		// is kept from round to round, and only the units with a priority
		// are sorted.
		if cb.zBuilt && cb.zKeyGen == e.zKeyGen && cb.zGen != e.zGen {
			// Only the units changed (arrivals, departures): keys are the
			// same, so drop the units that left and keep the order, which
			// a backend listing jobs in arrival order preserves (checked).
			z := cb.z[:0]
			for _, c := range cb.z {
				if c.u.seen == e.stamp {
					c.ord = c.u.idx // moved with the departures
					z = append(z, c)
				}
			}
			clear(cb.z[len(z):])
			if !slices.IsSortedFunc(z, func(a, b candidate) int { return byRank(&a, &b) }) {
				slices.SortFunc(z, func(a, b candidate) int { return byRank(&a, &b) })
			}
			cb.z, cb.zGen = z, e.zGen
		}
		ti, hasT := e.typeIndex[t]
		ts[q] = tstate{cb: cb, t: t, ti: ti, hasT: hasT, bi: slices.Index(e.resetTypes, t),
			zValid: cb.zBuilt && cb.zGen == e.zGen && cb.zKeyGen == e.zKeyGen, pos: cb.pos[:0]}
	}
	nTriv := 0
	// The full order: dormant pairs are trivial units, and count in the
	// totals (compat's half-round credit) in their place.
	for _, sl := range e.full {
		if sl.oi < 0 {
			if credit != 0 {
				for q := range ts {
					ts[q].total += 0 + credit
				}
			}
			nTriv++
			continue
		}
		i, u := int(sl.oi), sl.u
		if u.trivial() {
			for q := range ts {
				s := &ts[q]
				s.cb.class[i] = classTrivial
				s.cb.recv[i] = 0 + credit
				s.total += s.cb.recv[i]
			}
			nTriv++
			continue
		}
		for q := range ts {
			s := &ts[q]
			b := e.baseline(u, s.t, s.bi)
			var c float64
			if u.isPair() && s.bi >= 0 {
				c = e.pairCum(u, s.bi)
			} else {
				c = u.cum[s.t]
			}
			s.cb.recv[i] = c - b + credit
			s.total += s.cb.recv[i]
			x := 0.0
			if s.hasT && u.xrow != nil {
				x = u.xrow[s.ti]
			}
			if x != 0 {
				tp := u.tput(s.t)
				if !(tp[0] <= 0 || (u.isPair() && tp[1] <= 0)) {
					s.cb.class[i] = classRanked
					s.pos = append(s.pos, i)
					continue
				}
			}
			s.cb.class[i] = classZero
			s.nZ++
			if s.zValid && (s.cb.id >= len(u.zMark) || u.zMark[s.cb.id] != s.cb.zBuild) {
				s.zValid = false
			}
		}
	}
	e.prepStamp++
	for q := range ts {
		s := &ts[q]
		cb := s.cb
		clear(cb.ranked)
		clear(cb.heap)
		ranked := cb.heap[:0]
		for _, i := range s.pos {
			u := e.order[i]
			x := u.xrow[s.ti]
			var priority float64
			if s.total == 0 || cb.recv[i] <= 0 {
				priority = x * 1e9 // never ran on this type since the reset: first
			} else {
				priority = x / (cb.recv[i] / s.total)
			}
			if priority == 0 {
				// Underflow: ranked with the priority-0 units.
				cb.class[i] = classZero
				s.nZ++
				s.zValid = false
				continue
			}
			ranked = append(ranked, candidate{u: u, priority: priority, x: x, deficit: e.deficit(u, s.t, s.bi), ord: u.idx})
		}
		// Sorted lazily (rankedAt): selection usually stops long before
		// the last ranked unit.
		heapify(ranked)
		if cap(cb.ranked) < len(ranked) {
			cb.ranked = make([]candidate, 0, len(ranked))
		}
		cb.heap, cb.ranked = ranked, cb.ranked[:0]
		cb.pos, cb.nTriv = s.pos, nTriv
		cb.needZ = !s.zValid || s.nZ != len(cb.z)
		cb.prepRound, cb.prepStamp = e.rounds, e.prepStamp
	}
}

// rankedAt is the i-th ranked candidate (nil: fewer), sorting as far as
// i. ranked's capacity holds them all: a pointer into it stays valid.
func (cb *candBuf) rankedAt(i int) *candidate {
	for len(cb.ranked) <= i {
		if len(cb.heap) == 0 {
			return nil
		}
		cb.ranked = append(cb.ranked, cb.heap[0])
		n := len(cb.heap) - 1
		cb.heap[0] = cb.heap[n]
		cb.heap[n] = candidate{}
		cb.heap = cb.heap[:n]
		siftDown(cb.heap, 0)
	}
	return &cb.ranked[i]
}

// sortAll sorts every ranked candidate into ranked.
func (cb *candBuf) sortAll() {
	if n := len(cb.ranked) + len(cb.heap); n > 0 {
		cb.rankedAt(n - 1)
	}
}

// heapify makes h a min-heap by byRank (a total order: popping it gives
// the full sort's order exactly).
func heapify(h []candidate) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

func siftDown(h []candidate, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && byRank(&h[r], &h[l]) < 0 {
			m = r
		}
		if byRank(&h[m], &h[i]) >= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// Unit classes in candidates.
const (
	classTrivial uint8 = iota
	classRanked
	classZero
)

// candBuf is one type's reusable buffers for candidates, and its cached
// sorted non-trivial priority-0 candidates (valid while zGen and zKeyGen
// are the engine's; zBuild marks the members, in unit.zMark[id]).
type candBuf struct {
	id    int
	recv  []float64
	class []uint8
	// ranked is the ranked candidates in rank order, as far as sorted:
	// the rest are the min-heap heap (rankedAt takes from it).
	ranked  []candidate
	heap    []candidate
	trivs   []candidate
	z       []candidate
	zAlt    []candidate // buildZ's buffers
	zKeep   []candidate
	zFresh  []candidate
	zGen    int
	zKeyGen int
	zBuild  int
	zBuilt  bool
	// This round's preparation (prepare): valid while prepRound and
	// prepStamp are the engine's.
	pos       []int
	nTriv     int
	needZ     bool
	prepRound int
	prepStamp int
}

// place assigns GPUs per type, units in decreasing scale factor: first a
// unit keeps its previous GPUs when it stays on the type and they are free,
// then the rest are packed on as few servers as possible. In compat mode,
// jobs absent from the allocation (arrived after the last recompute) are
// selected but not placed, as in the reference.
func (e *Engine) place(s *Snapshot, order []string, selected map[string][]*candidate) []Assignment {
	if e.prevAt == nil {
		e.prevAt = make(map[string]int, len(s.Running))
	}
	prevAt := e.prevAt
	clear(prevAt)
	for i, a := range s.Running {
		prevAt[UnitKey(a.Jobs)] = i
	}
	prev := func(key string) (*Assignment, bool) {
		if i, ok := prevAt[key]; ok {
			return &s.Running[i], true
		}
		return nil, false
	}
	var out []Assignment
	if n := len(s.Running) + 8; cap(e.spareRunning) >= n && e.pr == nil {
		out, e.spareRunning = e.spareRunning[:0], nil
	} else {
		out = make([]Assignment, 0, n)
	}
	for _, t := range order {
		cl := e.clusterFor(s.GPUs, t)
		if e.pr != nil {
			out = e.pr.placeFixed(cl, t, out) // pinned, kept, the gang, backfill
		}
		cands := selected[t]
		slices.SortStableFunc(cands, func(a, b *candidate) int { return cmp.Compare(b.u.sf, a.u.sf) })
		if !e.cfg.GavelCompat || e.cfg.CheckpointAware {
			// Renew every lease first, whatever its size: on a real cluster
			// a move is a checkpoint and restart, so a kept job must not lose
			// its GPUs to a larger newcomer that can go elsewhere. (Gavel
			// places strictly by decreasing scale factor; GavelCompat keeps
			// that, unless CheckpointAware: a move within a type is not
			// weighed, so none is made.) Newcomers still go by decreasing
			// scale factor onto the fewest servers among the GPUs left.
			var rest []*candidate
			for _, c := range cands {
				if a, ok := prev(c.u.key); ok && a.Type == t && cl.allFree(a.GPUs) {
					cl.take(a.GPUs)
					out = append(out, cl.assignment(c, t, a.GPUs, Keep))
					continue
				}
				rest = append(rest, c)
			}
			cands = rest
		}
		for i := 0; i < len(cands); {
			sf := cands[i].u.sf
			end := i
			for end < len(cands) && cands[end].u.sf == sf {
				end++
			}
			group := cands[i:end]
			placed := make([]bool, len(group))
			for k, c := range group {
				if a, ok := prev(c.u.key); ok && a.Type == t && cl.allFree(a.GPUs) {
					cl.take(a.GPUs)
					out = append(out, cl.assignment(c, t, a.GPUs, Keep))
					placed[k] = true
				}
			}
			for k, c := range group {
				if placed[k] {
					continue
				}
				if e.cfg.GavelCompat && !c.u.inX {
					continue
				}
				ids := e.pickNew(cl, t, sf)
				if ids == nil {
					panic(fmt.Sprintf("engine: cannot place %s on %d %s GPUs", c.u.key, sf, t))
				}
				out = append(out, cl.assignment(c, t, ids, Start))
			}
			i = end
		}
	}
	return out
}

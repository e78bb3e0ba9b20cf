package engine

import (
	"cmp"
	"fmt"
	"slices"
)

// Preemption that respects the work (#21): three options, all off by
// default, applied around Gavel's selection. With all three off none of
// this runs (Engine.pre) and the round is Gavel's.
//
//   - Minimum runtime (Config.MinRuntimeS): a running unit whose GPUs are
//     all healthy and still the engine's is pinned until its run's start
//     (Job.RunSinceS, else when a plan of this engine started it) plus
//     MinRuntimeS: it is selected before the greedy pass, on exactly those
//     GPUs (Reason Pinned). Its received time keeps counting, so its
//     priority falls while it is pinned and it yields once the pin ends:
//     fairness over time holds, at the grain of the minimum runtime. A
//     failed GPU, or GPUs the VC layers no longer give this engine, end
//     the pin.
//   - Checkpoint-aware choice (Config.CheckpointAware): per type, the
//     running units Gavel stops or moves to another type (victims) and
//     the units it starts afresh or moves in (starters) are weighed
//     again, a victim by its priority times what a stop loses (work since
//     its last checkpoint, its restore), a starter by its priority less
//     what its start costs (its restore; a move also its unsaved work); a
//     greedy by that value stops the victim that loses least and skips a
//     start or a move that costs more than it gains. A victim still stopped with more unsaved work than a
//     checkpoint takes gets one round's notice (JobIntent.Checkpoint):
//     planned, the stop then loses only the restore. A notice means a
//     stop: the round after, the noticed job is neither kept, pinned nor
//     selected elsewhere, unless GPUs would otherwise stay idle.
//   - Reservations (Config.ReserveAfterS): the gang (scale factor > 1)
//     that has waited longest, once it has waited ReserveAfterS, gets GPUs
//     reserved from StartS, when the pins on them end (one reservation
//     per engine, as Slurm's backfill reserves for its top job only).
//     Until then the reserved GPUs no pinned unit holds stay out of the
//     greedy pass and only take jobs that finish, or may be stopped, by
//     StartS (backfill); at StartS the gang starts on them.
//
// Round order: preBegin (last round's noticed jobs held out; the pins;
// the reservation, made or brought up to date, its start, or its GPUs
// held back) → selectUnits → preSelected (checkpoint-aware choice,
// notices, backfill, the final fill of idle GPUs) → place (held units
// first: placeFixed) → preFinish (the reservation dropped if the gang ran
// elsewhere, notices to its holders, records).

// preRound is one round's state of these rules.
type preRound struct {
	s       *Snapshot
	jobs    map[string]*Job
	healthy map[string]*GPU        // the snapshot's healthy GPUs
	ran     map[string]*Assignment // job -> its assignment last round
	h       float64                // the horizon losses are weighed over
	pinned  map[*unit]bool
	pinEnd  map[string]float64     // GPU -> the pin end of the unit on it
	fixed   map[string][]fixedUnit // per type: placed before the others
	claimed map[string]bool        // their GPUs
	// reserved: the GPUs of the reservation in force at the round's
	// start (no victim there is kept); resv: that reservation while it
	// still waits, blocked its GPUs no pinned unit holds (inBlock: as a
	// set) and backfill the units that run there meanwhile.
	reserved map[string]bool
	resv     *Reservation
	blocked  []string
	inBlock  map[string]bool
	backfill []fixedUnit
	remade   *Reservation    // dropped this round, to be remade
	noticed  map[string]bool // jobs noticed this round
	// barred: the units of the jobs noticed last round, held out of
	// every pass but the final fill of GPUs that would stay idle; refill:
	// a migrant stayed, its start's GPUs are for the units left.
	barred []*unit
	refill bool
	rank   map[string]rankIndex
}

// rankIndex is a type's ranked candidates by unit (candOf).
type rankIndex struct {
	stamp int
	at    map[*unit]int
}

// fixedUnit is a unit placed before selection's: on gpus with act, or a
// backfiller (gpus nil: anywhere in the reservation).
type fixedUnit struct {
	c          candidate
	gpus       []string
	act        Action
	why        *Reason
	checkpoint bool
}

func (pr *preRound) fix(t string, f fixedUnit) {
	pr.fixed[t] = append(pr.fixed[t], f)
	for _, g := range f.gpus {
		pr.claimed[g] = true
	}
}

// taken reports whether a held unit has one of gpus (a backend that shows
// two running units on one GPU must not make placement fail).
func (pr *preRound) taken(gpus []string) bool {
	return slices.ContainsFunc(gpus, func(g string) bool { return pr.claimed[g] })
}

// preBegin sets up the round's state and takes, before selection, the
// pinned units and a reservation's gang when its time has come (their
// free[t] consumed), or holds the reservation's GPUs back; the
// reservation is made here, from what the snapshot shows, so that the
// round that makes it already holds its GPUs back.
func (e *Engine) preBegin(s *Snapshot, order []string, free map[string]int) {
	pr := &preRound{s: s, jobs: make(map[string]*Job, len(s.Jobs)), healthy: make(map[string]*GPU, len(s.GPUs)),
		ran: map[string]*Assignment{}, h: max(e.cfg.RoundS, e.cfg.MinRuntimeS), pinned: map[*unit]bool{},
		pinEnd: map[string]float64{}, fixed: map[string][]fixedUnit{}, claimed: map[string]bool{}, noticed: map[string]bool{},
		rank: map[string]rankIndex{}}
	e.pr, e.preTaken = pr, 0
	for i := range s.Jobs {
		pr.jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for i := range s.GPUs {
		if !s.GPUs[i].Failed {
			pr.healthy[s.GPUs[i].ID] = &s.GPUs[i]
		}
	}
	for i := range s.Running {
		for _, id := range s.Running[i].Jobs {
			pr.ran[id] = &s.Running[i]
		}
	}
	if e.cfg.ReserveAfterS > 0 {
		e.noteWaiting(pr)
	}
	e.bar(pr)
	if e.cfg.MinRuntimeS > 0 {
		e.pin(pr, free)
	}
	if e.resv != nil || e.cfg.ReserveAfterS > 0 {
		e.reservationRound(pr, order, free)
	}
}

// bar holds the jobs noticed last round out of this round: a notice
// means a stop (the lease's stop_at), so they are neither kept, pinned,
// weighed nor selected elsewhere; only the final fill (fillIdle) may run
// them again, on GPUs that would otherwise stay idle.
func (e *Engine) bar(pr *preRound) {
	for id := range e.noticed {
		if pr.jobs[id] == nil {
			continue
		}
		u := e.units[ukey{id, ""}]
		if u == nil || u.oi < 0 || u.oi >= len(e.order) || e.order[u.oi] != u || u.taken == e.rounds {
			continue
		}
		u.taken = e.rounds // its pairs too: they test their jobs' units
		e.preTaken++
		pr.barred = append(pr.barred, u)
	}
	// The map's order must not reach the plan.
	slices.SortFunc(pr.barred, func(a, b *unit) int { return cmp.Compare(a.idx, b.idx) })
}

// runSince is when the job's current run began: the backend's RunSinceS,
// else when a plan of this engine started it; false when neither knows.
func (e *Engine) runSince(j *Job) (float64, bool) {
	if j.RunSinceS > 0 {
		return j.RunSinceS, true
	}
	v, ok := e.runStart[j.ID]
	return v, ok
}

// unitSince is when the unit's run began: a pair's, when the later of its
// jobs' did.
func (e *Engine) unitSince(pr *preRound, u *unit) (float64, bool) {
	since, known := 0.0, false
	for _, id := range u.jobs {
		if v, ok := e.runSince(pr.jobs[id]); ok && (!known || v > since) {
			since, known = v, true
		}
	}
	return since, known
}

// unsaved is the running job's work since its last checkpoint, in
// seconds (a run starts from one); 0 when nothing says when either was.
func (e *Engine) unsaved(pr *preRound, j *Job) float64 {
	ref := j.CheckpointAtS
	if v, ok := e.runSince(j); ok {
		ref = max(ref, v)
	} else if ref <= 0 {
		return 0
	}
	return max(pr.s.TimeS-ref, 0)
}

// runningUnit is the engine's unit for last round's assignment a and the
// GPUs that identify its placement (an elastic job's first ScaleFactor),
// or nil when the rules cannot hold it there: a job gone, a pair that is
// no unit, a two-role elastic job (its sizer's), a GPU failed or no
// longer the engine's, or a type it cannot run on.
func (e *Engine) runningUnit(pr *preRound, a *Assignment) (*unit, []string) {
	k, ok := keyOf(a.Jobs)
	if !ok {
		return nil, nil
	}
	u := e.units[k]
	if u == nil || u.oi < 0 || u.oi >= len(e.order) || e.order[u.oi] != u {
		return nil, nil
	}
	var j *Job
	for _, id := range a.Jobs {
		if j = pr.jobs[id]; j == nil || j.Elastic.TwoRole() {
			return nil, nil
		}
	}
	gpus := base(j, a)
	if len(gpus) != u.sf {
		return nil, nil
	}
	for _, g := range gpus {
		if x := pr.healthy[g]; x == nil || x.Type != a.Type {
			return nil, nil
		}
	}
	if tp := u.tput(a.Type); tp[0] <= 0 || (u.isPair() && tp[1] <= 0) {
		return nil, nil
	}
	return u, gpus
}

// holdUnit takes the unit for this round, as selection does.
func (e *Engine) holdUnit(u *unit) {
	if u.isPair() {
		u.ja.taken, u.jb.taken = e.rounds, e.rounds
		e.preTaken += 2
		return
	}
	u.taken = e.rounds
	e.preTaken++
}

// releaseUnit undoes selection's take of the unit.
func (e *Engine) releaseUnit(u *unit) {
	if u.isPair() {
		u.ja.taken, u.jb.taken = 0, 0
		return
	}
	u.taken = 0
}

func (e *Engine) unitTaken(u *unit) bool {
	if u.isPair() {
		return u.ja.taken == e.rounds || u.jb.taken == e.rounds
	}
	return u.taken == e.rounds
}

// candOf is the unit's candidate on type t this round (its priority,
// deficit and X as selection ranks it).
func (e *Engine) candOf(t string, u *unit) candidate {
	cb := e.prepared(t)
	if u.oi >= 0 && u.oi < len(cb.class) && cb.class[u.oi] == classRanked {
		ri := e.pr.rank[t]
		if ri.at == nil || ri.stamp != cb.prepStamp {
			cb.sortAll() // positions final from here on
			ri = rankIndex{stamp: cb.prepStamp, at: make(map[*unit]int, len(cb.ranked))}
			for i := range cb.ranked {
				ri.at[cb.ranked[i].u] = i
			}
			e.pr.rank[t] = ri
		}
		if i, ok := ri.at[u]; ok {
			return cb.ranked[i]
		}
	}
	x := 0.0
	if ti, ok := e.typeIndex[t]; ok && u.xrow != nil {
		x = u.xrow[ti]
	}
	return candidate{u: u, x: x, deficit: e.deficit(u, t, slices.Index(e.resetTypes, t)), ord: u.idx}
}

// pin selects the pinned units, on their type and GPUs.
func (e *Engine) pin(pr *preRound, free map[string]int) {
	for i := range pr.s.Running {
		a := &pr.s.Running[i]
		u, gpus := e.runningUnit(pr, a)
		if u == nil || e.unitTaken(u) || pr.taken(gpus) {
			continue
		}
		since, ok := e.unitSince(pr, u)
		end := since + e.cfg.MinRuntimeS
		if !ok || !(pr.s.TimeS < end) || free[a.Type] < u.sf {
			continue
		}
		c := e.candOf(a.Type, u)
		pr.fix(a.Type, fixedUnit{c: c, gpus: gpus, act: Keep,
			why: &Reason{Kind: Pinned, Until: end, Priority: c.priority, To: a.Type}})
		e.holdUnit(u)
		free[a.Type] -= u.sf
		pr.pinned[u] = true
		for _, g := range gpus {
			pr.pinEnd[g] = end
		}
	}
}

// noteWaiting records when each job last ran (its arrival before).
func (e *Engine) noteWaiting(pr *preRound) {
	if e.waitSince == nil {
		e.waitSince = map[string]float64{}
	}
	for i := range pr.s.Jobs {
		j := &pr.s.Jobs[i]
		if pr.ran[j.ID] != nil {
			e.waitSince[j.ID] = pr.s.TimeS
		} else if _, ok := e.waitSince[j.ID]; !ok {
			e.waitSince[j.ID] = j.ArrivalS
		}
	}
	for id := range e.waitSince {
		if pr.jobs[id] == nil {
			delete(e.waitSince, id)
		}
	}
}

// gangUnit is the reservation's job's unit when it can still start on
// gpus of t (else the reservation is remade).
func (e *Engine) gangUnit(pr *preRound, j *Job, t string, gpus []string) *unit {
	u := e.units[ukey{j.ID, ""}]
	if u == nil || u.oi < 0 || u.oi >= len(e.order) || e.order[u.oi] != u || u.sf != len(gpus) ||
		!(j.Throughput[t] > 0) || e.unitTaken(u) {
		return nil
	}
	for _, g := range gpus {
		if x := pr.healthy[g]; x == nil || x.Type != t {
			return nil
		}
	}
	return u
}

// reservationRound brings the reservation in force up to date before
// selection: dropped when its job left or runs, remade when a reserved
// GPU failed or left; StartS from the current pins. With none in force
// one is made (reserve). Due, its gang is taken on the reserved GPUs;
// else those no pinned unit holds are kept from selection.
func (e *Engine) reservationRound(pr *preRound, order []string, free map[string]int) {
	now := pr.s.TimeS
	if r := e.resv; r != nil {
		j := pr.jobs[r.Job]
		switch {
		case j == nil || pr.ran[r.Job] != nil:
			e.resv = nil
		case e.gangUnit(pr, j, r.Type, r.GPUs) == nil:
			pr.remade, e.resv = r, nil
		default:
			start := now
			for _, g := range r.GPUs {
				if end, ok := pr.pinEnd[g]; ok {
					start = max(start, end)
				}
			}
			r.StartS = start
		}
	}
	if e.resv == nil && e.cfg.ReserveAfterS > 0 {
		e.reserve(pr, order)
	}
	r := e.resv
	if r == nil {
		return
	}
	u := e.gangUnit(pr, pr.jobs[r.Job], r.Type, r.GPUs)
	if u == nil {
		e.resv = nil // made on GPUs it cannot take: not possible
		return
	}
	pr.reserved = make(map[string]bool, len(r.GPUs))
	for _, g := range r.GPUs {
		pr.reserved[g] = true
	}
	if r.StartS <= now {
		// Its other holders are displaced (they may be selected elsewhere).
		c := e.candOf(r.Type, u)
		pr.fix(r.Type, fixedUnit{c: c, gpus: slices.Clone(r.GPUs), act: Start})
		e.holdUnit(u)
		free[r.Type] -= u.sf
		e.resv = nil // used
		return
	}
	pr.resv, pr.inBlock = r, map[string]bool{}
	for _, g := range r.GPUs {
		if _, ok := pr.pinEnd[g]; !ok {
			pr.blocked = append(pr.blocked, g)
			pr.inBlock[g] = true
		}
	}
	free[r.Type] -= len(pr.blocked)
}

// preSelected runs after selection: the checkpoint-aware choice and its
// notices per type, then the reservation's backfill, then the final fill.
func (e *Engine) preSelected(order []string, selected map[string][]*candidate, free map[string]int) {
	pr := e.pr
	if e.cfg.CheckpointAware {
		e.choose(pr, order, selected, free)
	}
	if pr.resv != nil && len(pr.blocked) > 0 {
		e.backfillPass(pr, selected, free)
	}
	if pr.refill || len(pr.barred) > 0 {
		e.fillIdle(order, selected, free)
	}
}

// fillIdle is the final fill: the GPUs every pass left free (outside a
// reservation's held-back GPUs; a migrant that stayed left its start's)
// go to the units left, as selection would hand them out; then what is
// still free to the barred ones (noticed last round) too.
func (e *Engine) fillIdle(order []string, selected map[string][]*candidate, free map[string]int) {
	idle := func() bool {
		return slices.ContainsFunc(order, func(t string) bool { return free[t] > 0 })
	}
	add := func() {
		for t, cs := range e.selectUnits(order, free) {
			selected[t] = append(selected[t], cs...)
		}
	}
	if e.pr.refill && idle() {
		add()
	}
	if len(e.pr.barred) == 0 || !idle() {
		return
	}
	for _, u := range e.pr.barred {
		e.releaseUnit(u)
		e.preTaken--
	}
	add()
}

// weighed is a victim or a starter in the checkpoint-aware choice.
type weighed struct {
	c      candidate
	gpus   []string // a victim's
	value  float64
	victim bool
	mig    *migrant // a migrant's entry (victim on its type, starter on the other)
	in     bool     // chosen
	notice bool
	forced bool // in, whatever its value (a migrant that stays)
	out    bool // no longer weighed here
}

// migrant is a running unit that selection moves to another type: a
// victim where it ran, a starter where selection took it.
type migrant struct {
	u        *unit
	from, to string
	v, s     *weighed // its entries on from and on to (s nil: to is not weighed)
	home     bool     // it stays on from (kept, or with a notice)
}

// choose is the checkpoint-aware choice. Per type, victims are the units
// that ran there last round, unpinned, on healthy GPUs outside a
// reservation, that selection left out or took on another type
// (migrants); starters the units it selected there none of whose jobs ran
// (admissions and resumes) and the migrants coming in. A type none of
// whose units stops or leaves keeps Gavel's choice. On every other type
// a greedy by value over its victims and starters, on the GPUs the
// starters took and those left free, decides which run; then a victim
// still out that has unsaved work gets a notice, and keeps its GPUs this
// round, if dropping the lowest-valued starters makes room (weighType).
//
// A migrant that wins its place back, or gets a notice, stays where it
// ran (Keep); its place on the new type goes to the next entries there
// and, where none fits, to the units left (the final fill); one that
// loses where it ran and wins on the new type moves; one that loses on
// both stops. Types are weighed twice: first to learn which migrants
// stay, then again with those kept (and their notices) and their starts
// gone, the migrants that leave no longer victims.
//
// Values: a victim p·(1 + loss/H), loss its unsaved work (none once
// noticed; at most H, so the value is at most p·(2 + restore/H)) plus its
// restore; a starter p·max(0.1, 1 − cost/H), cost its restore, and for a
// migrant its restore plus its unsaved work (a move pays both); p the
// unit's priority on the type, H = max(RoundS, MinRuntimeS). Ties go to
// the victim: no move. A pair weighs its costlier job (its GPUs redo
// that).
func (e *Engine) choose(pr *preRound, order []string, selected map[string][]*candidate, free map[string]int) {
	selOn := map[*unit]string{}
	for _, t := range order {
		for _, c := range selected[t] {
			selOn[c.u] = t
		}
	}
	ws := map[string][]*weighed{}
	migOf := map[*unit]*migrant{}
	var migs []*migrant
	victimGPU := map[string]bool{} // a backend that shows two units on a GPU: the first
	for i := range pr.s.Running {
		a := &pr.s.Running[i]
		t := a.Type
		u, gpus := e.runningUnit(pr, a)
		if u == nil || pr.pinned[u] || migOf[u] != nil || pr.taken(gpus) ||
			slices.ContainsFunc(gpus, func(g string) bool { return pr.reserved[g] || victimGPU[g] }) {
			continue
		}
		to := ""
		if e.unitTaken(u) {
			nt, ok := selOn[u]
			if !ok || nt == t {
				continue // held before selection, or kept on its type
			}
			to = nt
		}
		c := e.candOf(t, u)
		if e.fifo && c.priority <= 0 {
			continue // FIFO runs no unit without a share
		}
		loss := 0.0
		for _, id := range u.jobs {
			j := pr.jobs[id]
			l := j.RestoreS
			if !e.noticed[id] {
				// At most H: a job that never checkpoints on its own
				// must not grow a keep bonus that never lets it stop.
				l += min(e.unsaved(pr, j), pr.h)
			}
			loss = max(loss, l)
		}
		w := &weighed{c: c, gpus: gpus, value: c.priority * (1 + loss/pr.h), victim: true}
		ws[t] = append(ws[t], w)
		for _, g := range gpus {
			victimGPU[g] = true
		}
		if to != "" {
			m := &migrant{u: u, from: t, to: to, v: w}
			w.mig = m
			migOf[u] = m
			migs = append(migs, m)
		}
	}
	if len(ws) == 0 {
		return // nobody stopped or moved: Gavel's choice stands
	}
	// The count, as selection's: the starters' GPUs and those left free
	// (the victims' GPUs are among them, unless a migration took them).
	room := map[string]int{}
	for _, t := range order {
		if ws[t] == nil {
			continue
		}
		room[t] = free[t]
		for _, c := range selected[t] {
			m := migOf[c.u]
			if m == nil && slices.ContainsFunc(c.u.jobs, func(id string) bool { return pr.ran[id] != nil }) {
				continue // kept, or moved as Gavel decided
			}
			cost := 0.0
			for _, id := range c.u.jobs {
				j := pr.jobs[id]
				v := j.RestoreS
				if m != nil {
					v += e.unsaved(pr, j)
				}
				cost = max(cost, v)
			}
			w := &weighed{c: *c, value: c.priority * max(0.1, 1-cost/pr.h), mig: m}
			if m != nil {
				m.s = w
			}
			ws[t] = append(ws[t], w)
			room[t] += c.u.sf
		}
		slices.SortStableFunc(ws[t], func(a, b *weighed) int {
			switch {
			case a.value > b.value:
				return -1
			case a.value < b.value:
				return 1
			case a.victim != b.victim:
				if a.victim {
					return -1
				}
				return 1
			}
			return byRank(&a.c, &b.c)
		})
	}
	left := map[string]int{}
	pass := func() {
		for _, t := range order {
			if ws[t] != nil {
				left[t] = e.weighType(pr, ws[t], room[t])
			}
		}
	}
	pass()
	if len(migs) > 0 {
		for _, m := range migs {
			m.home = m.v.in
			if m.home {
				m.v.forced = true // with its notice, if it got one
				if m.s != nil {
					m.s.out = true
				}
			} else {
				m.v.out = true
			}
		}
		pass()
	}
	var dropped map[*unit]bool
	drop := func(u *unit) {
		if dropped == nil {
			dropped = map[*unit]bool{}
		}
		dropped[u] = true
	}
	for _, t := range order {
		for _, w := range ws[t] {
			u := w.c.u
			switch {
			case w.out:
			case w.victim && w.in:
				f := fixedUnit{c: w.c, gpus: w.gpus, act: Keep}
				if w.notice {
					f.why = &Reason{Kind: Noticed, Priority: w.c.priority, To: t}
					f.checkpoint = true
					for _, id := range u.jobs {
						pr.noticed[id] = true
					}
				}
				pr.fix(t, f)
				if m := w.mig; m != nil {
					// It stays: its start on the new type is undone.
					drop(u)
					if m.s == nil {
						free[m.to] += u.sf
					}
					pr.refill = true
					continue
				}
				e.holdUnit(u)
			case !w.victim && !w.in:
				drop(u)
				e.releaseUnit(u)
			}
		}
	}
	for t := range left {
		free[t] = left[t]
	}
	if dropped != nil {
		for _, t := range order {
			selected[t] = slices.DeleteFunc(selected[t], func(c *candidate) bool { return dropped[c.u] })
		}
	}
}

// weighType decides one type: entries forced in first, then a greedy by
// value (ws is in value order) on room GPUs, then the notices; it returns
// the GPUs left free.
func (e *Engine) weighType(pr *preRound, ws []*weighed, room int) int {
	for _, w := range ws {
		w.in = w.forced && !w.out
		if !w.forced {
			w.notice = false
		}
		if w.in {
			room -= w.c.u.sf
		}
	}
	fill := func() {
		for _, w := range ws {
			if !w.in && !w.out && w.c.u.sf <= room {
				w.in = true
				room -= w.c.u.sf
			}
		}
	}
	fill()
	noticed := false
	for _, w := range ws {
		if !w.victim || w.in || w.out || !e.mayNotice(pr, w.c.u.jobs) {
			continue
		}
		need := w.c.u.sf
		if room < need {
			more := 0
			for _, x := range ws {
				if !x.victim && x.in {
					more += x.c.u.sf
				}
			}
			if room+more < need {
				continue
			}
			for k := len(ws) - 1; k >= 0 && room < need; k-- {
				if x := ws[k]; !x.victim && x.in {
					x.in = false
					room += x.c.u.sf
				}
			}
		}
		w.in, w.notice, noticed = true, true, true
		room -= need
	}
	if noticed {
		fill() // what a dropped starter left, if anyone fits there
	}
	return room
}

// mayNotice reports whether the running jobs may get a notice: none was
// noticed last round (no second notice: it stops) and one has more work
// since its last checkpoint than a checkpoint takes it.
func (e *Engine) mayNotice(pr *preRound, jobs []string) bool {
	due := false
	for _, id := range jobs {
		j := pr.jobs[id]
		if j == nil || e.noticed[id] {
			return false
		}
		due = due || e.unsaved(pr, j) > j.CheckpointS
	}
	return due
}

// backfillPass gives the reserved GPUs held back this round to single
// jobs, in rank order on the reservation's type, that fit in what is left
// of them and either finish before StartS (after their restore) or may be
// stopped by then: a job starting now is pinned for MinRuntimeS; one
// that ran there last round is past its pin (a pinned one holds GPUs that
// are not held back) and keeps its GPUs. A job selection chose on the
// type that ran there keeps them first (rather than move within its
// type): the GPUs it counted on outside go back to selection's free count.
func (e *Engine) backfillPass(pr *preRound, selected map[string][]*candidate, free map[string]int) {
	r, now := pr.resv, pr.s.TimeS
	t, left := r.Type, len(pr.blocked)
	inside := func(u *unit) []string {
		a := pr.ran[u.key]
		if u.isPair() || a == nil || len(a.Jobs) != 1 || a.Type != t {
			return nil
		}
		j := pr.jobs[u.key]
		if j == nil || j.Elastic != nil {
			return nil
		}
		if g := base(j, a); len(g) == u.sf && !slices.ContainsFunc(g, func(id string) bool { return !pr.inBlock[id] }) {
			return g
		}
		return nil
	}
	moved := false
	for _, c := range selected[t] {
		g := inside(c.u)
		if g == nil || c.u.sf > left {
			continue
		}
		pr.backfill = append(pr.backfill, fixedUnit{c: *c, gpus: g,
			why: &Reason{Kind: Backfills, Until: r.StartS, Priority: c.priority, To: t}})
		left -= c.u.sf
		free[t] += c.u.sf
		c.u = nil
		moved = true
	}
	if moved {
		selected[t] = slices.DeleteFunc(selected[t], func(c *candidate) bool { return c.u == nil })
		pr.refill = true // the GPUs they leave outside
	}
	e.candidates(t, e.rounds, func(c *candidate) bool {
		if left == 0 || (e.fifo && c.priority <= 0) {
			return false
		}
		u := c.u
		if u.isPair() || u.sf > left || e.unitTaken(u) || u.key == r.Job || !(u.jt[t] > 0) {
			return true
		}
		j := pr.jobs[u.key]
		if j == nil || j.Elastic.TwoRole() {
			return true
		}
		var keep []string
		if a := pr.ran[j.ID]; a != nil && len(a.Jobs) == 1 && a.Type == t {
			if g := base(j, a); len(g) == u.sf && !slices.ContainsFunc(g, func(id string) bool { return !pr.inBlock[id] }) {
				keep = g
			}
		}
		restore := j.RestoreS
		if keep != nil {
			restore = 0
		}
		finishes := j.RemainingSteps > 0 && restore+j.RemainingSteps/u.jt[t] <= r.StartS-now
		stoppable := keep != nil || now+e.cfg.MinRuntimeS <= r.StartS
		if !finishes && !stoppable {
			return true
		}
		pr.backfill = append(pr.backfill, fixedUnit{c: *c, gpus: keep,
			why: &Reason{Kind: Backfills, Until: r.StartS, Priority: c.priority, To: t}})
		e.holdUnit(u)
		left -= u.sf
		return true
	})
}

// placeFixed places type t's held units before any other: pinned, kept
// and noticed units and a gang on their GPUs, then backfillers inside the
// reservation (on their GPUs if they ran there); the reserved GPUs left
// stay idle.
func (pr *preRound) placeFixed(cl *cluster, t string, out []Assignment) []Assignment {
	put := func(f *fixedUnit, ids []string, act Action) {
		a := cl.assignment(&f.c, t, ids, act)
		a.Why, a.Checkpoint = f.why, f.checkpoint
		out = append(out, a)
	}
	for i := range pr.fixed[t] {
		f := &pr.fixed[t][i]
		if !cl.allFree(f.gpus) {
			panic(fmt.Sprintf("engine: held unit %s: GPUs %v not free", f.c.u.key, f.gpus))
		}
		cl.take(f.gpus)
		put(f, f.gpus, f.act)
	}
	if r := pr.resv; r == nil || r.Type != t {
		return out
	}
	var rest []*fixedUnit
	for i := range pr.backfill {
		f := &pr.backfill[i]
		if f.gpus != nil && cl.allFree(f.gpus) {
			cl.take(f.gpus)
			put(f, f.gpus, Keep)
			continue
		}
		rest = append(rest, f)
	}
	if len(rest) > 0 {
		// Only the held-back GPUs: the others are taken meanwhile.
		var outside []string
		for i, id := range cl.ids {
			if cl.free[i] && !pr.inBlock[id] {
				outside = append(outside, id)
			}
		}
		cl.take(outside)
		slices.SortStableFunc(rest, func(a, b *fixedUnit) int { return cmp.Compare(b.c.u.sf, a.c.u.sf) })
		for _, f := range rest {
			ids := cl.pick(f.c.u.sf)
			if ids == nil {
				panic(fmt.Sprintf("engine: cannot backfill %s on %d %s GPUs", f.c.u.key, f.c.u.sf, t))
			}
			put(f, ids, Start)
		}
		cl.release(outside)
	}
	cl.take(pr.blocked)
	return out
}

// preFinish ends the round: the reservation dropped if selection ran its
// gang elsewhere, else the plan's reservation and, with CheckpointAware,
// the notice to the units that its start displaces in the round before;
// then the records the next round reads.
func (e *Engine) preFinish(plan *Plan) {
	pr := e.pr
	in := map[string]bool{}
	for _, a := range plan.Assignments {
		for _, id := range a.Jobs {
			in[id] = true
		}
	}
	if e.resv != nil && in[e.resv.Job] {
		e.resv = nil // selection ran the gang elsewhere: it no longer waits
	}
	if e.cfg.ReserveAfterS > 0 {
		if r := e.resv; r != nil {
			plan.Reservations = []Reservation{*r}
			plan.Reservations[0].GPUs = slices.Clone(r.GPUs)
			if e.cfg.CheckpointAware && r.StartS <= pr.s.TimeS+e.cfg.RoundS {
				e.noticeHolders(pr, plan)
			}
		}
	}
	for _, a := range plan.Assignments {
		for _, id := range a.Jobs {
			if a.Action == Start {
				if e.runStart == nil {
					e.runStart = map[string]float64{}
				}
				e.runStart[id] = plan.TimeS
			}
		}
	}
	for id := range e.runStart {
		if !in[id] {
			delete(e.runStart, id)
		}
	}
	e.noticed = nil
	if len(pr.noticed) > 0 {
		e.noticed = pr.noticed
	}
	e.pr, e.preTaken = nil, 0
}

// noticeHolders gives the units that keep reserved GPUs this round, and
// are displaced when the reservation starts next round, their notice.
func (e *Engine) noticeHolders(pr *preRound, plan *Plan) {
	r := e.resv
	for i := range plan.Assignments {
		a := &plan.Assignments[i]
		if a.Type != r.Type || a.Action != Keep || a.Checkpoint {
			continue
		}
		var j *Job
		if len(a.Jobs) == 1 {
			j = pr.jobs[a.Jobs[0]]
		}
		if !slices.ContainsFunc(base(j, a), func(g string) bool { return slices.Contains(r.GPUs, g) }) ||
			!e.mayNotice(pr, a.Jobs) {
			continue
		}
		a.Checkpoint = true
		a.Why = &Reason{Kind: Noticed, Priority: a.Priority, To: a.Type}
		for _, id := range a.Jobs {
			pr.noticed[id] = true
		}
	}
}

// reserve makes a reservation, at the round's start, for the gang that
// has waited longest (ties: arrival order) at least ReserveAfterS and
// does not run. A GPU is free at once if no unit ran on it last round or
// only jobs noticed then (they stop now), at its pin's end if a pinned
// unit holds it, else next round (its holder may be stopped then, after
// a notice with CheckpointAware). On each type the
// gang can use, the reservation would start when the ScaleFactor-th
// earliest GPU is free; the type where that is earliest (ties: higher
// throughput, then type order) is taken, with GPUs free by then on the
// fewest servers.
func (e *Engine) reserve(pr *preRound, order []string) {
	s, now := pr.s, pr.s.TimeS
	freeAt := map[string]float64{} // absent: idle
	for _, a := range s.Running {
		if !slices.ContainsFunc(a.Jobs, func(id string) bool { return pr.jobs[id] != nil && !e.noticed[id] }) {
			continue // gone, or noticed last round: it stops now
		}
		for _, g := range a.GPUs {
			freeAt[g] = now + e.cfg.RoundS
		}
	}
	for g, end := range pr.pinEnd {
		freeAt[g] = end
	}
	counts := healthyCounts(s.GPUs)
	var gang *Job
	since := 0.0
	for i := range s.Jobs {
		j := &s.Jobs[i]
		sf := max(j.ScaleFactor, 1)
		if sf <= 1 || pr.ran[j.ID] != nil || j.Elastic.TwoRole() {
			continue
		}
		ws, ok := e.waitSince[j.ID]
		if !ok || now-ws < e.cfg.ReserveAfterS || (gang != nil && ws >= since) {
			continue
		}
		for _, t := range order {
			if counts[t] >= sf && j.Throughput[t] > 0 {
				gang, since = j, ws
				break
			}
		}
	}
	if gang == nil {
		return
	}
	var best *Reservation
	bestTput := 0.0
	for _, t := range order {
		sf, tp := max(gang.ScaleFactor, 1), gang.Throughput[t]
		if !(tp > 0) || counts[t] < sf {
			continue
		}
		ids, start := reserveOn(e.clusterFor(s.GPUs, t).layout, freeAt, now, sf)
		if best == nil || start < best.StartS || (start == best.StartS && tp > bestTput) {
			best = &Reservation{Job: gang.ID, VC: gang.VC, Type: t, GPUs: ids, StartS: start, SinceS: now}
			bestTput = tp
		}
	}
	if best == nil {
		return
	}
	if r := pr.remade; r != nil && r.Job == best.Job {
		best.SinceS = r.SinceS // the same reservation, on other GPUs
	}
	e.resv = best
}

// reserveOn picks n of the layout's GPUs free earliest: the start is the
// n-th earliest time any is free; among the GPUs free by then, the
// fullest-fitting server that holds n, else servers by decreasing count,
// each one's earliest first.
func reserveOn(l *layout, freeAt map[string]float64, now float64, n int) ([]string, float64) {
	at := func(i int) float64 {
		if v, ok := freeAt[l.ids[i]]; ok {
			return v
		}
		return now
	}
	idx := make([]int, len(l.ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(at(a), at(b)) })
	start := at(idx[n-1])
	per := make([][]int, len(l.servers)) // eligible GPUs by server, earliest first
	for _, i := range idx {
		if at(i) <= start {
			per[l.srvOf[i]] = append(per[l.srvOf[i]], i)
		}
	}
	best := -1
	for sv, g := range per {
		if len(g) >= n && (best < 0 || len(g) < len(per[best])) {
			best = sv
		}
	}
	var servers []int
	if best >= 0 {
		servers = []int{best}
	} else {
		for sv := range per {
			servers = append(servers, sv)
		}
		slices.SortStableFunc(servers, func(a, b int) int { return cmp.Compare(len(per[b]), len(per[a])) })
	}
	var ids []string
	for _, sv := range servers {
		for _, i := range per[sv] {
			if len(ids) < n {
				ids = append(ids, l.ids[i])
			}
		}
	}
	return ids, start
}

// Reason is what the reservation tells its waiting job (Reserved): the
// engine gives no intent to a job it neither runs nor stops, so backends
// that report a waiting job's reason take it from here.
func (r Reservation) Reason() Reason { return Reason{Kind: Reserved, To: r.Type, Until: r.StartS} }

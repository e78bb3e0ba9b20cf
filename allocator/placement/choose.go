package placement

import (
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// choose re-picks the GPUs of the plan's starting jobs for their demand
// (Options.Choose; modes other than proportional), after Synergy-TUNE's
// placement: jobs in decreasing demand (GPUs, best-case cores, best-case
// memory, the best case capped at the server) each take a server that fits
// its best case, else one that fits its proportional share, else any with
// the GPUs; among those, the one with the most free cores, then memory,
// then the fewest free GPUs. (Synergy picks the best fit, the least room;
// in Rondo's model, where a running job keeps its grant, the most room
// measured better: FIFO at 9 jobs/h, TUNE's average JCT 26.0 h against
// 29.4 h with the best fit on seed 42, better on 4 of 5 seeds;
// docs/synergy/continuous.md.) The GPUs a job may take are those of its
// type the plan leaves free (but not those it reserves for a waiting gang,
// Plan.Reservations) or gives to another job choose moves, on the nodes
// the stage knows, never failed ones.
//
// What the mechanism decided stays: the same jobs run, each on as many GPUs
// of the same type, a job on one server stays on one server. Only jobs
// starting this round (admitted, resumed, migrated: not kept on the GPUs
// they held), alone on their GPUs, on one known server, not elastic, and
// not one Learn is learning (it samples where the job runs) nor one whose
// reason is the engine's own (a backfill on reserved GPUs) move; kept,
// shared, multi-server and elastic jobs keep their GPUs and count as
// holding what they held (kept) or their proportional share. If the choice
// finds no server with the GPUs for a job (GPUs fragmented by earlier
// choices), nothing moves this round.
//
// The moved jobs' assignments and intents get their new GPUs and server;
// a job given back exactly the GPUs it held (same type) is kept instead
// (with the engine's own reason, if it had one).
// It reports whether any job moved.
func (st *Stage) choose(s *engine.Snapshot, p *engine.Plan, byID map[string]*engine.Job, held map[string]engine.Resources,
	gpuServer map[string]string, srvByID map[string]*Server) bool {
	type state struct {
		sv           *Server
		freeC, freeM float64
	}
	srvs := make(map[string]*state, len(srvByID))
	for id, sv := range srvByID {
		srvs[id] = &state{sv: sv, freeC: sv.Cores, freeM: sv.MemGB}
	}
	type mover struct {
		ai   int
		j    *engine.Job
		n    int
		typ  string
		srv  string // the mechanism's server
		key  [2]float64
		gpus []string // chosen
	}
	var movers []*mover
	used := map[string]bool{}
	movable := map[string]bool{} // GPUs of movers
	for _, r := range p.Reservations {
		for _, g := range r.GPUs {
			used[g] = true // held back for a waiting gang
		}
	}
	intentOf := intentsOf(p)
	for ai := range p.Assignments {
		a := &p.Assignments[ai]
		for _, g := range a.GPUs {
			used[g] = true
		}
		if m := st.moverOf(a, byID, gpuServer, srvByID); m != nil &&
			(a.Why == nil || !engineOwn(a.Why.Kind)) && (intentOf[m.ID] == nil || !engineOwn(intentOf[m.ID].Reason.Kind)) {
			movers = append(movers, &mover{ai: ai, j: m, n: len(a.GPUs), typ: a.Type, srv: gpuServer[a.GPUs[0]]})
			for _, g := range a.GPUs {
				movable[g] = true
			}
			continue
		}
		// It stays: it holds what it held (kept alone), else its share.
		var h engine.Resources
		if len(a.Jobs) == 1 && a.Action == engine.Keep {
			h = held[a.Jobs[0]]
		}
		for _, g := range a.GPUs {
			sv := srvs[gpuServer[g]]
			if sv == nil {
				continue
			}
			if h.Cores > 0 && h.MemGB > 0 {
				f := 1 / float64(len(a.GPUs))
				sv.freeC -= f * h.Cores
				sv.freeM -= f * h.MemGB
				continue
			}
			sv.freeC -= sv.sv.shareCores()
			sv.freeM -= sv.sv.shareMem()
		}
	}
	if len(movers) == 0 {
		return false
	}
	// The pool: per type and server, the GPUs movers may take, in snapshot
	// order.
	pool := map[string]map[string][]string{}
	for _, g := range s.GPUs {
		if g.Failed || srvs[g.Server] == nil || (used[g.ID] && !movable[g.ID]) {
			continue
		}
		if pool[g.Type] == nil {
			pool[g.Type] = map[string][]string{}
		}
		pool[g.Type][g.Server] = append(pool[g.Type][g.Server], g.ID)
	}
	// demand is a job's best case (capped at the server) and share there.
	profs := map[*engine.Job]map[float64]*synergy.Profile{}
	demand := func(m *mover, sv *Server) (bc, bm, pc, pm float64) {
		n := float64(m.n)
		pc, pm = n*sv.shareCores(), n*sv.shareMem()
		pr := synergy.Flat()
		if m.j.Profile != "" {
			if profs[m.j] == nil {
				profs[m.j] = map[float64]*synergy.Profile{}
			}
			pp, ok := profs[m.j][sv.shareCores()]
			if !ok {
				pp = st.profile(m.j, m.n, sv)
				profs[m.j][sv.shareCores()] = pp
			}
			if pp != nil {
				pr = pp
			}
		}
		return math.Min(pr.CoresPerGPUBest*n, sv.Cores), math.Min(pr.MemGBPerGPUBest*n, sv.MemGB), pc, pm
	}
	for _, m := range movers {
		bc, bm, _, _ := demand(m, srvByID[m.srv])
		m.key = [2]float64{bc, bm}
	}
	sort.SliceStable(movers, func(a, b int) bool {
		x, y := movers[a], movers[b]
		if x.n != y.n {
			return x.n > y.n
		}
		if x.key[0] != y.key[0] {
			return x.key[0] > y.key[0]
		}
		return x.key[1] > y.key[1]
	})
	ids := make([]string, 0, len(srvs))
	for id := range srvs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, m := range movers {
		best, bestClass := "", 3
		var bestFree []float64
		var charge [2]float64
		for _, id := range ids {
			free := pool[m.typ][id]
			if len(free) < m.n {
				continue
			}
			sv := srvs[id]
			bc, bm, pc, pm := demand(m, sv.sv)
			class, c, mem := 2, pc, pm
			switch {
			case bc <= sv.freeC+eps && bm <= sv.freeM+eps:
				class, c, mem = 0, bc, bm
			case pc <= sv.freeC+eps && pm <= sv.freeM+eps:
				class = 1
			}
			// The most room: free cores, then memory, then the fewest free
			// GPUs (keeps whole servers for larger jobs).
			key := []float64{-sv.freeC, -sv.freeM, float64(len(free))}
			if class < bestClass || (class == bestClass && slices.Compare(key, bestFree) < 0) {
				best, bestClass, bestFree, charge = id, class, key, [2]float64{c, mem}
			}
		}
		if best == "" {
			return false // fragmented: the mechanism's GPUs stand
		}
		// Its own GPUs first where they are still free: on the
		// mechanism's server, the mechanism's GPUs.
		free := pool[m.typ][best]
		own := p.Assignments[m.ai].GPUs
		sort.SliceStable(free, func(a, b int) bool { return slices.Contains(own, free[a]) && !slices.Contains(own, free[b]) })
		m.gpus = slices.Clone(free[:m.n])
		pool[m.typ][best] = free[m.n:]
		srvs[best].freeC -= charge[0]
		srvs[best].freeM -= charge[1]
	}
	prev := map[string]*engine.Assignment{}
	for i := range s.Running {
		if len(s.Running[i].Jobs) == 1 {
			prev[s.Running[i].Jobs[0]] = &s.Running[i]
		}
	}
	moved := false
	for _, m := range movers {
		a := &p.Assignments[m.ai]
		if sameSet(a.GPUs, m.gpus) {
			continue
		}
		moved = true
		a.GPUs = m.gpus
		a.Servers = []string{gpuServer[m.gpus[0]]}
		id := a.Jobs[0]
		ji := intentOf[id]
		if old := prev[id]; old != nil && old.Type == a.Type && sameSet(old.GPUs, a.GPUs) {
			a.GPUs = slices.Clone(old.GPUs)
			a.Action = engine.Keep
			if ji != nil {
				ji.Intent, ji.From = engine.IntentKeep, nil
				if !engineOwn(ji.Reason.Kind) {
					ji.Reason = engine.Reason{Kind: engine.LeaseRenewed, Priority: a.Priority, To: a.Type}
				}
			}
		}
		if ji != nil {
			ji.GPUs, ji.Servers = a.GPUs, a.Servers
		}
	}
	return moved
}

// moverOf is the job of an assignment choose may move (nil: it stays).
func (st *Stage) moverOf(a *engine.Assignment, byID map[string]*engine.Job, gpuServer map[string]string, srvByID map[string]*Server) *engine.Job {
	if len(a.Jobs) != 1 || a.Action == engine.Keep || len(a.GPUs) == 0 {
		return nil
	}
	j := byID[a.Jobs[0]]
	if j == nil || j.Elastic != nil || (j.Profile == "" && st.Learn != nil) {
		return nil
	}
	if st.Mode == nil {
		return nil
	}
	if m := st.Mode(j.VC); m == "" || m == Proportional {
		return nil
	}
	srv := gpuServer[a.GPUs[0]]
	if srvByID[srv] == nil {
		return nil
	}
	for _, g := range a.GPUs[1:] {
		if gpuServer[g] != srv {
			return nil
		}
	}
	return j
}

// sameSet reports whether a and b hold the same GPUs (any order).
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

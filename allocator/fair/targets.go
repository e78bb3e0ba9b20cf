package fair

import (
	"math"
	"sort"

	"github.com/rondo-sched/rondo/policies"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// sorted returns the runnable jobs in arrival order.
func (s *Scheduler) sorted() []*jobState {
	out := make([]*jobState, 0, len(s.st.Jobs))
	for _, js := range s.st.Jobs {
		out = append(out, js)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].order < out[b].order })
	return out
}

// recompute is the event work: shares per user and generation (fair,
// then traded), bindings of unbound jobs, job tickets.
func (s *Scheduler) recompute(lay *layout) {
	st := s.st
	jobs := s.sorted()
	capacity := make(map[string]float64, len(lay.types))
	for _, t := range lay.types {
		capacity[t] = float64(lay.total[t])
	}
	idx := map[string]int{}
	var users []fairshare.User
	demand := map[string]float64{}
	for _, js := range jobs {
		i, ok := idx[js.User]
		if !ok {
			i = len(users)
			idx[js.User] = i
			users = append(users, fairshare.User{Name: js.User, Tickets: float64(s.tickets(js.User))})
		}
		fj := fairshare.Job{GPUs: js.GPUs}
		for _, t := range lay.types {
			if lay.runs(js.job, t) {
				fj.Types = append(fj.Types, t)
			}
		}
		users[i].Jobs = append(users[i].Jobs, fj)
		demand[js.User] += float64(js.GPUs)
	}
	sort.Slice(users, func(a, b int) bool { return users[a].Name < users[b].Name })
	st.Fair = fairshare.Compute(capacity, users)
	value := s.value(lay, jobs)
	st.Shares, st.Trades = st.Fair.Clone(), nil
	if s.cfg.Trading && len(lay.types) > 1 {
		st.Shares, st.Trades = fairshare.TradeShares(st.Fair, value, demand, s.cfg.TradeMargin)
	}
	s.bind(lay, jobs, value)
	s.retick(lay)
}

// value is each user's valuation of each generation for trading: the
// mean over its jobs of throughput_t / throughput on the slowest type,
// the slowest being the type with the lowest mean normalized throughput
// (each job's throughput over its best) over all runnable jobs. The
// slowest type has value 1 for everybody. A job that cannot run on the
// slowest type is normalized by its own lowest positive throughput
// instead (as if its slowest usable type were the reference).
func (s *Scheduler) value(lay *layout, jobs []*jobState) fairshare.Value {
	slow, low := "", math.Inf(1)
	for _, t := range lay.types {
		sum := 0.0
		for _, js := range jobs {
			best := 0.0
			for _, u := range lay.types {
				best = math.Max(best, js.job.Throughput[u])
			}
			if best > 0 {
				sum += js.job.Throughput[t] / best
			}
		}
		if m := sum / math.Max(1, float64(len(jobs))); m < low {
			slow, low = t, m
		}
	}
	val := fairshare.Value{}
	count := map[string]float64{}
	for _, js := range jobs {
		ref := js.job.Throughput[slow]
		if ref <= 0 {
			ref = math.Inf(1)
			for _, t := range lay.types {
				if v := js.job.Throughput[t]; v > 0 && v < ref {
					ref = v
				}
			}
		}
		m := val[js.User]
		if m == nil {
			m = map[string]float64{}
			val[js.User] = m
		}
		count[js.User]++
		for _, t := range lay.types {
			m[t] += js.job.Throughput[t] / ref
		}
	}
	for u, m := range val {
		for t := range m {
			m[t] /= count[u]
		}
		m[slow] = 1
	}
	return val
}

// retick sets job tickets: a user's share on a generation split equally
// over its jobs bound there, then corrected so that the predicted GPU
// rates (per-server water-filling, predict) meet the users' shares when
// their jobs sit on differently loaded servers.
func (s *Scheduler) retick(lay *layout) {
	st := s.st
	type ut struct{ u, t string }
	n := map[ut]int{}
	for _, js := range st.Jobs {
		n[ut{js.User, js.Type}]++
	}
	base := map[string]float64{}
	for _, js := range st.Jobs {
		js.Tickets = math.Max(minTickets, st.Shares[js.User][js.Type]/float64(n[ut{js.User, js.Type}]))
		base[js.id] = js.Tickets
	}
	for _, t := range lay.types {
		s.correct(lay, t, base)
	}
	s.alloc = nil
}

// correct runs up to 10 multiplicative corrections of the tickets of
// type t's jobs: a user whose predicted GPUs differ from its target
// (its share, at most its bound demand) has its jobs' tickets scaled by
// target / predicted (each step within [1/2, 2], in all within
// [1/100, 100] of the equal split). Each step is one water-filling per
// server: O(jobs log jobs).
func (s *Scheduler) correct(lay *layout, t string, base map[string]float64) {
	g := s.gen(lay, t)
	if len(g.jobs) == 0 {
		return
	}
	users := map[string]*[2]float64{} // predicted, bound demand
	for it := 0; it < 10; it++ {
		g.predict()
		g.clamp()
		g.predict()
		clear(users)
		for _, js := range g.jobs {
			p := users[js.User]
			if p == nil {
				p = &[2]float64{}
				users[js.User] = p
			}
			p[0] += js.rate
			p[1] += float64(js.GPUs)
		}
		done := true
		fac := map[string]float64{}
		for u, p := range users {
			want := math.Min(s.st.Shares[u][t], p[1])
			if p[0] <= 0 || math.Abs(p[0]-want) <= 0.005*math.Max(want, 1) {
				continue
			}
			done = false
			fac[u] = math.Min(2, math.Max(0.5, want/p[0]))
		}
		if done {
			return
		}
		for _, js := range g.jobs {
			if f, ok := fac[js.User]; ok {
				b := base[js.id]
				js.Tickets = math.Min(100*b, math.Max(b/100, js.Tickets*f))
			}
		}
	}
	g.predict()
}

// generation is one type's bound jobs by server, for prediction.
type generation struct {
	servers []*server
	small   [][]*jobState // per server (index in servers)
	gangs   []*jobState
	jobs    []*jobState
	pos     []int // position in servers by global server index
	// From predict: levels per server, gangs' fractions, gangs per server.
	level []float64
	f     []float64
	onSrv [][]int
}

func (s *Scheduler) gen(lay *layout, t string) *generation {
	g := &generation{servers: lay.byType[t], pos: make([]int, len(lay.servers))}
	for i, v := range g.servers {
		g.pos[v.idx] = i
	}
	g.small = make([][]*jobState, len(g.servers))
	for _, js := range s.sorted() {
		if js.Type != t || len(js.srv) == 0 {
			continue
		}
		g.jobs = append(g.jobs, js)
		if js.gang() {
			g.gangs = append(g.gangs, js)
		} else {
			i := g.pos[js.srv[0].idx]
			g.small[i] = append(g.small[i], js)
		}
	}
	return g
}

// predict sets each job's rate (GPUs it gets on average) under stride
// scheduling, and each server's level (GPUs per ticket of its uncapped
// small jobs; +Inf when all are capped). Passes of uncapped jobs on a
// server advance together, so a server's small jobs share the GPUs the
// gangs leave by ticket-weighted water-filling, each capped at its size
// times the time no gang blocks it. A gang runs a fraction f of the time
// and only at the head of every queue, so its pass rate f·GPUs/tickets
// is the lowest pass rate (rate/tickets) among the small jobs of its
// servers (capped ones included: a capped job with many tickets holds
// the gang back, which clamp prevents). The gangs' fractions come from a
// damped fixed-point iteration (one pass without gangs).
func (g *generation) predict() {
	// Warm start from the previous call's fractions (the corrections call
	// predict 20 times per event).
	f := g.f
	iters := 1
	if len(g.gangs) > 0 {
		iters = 8
	}
	if len(f) != len(g.gangs) {
		f = make([]float64, len(g.gangs))
		if len(g.gangs) > 0 {
			iters = 40
		}
	}
	g.level = make([]float64, len(g.servers))
	slowest := make([]float64, len(g.servers)) // lowest pass rate of small jobs
	onSrv := make([][]int, len(g.servers))     // gang indices per server
	needAt := make([][]int, len(g.servers))    // their GPUs there
	for k, gj := range g.gangs {
		for n, v := range gj.srv {
			i := g.pos[v.idx]
			onSrv[i] = append(onSrv[i], k)
			needAt[i] = append(needAt[i], gj.need[n])
		}
	}
	var d, w []float64
	for it := 0; it < iters; it++ {
		for i, v := range g.servers {
			jobs := g.small[i]
			avail := float64(v.cap())
			for m, k := range onSrv[i] {
				avail -= f[k] * float64(needAt[i][m])
			}
			avail = math.Max(0, avail)
			d, w = d[:0], w[:0]
			for _, js := range jobs {
				blocked := 0.0
				for m, k := range onSrv[i] {
					if v.cap()-needAt[i][m] < js.GPUs {
						blocked += f[k]
					}
				}
				d = append(d, float64(js.GPUs)*math.Max(0, 1-blocked))
				w = append(w, js.Tickets)
			}
			got := fairshare.WaterFill(avail, d, w)
			g.level[i], slowest[i] = math.Inf(1), math.Inf(1)
			for k, js := range jobs {
				js.rate = got[k]
				slowest[i] = math.Min(slowest[i], got[k]/w[k])
				if got[k] < d[k]-1e-9 {
					g.level[i] = math.Min(g.level[i], got[k]/w[k])
				}
			}
		}
		for k, gj := range g.gangs {
			fk := 1.0
			for n, v := range gj.srv {
				i := g.pos[v.idx]
				if !math.IsInf(slowest[i], 1) {
					fk = math.Min(fk, slowest[i]*gj.Tickets/float64(gj.GPUs))
				}
				room := float64(v.cap())
				for m, h := range onSrv[i] {
					if h != k {
						room -= f[h] * float64(needAt[i][m])
					}
				}
				fk = math.Min(fk, math.Max(0, room/float64(gj.need[n])))
			}
			if it < iters-1 {
				fk = (f[k] + fk) / 2
			}
			f[k] = fk
		}
	}
	for k, gj := range g.gangs {
		gj.rate = f[k] * float64(gj.GPUs)
	}
	g.f = f
	g.onSrv = onSrv
}

// clamp lowers the tickets of capped small jobs (those that get their
// whole size whenever no gang blocks them) to what just gives them that
// (rate / level): their passes then advance with their server's level
// instead of lagging behind it, so they neither hold back a gang waiting
// for the head of their queue nor bank credit. On a server where every
// small job is capped, the reference level is the gangs' pass rate.
func (g *generation) clamp() {
	for i, jobs := range g.small {
		ref := g.level[i]
		if math.IsInf(ref, 1) {
			for _, k := range g.onSrv[i] {
				if gj := g.gangs[k]; g.f[k] > 0 {
					ref = math.Min(ref, g.f[k]*float64(gj.GPUs)/gj.Tickets)
				}
			}
		}
		if math.IsInf(ref, 1) || ref <= 0 {
			continue
		}
		for _, js := range jobs {
			if js.rate > 0 && js.rate/js.Tickets < ref {
				js.Tickets = math.Max(minTickets, js.rate/ref)
			}
		}
	}
}

// predictAll predicts every generation's rates (after a restore).
func (s *Scheduler) predictAll(lay *layout) {
	for _, t := range lay.types {
		s.gen(lay, t).predict()
	}
}

// allocation is the plan's X: each job's predicted fraction of time on
// its bound type.
func (s *Scheduler) allocation(lay *layout) *policies.Allocation {
	jobs := s.sorted()
	a := &policies.Allocation{Policy: "gandiva_fair", Types: lay.types}
	col := map[string]int{}
	for i, t := range lay.types {
		col[t] = i
	}
	for _, js := range jobs {
		row := make([]float64, len(lay.types))
		if c, ok := col[js.Type]; ok {
			row[c] = math.Min(1, js.rate/float64(js.GPUs))
		}
		a.JobIDs = append(a.JobIDs, js.id)
		a.X = append(a.X, row)
	}
	return a
}

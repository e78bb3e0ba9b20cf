package fair

import (
	"math"
	"slices"
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

// value is each user's valuation of each generation for trading
// (fairshare.Valuations, the policy's own): the mean over its jobs of
// throughput_t / throughput on the slowest type, from the jobs'
// throughputs on the types present (measured ones once the estimating
// stage has them).
func (s *Scheduler) value(lay *layout, jobs []*jobState) fairshare.Value {
	by := map[string][]map[string]float64{}
	for _, js := range jobs {
		m := make(map[string]float64, len(lay.types))
		for _, t := range lay.types {
			if v := js.job.Throughput[t]; v > 0 {
				m[t] = v
			}
		}
		by[js.User] = append(by[js.User], m)
	}
	return fairshare.Valuations(by)
}

// frac is the part of user u's tickets that goes to generation t: its
// share there after trading over its total share before trading
// (Σ_t' Fair[u][t']); when that total is 0, t's fraction of the capacity.
// Without trading it is the fraction of the user's share that lies on t.
// With trading the buyer's tickets move to the generation it bought, and
// at the market's exchange rate: a user's tickets on a generation stay
// proportional to its share there, so the GPU time its jobs receive
// follows the traded shares (dividing by the traded total instead would
// favour whichever side of the trade ended with the smaller total).
func (s *Scheduler) frac(lay *layout, u, t string) float64 {
	if tot := s.st.Fair.Total(u); tot > 0 {
		return s.st.Shares[u][t] / tot
	}
	if lay.n == 0 {
		return 0
	}
	return float64(lay.total[t]) / float64(lay.n)
}

// retick sets job tickets as the paper does: a job's tickets are its
// user's tickets × the part of them on the job's generation (frac) / the
// number of the user's jobs bound there. Without trading every uncapped
// user's shares lie on the generations in the same proportions, so on
// one generation the users' tickets keep their ratios and split equally
// over their jobs. Stride scheduling then hands out the GPU time by these
// tickets (stride.go); nothing corrects them toward a target, so a job's
// tickets never depend on where the others sit.
func (s *Scheduler) retick(lay *layout) {
	st := s.st
	type ut struct{ u, t string }
	n := map[ut]int{}
	for _, js := range st.Jobs {
		n[ut{js.User, js.Type}]++
	}
	for _, js := range st.Jobs {
		k := n[ut{js.User, js.Type}]
		js.Tickets = math.Max(minTickets, float64(s.tickets(js.User))*s.frac(lay, js.User, js.Type)/float64(k))
	}
	s.alloc = nil
}

// predict estimates each job's rate (GPUs it gets on average) for the
// plan's X, in one ticket-weighted water-filling per server: the small
// jobs bound there and the gangs with their GPUs there claim its GPUs,
// a gang weighing its tickets × its GPUs there / its GPUs (its pass is
// charged for all its GPUs, so on each server it competes with that
// part of its tickets). A gang runs on all its servers together, so its
// fraction of time is its lowest fraction over them. Packing is ignored
// (a server's GPUs are treated as divisible): an estimate, O(jobs log
// jobs).
func (s *Scheduler) predict(lay *layout) {
	type claim struct {
		js *jobState
		k  int // index in js.srv
	}
	per := make([][]claim, len(lay.servers))
	for _, js := range s.st.Jobs {
		js.rate = math.Inf(1)
		for k, v := range js.srv {
			per[v.idx] = append(per[v.idx], claim{js, k})
		}
		if len(js.srv) == 0 {
			js.rate = 0
		}
	}
	var d, w []float64
	for i, v := range lay.servers {
		cl := per[i]
		slices.SortFunc(cl, func(a, b claim) int { return a.js.order - b.js.order })
		d, w = d[:0], w[:0]
		for _, c := range cl {
			d = append(d, float64(c.js.need[c.k]))
			w = append(w, c.js.Tickets*float64(c.js.need[c.k])/float64(c.js.GPUs))
		}
		got := fairshare.WaterFill(float64(v.cap()), d, w)
		for m, c := range cl {
			c.js.rate = math.Min(c.js.rate, got[m]/d[m]*float64(c.js.GPUs))
		}
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

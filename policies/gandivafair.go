package policies

import (
	"math"
	"sort"

	"github.com/rondo-sched/rondo/policies/fairshare"
)

// gandivaFairMargin is the speedup margin under which gandiva_fair's users
// do not trade (fairshare.TradeShares): 0, any gain is worth a trade.
const gandivaFairMargin = 0

// gandiva_fair: Gandiva-fair (EuroSys'20) on one recompute. Each user's
// fair share of every GPU type from its tickets (fairshare.Compute over
// the types' GPU counts; a job counts its scale factor as demand on every
// type where its throughput is positive), then, unless "trading" is false,
// trading between generations at the users' valuations
// (fairshare.Valuations of their jobs' throughputs, fairshare.TradeShares,
// demand = the GPUs of the user's runnable jobs), then each user's GPUs of
// each type split over its jobs (splitUserShare). The objective is the
// users' total utility after trading, in GPUs of the reference (slowest)
// type.
func init() {
	define("gandiva_fair", func(in *instance, p *Problem) (*Allocation, error) {
		a := newAllocation("gandiva_fair", in)
		capacity := map[string]float64{}
		for k, t := range in.types {
			capacity[t] = in.counts[k]
		}
		byUser := map[string][]int{}
		for m, j := range in.jobs {
			u := j.User
			if u == "" {
				u = DefaultUser
			}
			byUser[u] = append(byUser[u], m)
		}
		names := make([]string, 0, len(byUser))
		for u := range byUser {
			names = append(names, u)
		}
		sort.Strings(names)
		users := make([]fairshare.User, 0, len(names))
		demand := map[string]float64{}
		tputs := map[string][]map[string]float64{}
		for _, u := range names {
			tickets := float64(fairshare.DefaultTickets)
			if ut, ok := p.Users[u]; ok {
				tickets = ut.Tickets
			}
			fu := fairshare.User{Name: u, Tickets: tickets}
			for _, m := range byUser[u] {
				var types []string
				tp := map[string]float64{}
				for k, t := range in.types {
					if in.tput[m][k] > 0 && in.counts[k] > 0 {
						types = append(types, t)
						tp[t] = in.tput[m][k]
					}
				}
				if len(types) == 0 {
					continue // runs on no type the cluster has
				}
				fu.Jobs = append(fu.Jobs, fairshare.Job{GPUs: int(in.sf[m]), Types: types})
				demand[u] += in.sf[m]
				tputs[u] = append(tputs[u], tp)
			}
			users = append(users, fu)
		}
		fair := fairshare.Compute(capacity, users)
		value := fairshare.Valuations(tputs)
		shares := fair
		var trades []fairshare.Trade
		if p.Trading == nil || *p.Trading {
			shares, trades = fairshare.TradeShares(fair, value, demand, gandivaFairMargin)
		}
		for _, u := range names {
			splitUserShare(in, byUser[u], shares[u], a.X)
		}
		a.FairShares, a.UserShares, a.Trades = fair, shares, trades
		a.Objective = fairshare.TotalUtility(shares, value)
		return a, nil
	})
}

// splitUserShare splits one user's GPUs per type (share) over its jobs
// (indices into in) and writes X = GPUs / scale factor. First, type by type
// (the types fewest of the jobs can use first, ties by name), equal GPUs
// per job that can run there, each capped at what its scale factor still
// leaves (water-filling, so Σ_t X[m][t] ≤ 1); then GPUs still unplaced are
// routed along augmenting paths (a job moves off one type to free it for
// another job), a max flow, so no share idles while a job that can use it,
// directly or by such a move, has room.
func splitUserShare(in *instance, jobs []int, share map[string]float64, x [][]float64) {
	k := in.k()
	left := make([]float64, k)
	for t, name := range in.types {
		left[t] = share[name]
	}
	g := rows(len(jobs), k) // GPUs per job per type
	room := make([]float64, len(jobs))
	for i, m := range jobs {
		room[i] = in.sf[m]
	}
	can := func(i, t int) bool { return in.tput[jobs[i]][t] > 0 }
	order := make([]int, k)
	able := make([]int, k)
	for t := range order {
		order[t] = t
		for i := range jobs {
			if can(i, t) {
				able[t]++
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return able[order[a]] < able[order[b]] })
	for _, t := range order {
		if left[t] <= 0 {
			continue
		}
		d := make([]float64, len(jobs))
		w := make([]float64, len(jobs))
		for i := range jobs {
			if can(i, t) {
				d[i], w[i] = room[i], 1
			}
		}
		got := fairshare.WaterFill(left[t], d, w)
		for i, v := range got {
			g[i][t] += v
			room[i] -= v
			left[t] -= v
		}
	}
	augment(g, room, left, can)
	for i, m := range jobs {
		for t := range g[i] {
			x[m][t] = g[i][t] / in.sf[m]
		}
	}
}

// augment places unplaced GPUs (left, per type) by breadth-first
// augmenting paths type → job → (the job gives up a type it holds) type →
// … → a job with room: Edmonds–Karp on the user's bipartite graph.
func augment(g [][]float64, room, left []float64, can func(i, t int) bool) {
	const eps = 1e-12
	k := len(left)
	for iter := 0; iter < 10000; iter++ {
		// Nodes: types 0..k-1, jobs k..k+n-1. prev: the node reached from.
		prev := make([]int, k+len(g))
		for i := range prev {
			prev[i] = -2
		}
		var queue []int
		for t := range left {
			if left[t] > eps {
				prev[t] = -1
				queue = append(queue, t)
			}
		}
		end := -1
		for len(queue) > 0 && end < 0 {
			v := queue[0]
			queue = queue[1:]
			if v < k {
				for i := range g {
					if prev[k+i] == -2 && can(i, v) {
						prev[k+i] = v
						if room[i] > eps {
							end = k + i
							break
						}
						queue = append(queue, k+i)
					}
				}
				continue
			}
			for t := range left {
				if prev[t] == -2 && g[v-k][t] > eps {
					prev[t] = v
					queue = append(queue, t)
				}
			}
		}
		if end < 0 {
			return
		}
		// Bottleneck along the path.
		amt := room[end-k]
		v := end
		for {
			t := prev[v] // a type
			if prev[t] == -1 {
				amt = math.Min(amt, left[t])
				break
			}
			amt = math.Min(amt, g[prev[t]-k][t])
			v = prev[t]
		}
		v = end
		room[end-k] -= amt
		for {
			t := prev[v]
			g[v-k][t] += amt
			if prev[t] == -1 {
				left[t] -= amt
				break
			}
			g[prev[t]-k][t] -= amt
			v = prev[t]
		}
	}
}

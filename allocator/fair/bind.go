package fair

import (
	"math"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// loads are the servers' loads: Σ over the jobs bound there of
// tickets × GPUs there / the server's GPUs (tickets per GPU).
func (s *Scheduler) loads(lay *layout) []float64 {
	load := make([]float64, len(lay.servers))
	for _, js := range s.sorted() { // a fixed order: the same sums (and ties) every run
		for k, v := range js.srv {
			load[v.idx] += js.Tickets * float64(js.need[k]) / float64(v.cap())
		}
	}
	return load
}

// minPass is the lowest pass among the jobs bound to v (ok false if none).
func (s *Scheduler) minPass(v *server, skip *jobState) (float64, bool) {
	m, ok := math.Inf(1), false
	for _, js := range s.st.Jobs {
		if js == skip {
			continue
		}
		for _, w := range js.srv {
			if w == v && js.Pass < m {
				m, ok = js.Pass, true
			}
		}
	}
	return m, ok
}

// bind binds the unbound jobs in arrival order: to the generation where
// the user's share minus its GPUs already bound there is largest (among
// types it can run on; ties: the faster type by the user's value, then
// name), and within it to the least-loaded server that holds it (a small
// job), or to the fewest servers that hold it, largest and least loaded
// first (a multi-server gang). A new job's pass is the lowest pass of its
// server (of its generation for a gang, of the generation when its
// server is empty): it neither monopolizes the server nor waits behind
// jobs that ran before it came.
func (s *Scheduler) bind(lay *layout, jobs []*jobState, value fairshare.Value) {
	st := s.st
	bound := map[string]map[string]float64{}
	count := map[[2]string]int{}
	// Loads with the tickets this event will give (retick's rule with the
	// user's jobs on t counted as the same fraction of all its jobs as
	// its share there), not the last event's: jobs bound together weigh
	// alike.
	nUser := map[string]int{}
	for _, js := range jobs {
		nUser[js.User]++
	}
	tk := func(js *jobState, t string) float64 {
		return math.Max(minTickets, float64(s.tickets(js.User))/float64(nUser[js.User]))
	}
	load := make([]float64, len(lay.servers))
	for _, js := range jobs {
		for k, v := range js.srv {
			load[v.idx] += tk(js, js.Type) * float64(js.need[k]) / float64(v.cap())
		}
	}
	srvMin := make([]float64, len(lay.servers))
	for i := range srvMin {
		srvMin[i] = math.Inf(1)
	}
	genMin := map[string]float64{}
	for _, js := range jobs {
		if js.Type == "" {
			continue
		}
		if bound[js.User] == nil {
			bound[js.User] = map[string]float64{}
		}
		bound[js.User][js.Type] += float64(js.GPUs)
		count[[2]string{js.User, js.Type}]++
		for _, v := range js.srv {
			srvMin[v.idx] = math.Min(srvMin[v.idx], js.Pass)
		}
		if m, ok := genMin[js.Type]; !ok || js.Pass < m {
			genMin[js.Type] = js.Pass
		}
	}
	for _, js := range jobs {
		if js.Type != "" {
			continue
		}
		t, best := "", math.Inf(-1)
		for _, u := range lay.types {
			if !lay.runs(js.job, u) {
				continue
			}
			sc := st.Shares[js.User][u] - bound[js.User][u]
			if t == "" || sc > best+1e-9 || sc > best-1e-9 && value[js.User][u] > value[js.User][t]+1e-12 {
				t, best = u, sc
			}
		}
		if t == "" {
			continue // refused jobs never get here
		}
		c := count[[2]string{js.User, t}] + 1
		w := tk(js, t)
		js.Type = t
		js.Servers, js.srv, js.need = js.Servers[:0], js.srv[:0], js.need[:0]
		if js.GPUs <= lay.largest[t] {
			var pick *server
			for _, v := range lay.byType[t] {
				if v.cap() >= js.GPUs && (pick == nil || load[v.idx] < load[pick.idx]-1e-12) {
					pick = v
				}
			}
			js.Servers = append(js.Servers, pick.id)
			js.srv, js.need = append(js.srv, pick), append(js.need, js.GPUs)
		} else {
			cand := append([]*server(nil), lay.byType[t]...)
			sort.SliceStable(cand, func(a, b int) bool {
				if cand[a].cap() != cand[b].cap() {
					return cand[a].cap() > cand[b].cap()
				}
				return load[cand[a].idx] < load[cand[b].idx]-1e-12
			})
			left := js.GPUs
			for _, v := range cand {
				if left == 0 {
					break
				}
				n := min(left, v.cap())
				js.Servers = append(js.Servers, v.id)
				js.srv, js.need = append(js.srv, v), append(js.need, n)
				left -= n
			}
		}
		// Joining pass.
		p, ok := genMin[t]
		if !js.gang() && !math.IsInf(srvMin[js.srv[0].idx], 1) {
			p, ok = srvMin[js.srv[0].idx], true
		}
		if ok {
			js.Pass = p
		} else {
			js.Pass = 0
		}
		for k, v := range js.srv {
			load[v.idx] += w * float64(js.need[k]) / float64(v.cap())
			srvMin[v.idx] = math.Min(srvMin[v.idx], js.Pass)
		}
		if m, ok := genMin[t]; !ok || js.Pass < m {
			genMin[t] = js.Pass
		}
		if bound[js.User] == nil {
			bound[js.User] = map[string]float64{}
		}
		bound[js.User][t] += float64(js.GPUs)
		count[[2]string{js.User, t}] = c
	}
}

// imbalance is (max - min) / mean of the loads of servers (indices).
func imbalance(load []float64, servers []*server) (float64, *server, *server) {
	var hi, lo *server
	sum := 0.0
	for _, v := range servers {
		sum += load[v.idx]
		if hi == nil || load[v.idx] > load[hi.idx] {
			hi = v
		}
		if lo == nil || load[v.idx] < load[lo.idx] {
			lo = v
		}
	}
	mean := sum / float64(len(servers))
	if mean <= 0 {
		return 0, hi, lo
	}
	return (load[hi.idx] - load[lo.idx]) / mean, hi, lo
}

// balance migrates small jobs at a quantum start while load balancing is
// pending (after departures, after trading): within each generation,
// while the imbalance exceeds the threshold and this round's migrations
// are below MaxMigrations, it moves the small job from the most loaded
// server that lowers the imbalance most to a server where it fits
// (ties: a job not running now, then the latest arrival). With trading,
// a user whose bound GPUs on a generation fall short of its share by a
// job's size moves such a job from a generation where it has more bound
// than its share. A moved job keeps its lead over its old server's
// lowest pass on the new one.
func (s *Scheduler) balance(lay *layout, running map[string]*engine.Assignment) {
	st := s.st
	n := 0
	load := s.loads(lay)
	pending := false
	small := make([][]*jobState, len(lay.servers))
	for _, js := range s.sorted() {
		if len(js.srv) == 1 {
			small[js.srv[0].idx] = append(small[js.srv[0].idx], js)
		}
	}
	move := func(js *jobState, to *server) {
		from := js.srv[0]
		old, _ := s.minPass(from, nil)
		nm, ok := s.minPass(to, js)
		if !ok {
			nm = old
		}
		js.Pass = nm + (js.Pass - old)
		w := js.Tickets * float64(js.GPUs)
		load[from.idx] -= w / float64(from.cap())
		load[to.idx] += w / float64(to.cap())
		l := small[from.idx]
		for k := range l {
			if l[k] == js {
				small[from.idx] = append(l[:k:k], l[k+1:]...)
				break
			}
		}
		small[to.idx] = append(small[to.idx], js)
		js.Type = to.typ
		js.Servers = []string{to.id}
		js.srv, js.need = []*server{to}, []int{js.GPUs}
		n++
		st.Migrations++
	}
	if s.cfg.Trading && len(st.Trades) > 0 {
		s.tradeMoves(lay, load, move, &n)
	}
	for _, t := range lay.types {
		servers := lay.byType[t]
		if len(servers) < 2 {
			continue
		}
		for {
			imb, hi, _ := imbalance(load, servers)
			if imb <= s.cfg.Imbalance {
				break
			}
			if n >= s.cfg.MaxMigrations {
				pending = true
				break
			}
			var bj *jobState
			var bto *server
			bestImb := imb - 1e-9
			for _, js := range small[hi.idx] {
				w := js.Tickets * float64(js.GPUs)
				for _, to := range servers {
					if to == hi || to.cap() < js.GPUs {
						continue
					}
					load[hi.idx] -= w / float64(hi.cap())
					load[to.idx] += w / float64(to.cap())
					ni, _, _ := imbalance(load, servers)
					load[hi.idx] += w / float64(hi.cap())
					load[to.idx] -= w / float64(to.cap())
					better := ni < bestImb-1e-12
					if !better && bj != nil && math.Abs(ni-bestImb) <= 1e-12 {
						// Ties: prefer a job that is not running, then a later one.
						if (running[bj.id] != nil) != (running[js.id] != nil) {
							better = running[bj.id] != nil
						} else {
							better = js.order > bj.order
						}
					}
					if better {
						bj, bto, bestImb = js, to, ni
					}
				}
			}
			if bj == nil {
				break
			}
			move(bj, bto)
		}
	}
	st.Balance = pending
	if n > 0 {
		s.retick(lay)
	}
}

// tradeMoves moves jobs across generations after trading changed the
// shares: per user (by name), while some generation's share exceeds its
// bound GPUs by at least a small job's size that could run there, one
// such job moves from the generation where the user has most bound above
// its share, to the least-loaded server that holds it.
func (s *Scheduler) tradeMoves(lay *layout, load []float64, move func(*jobState, *server), n *int) {
	st := s.st
	byUser := map[string][]*jobState{}
	var users []string
	for _, js := range s.sorted() {
		if byUser[js.User] == nil {
			users = append(users, js.User)
		}
		byUser[js.User] = append(byUser[js.User], js)
	}
	sort.Strings(users)
	for _, u := range users {
		for *n < s.cfg.MaxMigrations {
			bound := map[string]float64{}
			for _, js := range byUser[u] {
				bound[js.Type] += float64(js.GPUs)
			}
			var bj *jobState
			var bto *server
			gain := 1e-9
			for _, js := range byUser[u] {
				if js.gang() {
					continue
				}
				from := js.Type
				for _, t := range lay.types {
					if t == from || !lay.runs(js.job, t) || js.GPUs > lay.largest[t] {
						continue
					}
					g := float64(js.GPUs)
					sh := st.Shares[u]
					before := math.Abs(bound[from]-sh[from]) + math.Abs(bound[t]-sh[t])
					after := math.Abs(bound[from]-g-sh[from]) + math.Abs(bound[t]+g-sh[t])
					if before-after > gain {
						var to *server
						for _, v := range lay.byType[t] {
							if v.cap() >= js.GPUs && (to == nil || load[v.idx] < load[to.idx]-1e-12) {
								to = v
							}
						}
						bj, bto, gain = js, to, before-after
					}
				}
			}
			if bj == nil {
				break
			}
			move(bj, bto)
		}
	}
}

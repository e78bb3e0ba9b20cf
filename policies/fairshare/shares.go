// Package fairshare is Gandiva-fair's user-level share arithmetic, pure:
// each active user's share of every GPU generation from its tickets
// (ticket-weighted water-filling, demand-capped), and trading between
// generations (trade.go). Nothing here knows about rounds, servers or
// Nomad: the mechanism (allocator/fair) and `rondo policy solve --policy
// gandiva_fair` (package policies) both call it.
package fairshare

import (
	"math"
	"sort"
)

// DefaultTickets are a user's tickets when its VC declares none for it.
const DefaultTickets = 100

// Job is one runnable job as the share arithmetic sees it: its GPUs (gang
// size) and the GPU types it can run on.
type Job struct {
	GPUs  int
	Types []string
}

// User is one active user: its tickets and runnable jobs.
type User struct {
	Name    string
	Tickets float64
	Jobs    []Job
}

// Shares are GPUs per user per type (fractional: time-sliced).
type Shares map[string]map[string]float64

// Total is a user's GPUs over all types.
func (s Shares) Total(user string) float64 {
	t := 0.0
	for _, k := range sortedKeys(s[user]) { // a fixed order: the same sum every run
		t += s[user][k]
	}
	return t
}

// Clone copies s.
func (s Shares) Clone() Shares {
	out := make(Shares, len(s))
	for u, m := range s {
		c := make(map[string]float64, len(m))
		for t, v := range m {
			c[t] = v
		}
		out[u] = c
	}
	return out
}

// Compute is each user's fair share of each type's GPUs (capacity: GPUs
// per type): per generation, ticket-weighted water-filling over the users
// with demand there. A job's GPUs count as demand on each type it can run
// on in proportion to the types' capacities, so that without caps every
// user gets the same mix of generations (Gandiva-fair's no-trade split);
// a user whose demand is below its share is capped and the excess goes to
// the others, and GPUs still left go to users with unmet demand that can
// run there. No GPU idles while a user has work that fits somewhere.
func Compute(capacity map[string]float64, users []User) Shares {
	types := make([]string, 0, len(capacity))
	for t, c := range capacity {
		if c > 0 {
			types = append(types, t)
		}
	}
	sort.Strings(types)
	out := Shares{}
	demand := make([]map[string]float64, len(users)) // proportional demand per type
	can := make([]map[string]float64, len(users))    // GPUs of jobs runnable per type
	total := make([]float64, len(users))
	for i, u := range users {
		out[u.Name] = map[string]float64{}
		demand[i], can[i] = map[string]float64{}, map[string]float64{}
		for _, j := range u.Jobs {
			sum := 0.0
			for _, t := range j.Types {
				sum += capacity[t]
			}
			if sum <= 0 || j.GPUs <= 0 {
				continue
			}
			total[i] += float64(j.GPUs)
			for _, t := range j.Types {
				if capacity[t] > 0 {
					demand[i][t] += float64(j.GPUs) * capacity[t] / sum
					can[i][t] += float64(j.GPUs)
				}
			}
		}
	}
	left := map[string]float64{}
	for _, t := range types {
		d := make([]float64, len(users))
		w := make([]float64, len(users))
		for i, u := range users {
			d[i], w[i] = demand[i][t], u.Tickets
		}
		got := WaterFill(capacity[t], d, w)
		used := 0.0
		for i, u := range users {
			if got[i] > 0 {
				out[u.Name][t] = got[i]
			}
			used += got[i]
		}
		left[t] = capacity[t] - used
	}
	// Leftover: users with unmet demand take it where their jobs can run.
	for _, t := range types {
		if left[t] <= 1e-12 {
			continue
		}
		d := make([]float64, len(users))
		w := make([]float64, len(users))
		for i, u := range users {
			unmet := total[i] - out.Total(u.Name)
			d[i] = math.Max(0, math.Min(unmet, can[i][t]-out[u.Name][t]))
			w[i] = u.Tickets
		}
		got := WaterFill(left[t], d, w)
		for i, u := range users {
			if got[i] > 0 {
				out[u.Name][t] += got[i]
			}
		}
	}
	return out
}

// WaterFill splits capacity over claimants in proportion to their weights,
// each capped at its demand, handing what a capped claimant leaves to the
// others: got[i] = min(demand[i], level·weight[i]) with Σ got = min(capacity,
// Σ demand). A claimant with weight 0 gets nothing.
func WaterFill(capacity float64, demand, weight []float64) []float64 {
	got := make([]float64, len(demand))
	idx := make([]int, 0, len(demand))
	for i := range demand {
		if demand[i] > 0 && weight[i] > 0 {
			idx = append(idx, i)
		}
	}
	// Claimants in order of the level at which they saturate.
	sort.Slice(idx, func(a, b int) bool {
		return demand[idx[a]]/weight[idx[a]] < demand[idx[b]]/weight[idx[b]]
	})
	left, wsum := capacity, 0.0
	for _, i := range idx {
		wsum += weight[i]
	}
	for k, i := range idx {
		if left <= 0 || wsum <= 0 {
			break
		}
		level := left / wsum
		if demand[i]/weight[i] <= level {
			got[i] = demand[i]
		} else {
			for _, r := range idx[k:] {
				got[r] = level * weight[r]
			}
			return got
		}
		left -= got[i]
		wsum -= weight[i]
	}
	return got
}

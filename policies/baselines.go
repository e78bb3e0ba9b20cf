package policies

import (
	"math"
	"math/rand"
)

func init() {
	define("isolated", func(in *instance, p *Problem) (*Allocation, error) {
		a := newAllocation("isolated", in)
		units := make([]unit, in.n())
		for m := range units {
			units[m] = unit{jobs: []int{m}, pair: -1}
		}
		equalShare(a, in, units)
		a.Objective = minNormalized(a, in)
		return a, nil
	})
	define("fifo_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return greedyQueue("fifo_perf", in, arrivalOrder(in), in.tput, false), nil
	})
	define("fifo", func(in *instance, p *Problem) (*Allocation, error) {
		return greedyQueue("fifo", in, arrivalOrder(in), agnosticOnes(in), false), nil
	})
	define("fifo_packed", func(in *instance, p *Problem) (*Allocation, error) {
		a := greedyQueue("fifo_packed", in, arrivalOrder(in), in.tput, false)
		packWaiting(a, in, arrivalOrder(in))
		return a, nil
	})
	define("shortest_job_first_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return greedyQueue("shortest_job_first_perf", in, shortestFirst(in, in.tput), in.tput, true), nil
	})
	define("shortest_job_first", func(in *instance, p *Problem) (*Allocation, error) {
		return greedyQueue("shortest_job_first", in, shortestFirst(in, bestEverywhere(in)), agnosticOnes(in), true), nil
	})
	define("gandiva", func(in *instance, p *Problem) (*Allocation, error) {
		return gandiva(in, p.Seed), nil
	})
}

// unit is what an equal share is handed to: one job, or a pair (index into
// the instance's pairs) sharing GPUs.
type unit struct {
	jobs []int
	pair int
}

// equalShare gives every unit N_j/(n·sf) of each type it can run on, scaled
// down so no unit exceeds all of its time (the isolated 1/n split).
func equalShare(a *Allocation, in *instance, units []unit) {
	n := float64(len(units))
	for _, u := range units {
		m := u.jobs[0]
		row := make([]float64, in.k())
		sum := 0.0
		for j := range row {
			can := in.tput[m][j] > 0
			if u.pair >= 0 {
				can = in.pairT[u.pair][j][0] > 0 && in.pairT[u.pair][j][1] > 0
			}
			if can {
				row[j] = in.counts[j] / (n * in.sf[m])
				sum += row[j]
			}
		}
		if sum > 1 {
			for j := range row {
				row[j] /= sum
			}
		}
		if u.pair >= 0 {
			copy(a.PairX[u.pair], row)
		} else {
			copy(a.X[m], row)
		}
	}
}

// minNormalized is the LAS objective of any allocation: the least
// Σ_j T_mj·sf·X_mj/(w·P_m) over jobs that can run somewhere.
func minNormalized(a *Allocation, in *instance) float64 {
	eff := effective(a, in)
	best := math.Inf(1)
	for m := range eff {
		share := in.equalShareThroughput(m)
		if share <= 0 {
			continue
		}
		best = math.Min(best, eff[m]*in.sf[m]/(in.weight[m]*share))
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// effective is each job's throughput under a (singles and pairs).
func effective(a *Allocation, in *instance) []float64 {
	eff := make([]float64, in.n())
	for m := range a.X {
		for j, x := range a.X[m] {
			eff[m] += in.tput[m][j] * x
		}
	}
	for q := range a.PairX {
		for j, x := range a.PairX[q] {
			eff[in.pairA[q]] += in.pairT[q][j][0] * x
			eff[in.pairB[q]] += in.pairT[q][j][1] * x
		}
	}
	return eff
}

func arrivalOrder(in *instance) []int {
	out := make([]int, in.n())
	for i := range out {
		out[i] = i
	}
	return out
}

// bestEverywhere is the agnostic view for time-based policies: every type a
// job runs on gets the job's fastest-type throughput.
func bestEverywhere(in *instance) [][]float64 {
	out := make([][]float64, in.n())
	for m := range out {
		best := 0.0
		for _, v := range in.tput[m] {
			best = math.Max(best, v)
		}
		out[m] = make([]float64, in.k())
		for j, v := range in.tput[m] {
			if v > 0 {
				out[m][j] = best
			}
		}
	}
	return out
}

// shortestFirst orders jobs by remaining time on their fastest type.
func shortestFirst(in *instance, tput [][]float64) []int {
	order := arrivalOrder(in)
	rem := make([]float64, in.n())
	for m := range rem {
		best := 0.0
		for _, v := range tput[m] {
			best = math.Max(best, v)
		}
		rem[m] = in.jobs[m].RemainingSteps / best
	}
	sortStable(order, func(x, y int) bool { return rem[x] < rem[y] })
	return order
}

// greedyQueue walks jobs in order; each takes whole GPUs (X = 1) on its
// fastest type (by tput) with room. Without backfill the walk stops at the
// first job that does not fit (FIFO's head-of-line blocking, as in Gavel).
func greedyQueue(name string, in *instance, order []int, tput [][]float64, backfill bool) *Allocation {
	a := newAllocation(name, in)
	free := append([]float64(nil), in.counts...)
	types := make([]int, in.k())
	for _, m := range order {
		for j := range types {
			types[j] = j
		}
		sortStable(types, func(x, y int) bool { return tput[m][x] > tput[m][y] })
		placed := false
		for _, j := range types {
			if in.tput[m][j] > 0 && free[j] >= in.sf[m] {
				a.X[m][j] = 1
				free[j] -= in.sf[m]
				placed = true
				break
			}
		}
		if !placed && !backfill {
			break
		}
	}
	placedCount := 0.0
	for m := range a.X {
		for _, x := range a.X[m] {
			placedCount += x
		}
	}
	a.Objective = placedCount
	return a
}

// packWaiting lets jobs left out by a queue policy share a GPU with a placed
// job of the same scale factor when the pair's combined normalized
// throughput beats the placed job running alone.
func packWaiting(a *Allocation, in *instance, order []int) {
	placedOn := make([]int, in.n())
	for m := range placedOn {
		placedOn[m] = -1
		for j, x := range a.X[m] {
			if x > 0 {
				placedOn[m] = j
			}
		}
	}
	paired := make([]bool, in.n())
	byJob := map[int][]int{}
	for q := range in.pairA {
		byJob[in.pairA[q]] = append(byJob[in.pairA[q]], q)
		byJob[in.pairB[q]] = append(byJob[in.pairB[q]], q)
	}
	for _, w := range order {
		if placedOn[w] >= 0 || paired[w] {
			continue
		}
		bestQ, bestGain := -1, 1.0
		for _, q := range byJob[w] {
			other, wi, oi := in.pairA[q], 1, 0
			if other == w {
				other, wi, oi = in.pairB[q], 0, 1
			}
			j := placedOn[other]
			if j < 0 || paired[other] || in.tput[other][j] <= 0 || in.tput[w][j] <= 0 {
				continue
			}
			gain := in.pairT[q][j][oi]/in.tput[other][j] + in.pairT[q][j][wi]/in.tput[w][j]
			if gain > bestGain {
				bestQ, bestGain = q, gain
			}
		}
		if bestQ < 0 {
			continue
		}
		other := in.pairA[bestQ]
		if other == w {
			other = in.pairB[bestQ]
		}
		j := placedOn[other]
		a.X[other][j] = 0
		a.PairX[bestQ][j] = 1
		paired[w], paired[other] = true, true
	}
}

// gandiva is the Gandiva-style baseline (as Gavel models it): when more GPUs
// are requested than exist, jobs are paired at random with partners of equal
// scale factor whose pair does not lose throughput; every unit then gets an
// equal share of every type.
func gandiva(in *instance, seed int64) *Allocation {
	a := newAllocation("gandiva", in)
	requested, total := 0.0, 0.0
	for m := range in.sf {
		requested += in.sf[m]
	}
	for _, c := range in.counts {
		total += c
	}
	var units []unit
	used := make([]bool, in.n())
	if requested > total && len(in.pairA) > 0 {
		// The pair index is built only when pairing happens: a dense
		// n x n table of pair+1 (0: no pair), the last pair listed winning
		// as in a map; a few hundred KB where a map of both orders of
		// tens of thousands of pairs cost milliseconds per recompute.
		n := in.n()
		pairOf := make([]int32, n*n)
		for q := range in.pairA {
			pairOf[in.pairA[q]*n+in.pairB[q]] = int32(q + 1)
			pairOf[in.pairB[q]*n+in.pairA[q]] = int32(q + 1)
		}
		rng := rand.New(rand.NewSource(seed))
		perm := rng.Perm(in.n())
		for i, x := range perm {
			if used[x] {
				continue
			}
			for _, y := range perm[i+1:] {
				if used[y] {
					continue
				}
				q := int(pairOf[x*n+y]) - 1
				if q < 0 {
					continue
				}
				a0, b0 := in.pairA[q], in.pairB[q]
				ratio := 0.0
				for j := range in.types {
					if in.tput[a0][j] > 0 && in.tput[b0][j] > 0 {
						ratio += in.pairT[q][j][0]/in.tput[a0][j] + in.pairT[q][j][1]/in.tput[b0][j]
					}
				}
				if ratio < 1 {
					continue
				}
				used[x], used[y] = true, true
				units = append(units, unit{jobs: []int{a0, b0}, pair: q})
				break
			}
		}
	}
	for m := 0; m < in.n(); m++ {
		if !used[m] {
			units = append(units, unit{jobs: []int{m}, pair: -1})
		}
	}
	equalShare(a, in, units)
	a.Objective = minNormalized(a, in)
	return a
}

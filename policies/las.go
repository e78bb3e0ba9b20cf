package policies

import "math"

func init() {
	define("max_min_fairness_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return solveLAS("max_min_fairness_perf", in, in.tput)
	})
	define("max_min_fairness", func(in *instance, p *Problem) (*Allocation, error) {
		return solveLAS("max_min_fairness", in, agnosticOnes(in))
	})
	define("max_min_fairness_packed", func(in *instance, p *Problem) (*Allocation, error) {
		return solveLASPacked("max_min_fairness_packed", in)
	})
}

// solveLASPacked is heterogeneity-aware LAS with space sharing: pair
// variables for every measured pair of equal scale factor, normalized like the
// singles, generated as columns on demand (see solveLP).
func solveLASPacked(name string, in *instance) (*Allocation, error) {
	mm := lasProblem(in, in.tput)
	share := make([]float64, in.n())
	for m := range share {
		share[m] = in.equalShareThroughput(m)
	}
	pairs := pairRatesFor(in, func(m int) float64 {
		if mm.w[m] == 0 {
			return 0
		}
		return share[m]
	})
	a := newAllocation(name, in)
	t, err := solveMaxMin(a, in, mm, pairs)
	if err != nil {
		return nil, err
	}
	fillLeftover(a, in, mm.e)
	a.Objective = t
	return a, nil
}

// agnosticOnes is the heterogeneity-agnostic view for LAS: every type a job
// can run on has throughput 1 (types where it cannot run stay 0).
func agnosticOnes(in *instance) [][]float64 {
	out := make([][]float64, in.n())
	for m := range out {
		out[m] = make([]float64, in.k())
		for j, v := range in.tput[m] {
			if v > 0 {
				out[m][j] = 1
			}
		}
	}
	return out
}

// lasProblem builds Gavel's LAS program: maximize min_m Σ_j T_mj·sf_m·X_mj /
// (w_m·P_m), with P_m the job's throughput on an equal share of every type.
// In GPU time r = sf·X the job's row is Σ_j (T_mj/P_m)·r_mj ≥ w_m·t. Jobs that
// can run on no type with GPUs take no part (they would pin t at 0).
func lasProblem(in *instance, tput [][]float64) *maxMin {
	n, k := in.n(), in.k()
	p := &maxMin{capacity: in.counts, e: make([][]float64, n), cap: in.sf,
		w: make([]float64, n), floor: make([]float64, n)}
	rows := make([]float64, n*k) // one allocation for the n rows
	for m := 0; m < n; m++ {
		var num, den float64
		for j := 0; j < k; j++ {
			num += tput[m][j] * in.counts[j]
			den += in.counts[j]
		}
		share := num / den
		p.e[m] = rows[m*k : m*k+k : m*k+k]
		if share <= 0 {
			continue // cannot run on any type that has GPUs
		}
		for j := 0; j < k; j++ {
			if in.counts[j] > 0 {
				p.e[m][j] = tput[m][j] / share
			}
		}
		p.w[m] = in.weight[m]
	}
	return p
}

func solveLAS(name string, in *instance, tput [][]float64) (*Allocation, error) {
	mm := lasProblem(in, tput)
	mm.seedPrices = in.seedPrices
	res, err := mm.solve()
	if err != nil {
		return nil, err
	}
	in.learnedPrices = res.prices
	a := newAllocation(name, in)
	setFromGPUTime(a, in, res.r)
	fillLeftover(a, in, mm.e)
	a.Objective = res.t
	return a, nil
}

// setFromGPUTime converts GPU time r = sf·X back into X.
func setFromGPUTime(a *Allocation, in *instance, r [][]float64) {
	for m := range r {
		for j, v := range r[m] {
			a.X[m][j] = v / in.sf[m]
		}
	}
}

// fillLeftover hands capacity the optimum left idle to the jobs that can use
// it, poorest (lowest normalized rate e·r) first, each on its best types. It
// only adds time, so every job's throughput is at least the optimum's: the
// objective of every max-min-style policy is kept and the allocation becomes
// Pareto-better. Gavel's interior-point solver spreads such slack implicitly.
func fillLeftover(a *Allocation, in *instance, e [][]float64) {
	n, k := in.n(), in.k()
	free := make([]float64, k)
	copy(free, in.counts)
	level := make([]float64, n)
	rowSum := make([]float64, n)
	for m := 0; m < n; m++ {
		for j := 0; j < k; j++ {
			free[j] -= in.sf[m] * a.X[m][j]
			level[m] += e[m][j] * in.sf[m] * a.X[m][j]
			rowSum[m] += a.X[m][j]
		}
	}
	for p := range a.PairX {
		for j := 0; j < k; j++ {
			free[j] -= in.sf[in.pairA[p]] * a.PairX[p][j]
			rowSum[in.pairA[p]] += a.PairX[p][j]
			rowSum[in.pairB[p]] += a.PairX[p][j]
		}
	}
	anyFree := false
	for j := range free {
		if free[j] > 1e-9 {
			anyFree = true
		}
	}
	if !anyFree {
		return
	}
	order := make([]int, n)
	for m := range order {
		order[m] = m
	}
	sortStable(order, func(x, y int) bool { return level[x] < level[y] })
	types := make([]int, k)
	for _, m := range order {
		for j := range types {
			types[j] = j
		}
		sortStable(types, func(x, y int) bool { return in.tput[m][x] > in.tput[m][y] })
		for _, j := range types {
			room := 1 - rowSum[m]
			if room <= 1e-12 {
				break
			}
			if in.tput[m][j] <= 0 || free[j] <= 1e-12 {
				continue
			}
			add := math.Min(room, free[j]/in.sf[m])
			a.X[m][j] += add
			rowSum[m] += add
			free[j] -= add * in.sf[m]
		}
	}
}

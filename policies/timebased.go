package policies

import (
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/policies/lp"
)

func init() {
	for _, v := range []struct {
		suffix string
		view   func(*instance) [][]float64
		packed bool
	}{{"_perf", func(in *instance) [][]float64 { return in.tput }, false},
		{"", bestEverywhere, false},
		{"_packed", func(in *instance) [][]float64 { return in.tput }, true}} {
		v := v
		define("finish_time_fairness"+v.suffix, func(in *instance, p *Problem) (*Allocation, error) {
			return finishTimeFairness("finish_time_fairness"+v.suffix, in, v.view(in), v.packed)
		})
		define("min_total_duration"+v.suffix, func(in *instance, p *Problem) (*Allocation, error) {
			return makespan("min_total_duration"+v.suffix, in, v.view(in), v.packed)
		})
	}
}

// pairRatesFor builds pair columns whose per-GPU-time rates are the pair
// throughputs divided by each member's divisor (the same normalization the
// singles use); nil when the instance has no pairs.
func pairRatesFor(in *instance, divisor func(m int) float64) *pairRates {
	if len(in.pairA) == 0 {
		return nil
	}
	pr := &pairRates{a: in.pairA, b: in.pairB, sf: make([]float64, 0, len(in.pairA)),
		rateA: rows(len(in.pairA), in.k()), rateB: rows(len(in.pairA), in.k())}
	div := make([]float64, in.n())
	for m := range div {
		div[m] = divisor(m)
	}
	for q := range in.pairA {
		a, b := in.pairA[q], in.pairB[q]
		ra, rb := pr.rateA[q], pr.rateB[q]
		da, db := div[a], div[b]
		for j := range in.types {
			if da > 0 && in.counts[j] > 0 {
				ra[j] = in.pairT[q][j][0] / da
			}
			if db > 0 && in.counts[j] > 0 {
				rb[j] = in.pairT[q][j][1] / db
			}
		}
		pr.sf = append(pr.sf, in.sf[a])
	}
	return pr
}

// solveMaxMin runs the decomposition, or the LP with pair columns when pairs
// take part, and writes the result into a. The LP starts with the hint's
// pair columns and, unless in.coldLP, from the hint's basis.
func solveMaxMin(a *Allocation, in *instance, mm *maxMin, pairs *pairRates) (float64, error) {
	if pairs == nil {
		res, err := mm.solve()
		if err != nil {
			return 0, err
		}
		setFromGPUTime(a, in, res.r)
		return res.t, nil
	}
	seed := seedPairCols(in)
	var start *lpBasis
	if !in.coldLP && in.seedBasis != nil {
		start = in.seedBasis.index(in, seed)
	}
	res, pr, end, err := mm.solveLPWarm(pairs, seed, start, !in.coldLP)
	if err != nil {
		return 0, err
	}
	setFromGPUTime(a, in, res.r)
	col := func(q, j int) pairCol { return pairCol{in.ids[in.pairA[q]], in.ids[in.pairB[q]], in.types[j]} }
	if in.coldLP {
		// SolveCold hands on only the columns that had a share: the point
		// reached before bases were carried.
		in.learnedPairs = in.learnedPairs[:0]
		for q := range pr {
			for j, v := range pr[q] {
				if v > 0 {
					in.learnedPairs = append(in.learnedPairs, col(q, j))
				}
				a.PairX[q][j] = v / pairs.sf[q]
			}
		}
		return res.t, nil
	}
	// The next solve starts with the columns that had a share or were in
	// the basis (a basic column at zero keeps the basis whole), and from
	// this basis: the next recompute's (the hint), and the next call of a
	// policy that solves several programs in one solve (finish-time
	// fairness's bisection).
	in.learnedPairs = nil
	for _, ps := range end.pairs { // the only pair columns that can be nonzero
		if pr[ps.q][ps.j] > 0 || ps.st != lp.BasisAtLower {
			in.learnedPairs = append(in.learnedPairs, col(ps.q, ps.j))
		}
		a.PairX[ps.q][ps.j] = pr[ps.q][ps.j] / pairs.sf[ps.q]
	}
	in.learnedBasis = end.named(in)
	in.seedPairs, in.seedBasis = in.learnedPairs, in.learnedBasis
	return res.t, nil
}

// throughputProblem is the maxMin program "Σ_j T_mj·X_mj ≥ need_m·t": in GPU
// time the rate is T_mj/(sf·need_m). Jobs with need 0 take no part.
func throughputProblem(in *instance, tput [][]float64, need []float64) *maxMin {
	n, k := in.n(), in.k()
	mm := &maxMin{capacity: in.counts, e: make([][]float64, n), cap: in.sf,
		w: make([]float64, n), floor: make([]float64, n)}
	for m := 0; m < n; m++ {
		mm.e[m] = make([]float64, k)
		if need[m] <= 0 {
			continue
		}
		any := false
		for j := 0; j < k; j++ {
			if in.counts[j] > 0 && tput[m][j] > 0 {
				mm.e[m][j] = tput[m][j] / (in.sf[m] * need[m])
				any = true
			}
		}
		if any {
			mm.w[m] = 1
		}
	}
	return mm
}

// makespan minimizes the time M by which every job finishes: Σ_j T_mj X_mj ≥
// R_m/M for all m. With t = 1/M that is one max-min program, solved exactly
// (Gavel binary-searches M over feasibility LPs; the optimum is the same).
func makespan(name string, in *instance, tput [][]float64, packed bool) (*Allocation, error) {
	need := make([]float64, in.n())
	for m := range need {
		need[m] = in.jobs[m].RemainingSteps
	}
	mm := throughputProblem(in, tput, need)
	var pairs *pairRates
	if packed {
		pairs = pairRatesFor(in, func(m int) float64 { return in.sf[m] * need[m] })
	}
	a := newAllocation(name, in)
	t, err := solveMaxMin(a, in, mm, pairs)
	if err != nil {
		return nil, err
	}
	fillLeftover(a, in, mm.e)
	a.Objective = 0
	if t > 0 && !math.IsInf(t, 1) {
		a.Objective = 1 / t // seconds
	}
	return a, nil
}

// finishTimeFairness minimizes the largest ρ_m = (t_m + R_m/thr_m(X)) /
// (t_iso_m + R_m/T_iso_m) (Themis' finish-time fairness as Gavel defines it),
// where T_iso_m is the job's throughput on an equal 1/n share. For a given ρ
// every job needs thr_m ≥ R_m/(ρ·D_m − t_m), a max-min feasibility check, so
// ρ is found by bisection between a lower bound (each job alone on its best
// type) and the isolated allocation's ρ (always feasible).
func finishTimeFairness(name string, in *instance, tput [][]float64, packed bool) (*Allocation, error) {
	n := in.n()
	iso := newAllocation("isolated", in)
	units := make([]unit, n)
	for m := range units {
		units[m] = unit{jobs: []int{m}, pair: -1}
	}
	equalShare(iso, in, units)
	tIso := make([]float64, n)
	for m := range iso.X {
		for j, x := range iso.X[m] {
			tIso[m] += tput[m][j] * x
		}
	}
	denom := make([]float64, n)
	lo, hi := 0.0, 0.0
	active := make([]bool, n)
	for m := 0; m < n; m++ {
		job := in.jobs[m]
		if tIso[m] <= 0 || job.RemainingSteps <= 0 {
			continue
		}
		active[m] = true
		ti := job.TimeSinceStartS
		if job.IsolatedTimeS != nil {
			ti = *job.IsolatedTimeS
		}
		denom[m] = ti + job.RemainingSteps/tIso[m]
		best := 0.0
		for j, v := range tput[m] {
			if in.counts[j] > 0 {
				best = math.Max(best, v)
			}
		}
		lo = math.Max(lo, (job.TimeSinceStartS+job.RemainingSteps/best)/denom[m])
		hi = math.Max(hi, (job.TimeSinceStartS+job.RemainingSteps/tIso[m])/denom[m])
	}
	needAt := func(rho float64) []float64 {
		need := make([]float64, n)
		for m := 0; m < n; m++ {
			if active[m] {
				slack := rho*denom[m] - in.jobs[m].TimeSinceStartS
				need[m] = in.jobs[m].RemainingSteps / slack
			}
		}
		return need
	}
	try := func(rho float64) (*Allocation, *maxMin, bool, error) {
		need := needAt(rho)
		mm := throughputProblem(in, tput, need)
		var pairs *pairRates
		if packed {
			pairs = pairRatesFor(in, func(m int) float64 {
				if need[m] <= 0 {
					return 0
				}
				return in.sf[m] * need[m]
			})
		}
		a := newAllocation(name, in)
		t, err := solveMaxMin(a, in, mm, pairs)
		if err != nil {
			return nil, nil, false, err
		}
		return a, mm, t >= 1-1e-9, nil
	}
	if hi == 0 { // nothing left to run
		a := newAllocation(name, in)
		return a, nil
	}
	best, bestMM, ok, err := try(hi)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("finish-time fairness: isolated bound ρ=%g not feasible", hi)
	}
	for iter := 0; iter < 60 && hi-lo > 1e-7*hi; iter++ {
		mid := (lo + hi) / 2
		a, mm, feasible, err := try(mid)
		if err != nil {
			return nil, err
		}
		if feasible {
			hi, best, bestMM = mid, a, mm
		} else {
			lo = mid
		}
	}
	fillLeftover(best, in, bestMM.e)
	best.Objective = hi
	return best, nil
}

// seedPairCols maps the hint's pair columns onto this instance's pairs (those
// whose jobs and type are still there): the restricted LP starts with them,
// which warm-starts column generation across consecutive recomputes.
func seedPairCols(in *instance) [][2]int {
	if len(in.seedPairs) == 0 || len(in.pairA) == 0 {
		return nil
	}
	job := make(map[string]int, in.n())
	for m, id := range in.ids {
		job[id] = m
	}
	typ := make(map[string]int, in.k())
	for j, t := range in.types {
		typ[t] = j
	}
	type ref struct{ b, j int }
	byA := make([][]ref, in.n())
	any := false
	for _, c := range in.seedPairs {
		a, okA := job[c.a]
		b, okB := job[c.b]
		j, okT := typ[c.typ]
		if okA && okB && okT {
			byA[a] = append(byA[a], ref{b, j})
			any = true
		}
	}
	if !any {
		return nil
	}
	var seed [][2]int
	for q, a := range in.pairA {
		for _, r := range byA[a] {
			if r.b == in.pairB[q] {
				seed = append(seed, [2]int{q, r.j})
			}
		}
	}
	return seed
}

// namedBasis is an lpBasis by job ids and type names, to carry from one
// solve to the next (whose jobs and indices differ).
type namedBasis struct {
	ids, types []string
	lpBasis
	pairs map[pairCol]uint8
}

// named names b by in's jobs and types.
func (b *lpBasis) named(in *instance) *namedBasis {
	nb := &namedBasis{ids: in.ids, types: in.types, lpBasis: *b, pairs: make(map[pairCol]uint8, len(b.pairs))}
	nb.lpBasis.pairs = nil
	for _, ps := range b.pairs {
		if ps.st != lp.BasisAtLower {
			nb.pairs[pairCol{in.ids[in.pairA[ps.q]], in.ids[in.pairB[ps.q]], in.types[ps.j]}] = ps.st
		}
	}
	return nb
}

// index maps nb onto in's jobs, types and the seeded pair columns: jobs,
// types and columns nb does not know get noEntry (the defaults).
func (nb *namedBasis) index(in *instance, seed [][2]int) *lpBasis {
	n, k := in.n(), in.k()
	old := make(map[string]int, len(nb.ids))
	for m, id := range nb.ids {
		old[id] = m
	}
	typ := make([]int, k) // old type index, or -1
	for j, t := range in.types {
		typ[j] = -1
		for oj, ot := range nb.types {
			if ot == t {
				typ[j] = oj
			}
		}
	}
	ok := len(nb.types)
	b := &lpBasis{t: nb.t, x: make([]uint8, n*k), rows: make([]uint8, n*3), capRows: make([]uint8, k)}
	for i := range b.x {
		b.x[i] = noEntry
	}
	for i := range b.rows {
		b.rows[i] = noEntry
	}
	for m, id := range in.ids {
		om, found := old[id]
		if !found {
			continue
		}
		for j := 0; j < k; j++ {
			if typ[j] >= 0 {
				b.x[m*k+j] = nb.x[om*ok+typ[j]]
			}
		}
		copy(b.rows[m*3:m*3+3], nb.rows[om*3:om*3+3])
	}
	for j := range b.capRows {
		b.capRows[j] = noEntry
		if typ[j] >= 0 {
			b.capRows[j] = nb.capRows[typ[j]]
		}
	}
	for _, c := range seed {
		q, j := c[0], c[1]
		if st, found := nb.pairs[pairCol{in.ids[in.pairA[q]], in.ids[in.pairB[q]], in.types[j]}]; found {
			b.pairs = append(b.pairs, pairStatus{q, j, st})
		}
	}
	return b
}

package policies

import (
	"errors"
	"math"

	"github.com/rondo-sched/rondo/policies/lp"
)

func init() {
	define("max_min_fairness_water_filling_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return waterFilling("max_min_fairness_water_filling_perf", in, p, in.tput, false)
	})
	define("max_min_fairness_water_filling_packed", func(in *instance, p *Problem) (*Allocation, error) {
		return waterFilling("max_min_fairness_water_filling_packed", in, p, in.tput, true)
	})
	define("max_min_fairness_water_filling", func(in *instance, p *Problem) (*Allocation, error) {
		return waterFilling("max_min_fairness_water_filling", in, p, agnosticOnes(in), false)
	})
}

// waterFilling is Gavel's hierarchical policy (§4.2, Appendix A.1): raise
// every unfrozen job's normalized throughput at a rate proportional to its
// weight until some jobs cannot rise any more (bottlenecked); freeze those,
// hand their entity's weight on (fairness: spread over the entity's other
// jobs; FIFO: to the next job in arrival order) and repeat, never letting a
// job drop below its level so far. The result is Pareto-efficient.
func waterFilling(name string, in *instance, p *Problem, tput [][]float64, packed bool) (*Allocation, error) {
	n := in.n()
	base := lasProblem(in, tput)
	var pairs *pairRates
	if packed {
		pairs = pairRatesFor(in, func(m int) float64 {
			if base.w[m] == 0 {
				return 0
			}
			return in.equalShareThroughput(m)
		})
	}
	entityWeight := func(e string) float64 {
		if ent, ok := p.Entities[e]; ok && ent.Weight > 0 {
			return ent.Weight
		}
		return 1
	}
	isFIFO := func(e string) bool { return p.Entities[e].Policy == "fifo" }

	frozen := make([]bool, n)
	floor := make([]float64, n)
	for m := 0; m < n; m++ {
		if base.w[m] == 0 { // cannot run on any type with GPUs
			frozen[m] = true
		}
	}
	var warm, warmPairs [][]float64
	for iter := 0; iter <= n; iter++ {
		w := make([]float64, n)
		// Entities in first-seen order keep the walk deterministic.
		var order []string
		members := map[string][]int{}
		for m := 0; m < n; m++ {
			if frozen[m] {
				continue
			}
			e := in.jobs[m].Entity
			if _, ok := members[e]; !ok {
				order = append(order, e)
			}
			members[e] = append(members[e], m)
		}
		if len(order) == 0 {
			break
		}
		for _, e := range order {
			ms := members[e]
			if isFIFO(e) {
				w[ms[0]] = entityWeight(e)
				continue
			}
			sum := 0.0
			for _, m := range ms {
				sum += in.weight[m]
			}
			for _, m := range ms {
				w[m] = entityWeight(e) * in.weight[m] / sum
			}
		}
		mm := &maxMin{capacity: base.capacity, e: base.e, cap: base.cap, w: w, floor: floor, warm: warm}
		var levels []float64
		var stuck []int
		var err error
		if pairs == nil {
			levels, stuck, err = waterFillStep(mm)
		} else {
			levels, stuck, warmPairs, err = waterFillStepLP(mm, pairs, warmPairs)
		}
		if err != nil {
			return nil, err
		}
		for _, m := range stuck {
			frozen[m] = true
		}
		if waterFillTrace != nil {
			waterFillTrace(iter, mm.warm, stuck)
		}
		floor = levels
		warm = mm.warm
	}
	a := newAllocation(name, in)
	if warm != nil {
		setFromGPUTime(a, in, warm)
	}
	for q := range warmPairs {
		for j, v := range warmPairs[q] {
			a.PairX[q][j] = v / pairs.sf[q]
		}
	}
	fillLeftover(a, in, base.e)
	a.Objective = minNormalized(a, in)
	return a, nil
}

// waterFillStep raises the unfrozen jobs by the decomposition and finds the
// bottlenecked ones. It leaves the new point in mm.warm and returns the
// levels every job keeps from now on.
func waterFillStep(mm *maxMin) ([]float64, []int, error) {
	n := len(mm.e)
	if mm.warm != nil {
		mm.warmT = warmLevel(mm, mm.warm)
	}
	res, err := mm.solve()
	if err != nil {
		return nil, nil, err
	}
	levels := make([]float64, n)
	var cand []int
	for m := 0; m < n; m++ {
		levels[m] = mm.levelOf(m, res.t)
		if mm.w[m] > 0 {
			cand = append(cand, m)
		}
	}
	// The master is feasible only to Clp's tolerance: pull the point
	// exactly inside the capacities and keep its actual levels as the
	// floors, so the next warm start is feasible.
	projectToCapacity(mm, res.r)
	for m := range levels {
		levels[m] = math.Min(levels[m], levelOfPoint(mm, m, res.r[m]))
	}
	// t is optimal only to the decomposition's gap; summed over the jobs
	// that slack could let any one job rise by up to Σw·gap, which is not a
	// real rise.
	sumW := 0.0
	for _, m := range cand {
		sumW += mm.w[m]
	}
	stuck, err := bottlenecked(mm, levels, cand, res.r, 4*sumW*math.Max(res.gap, 0))
	if err != nil {
		return nil, nil, err
	}
	if len(stuck) == 0 && len(cand) > 0 {
		// In exact arithmetic some job is always stuck at the optimum; when
		// tolerances hide it, freeze the most limited job (the least own
		// headroom) so the walk still ends.
		stuck = []int{leastHeadroom(mm, cand, levels)}
	}
	mm.warm = res.r
	return levels, stuck, nil
}

// waterFillStepLP is the same step with space sharing, by plain LPs: one
// max-min LP with pair columns, then one LP per unfrozen job asking how high
// it can go while every job keeps its level. Exact but slow: used where pair
// variables couple jobs and the decomposition does not apply.
func waterFillStepLP(mm *maxMin, pairs *pairRates, prev [][]float64) ([]float64, []int, [][]float64, error) {
	n := len(mm.e)
	mm.warm = nil
	var seed [][2]int
	for q := range prev {
		for j, v := range prev[q] {
			if v > 0 {
				seed = append(seed, [2]int{q, j})
			}
		}
	}
	res, pr, err := mm.solveLPFrom(pairs, seed)
	if err != nil {
		return nil, nil, nil, err
	}
	// Probes keep every other job within 1e-9 of its level (less would let
	// Clp's tolerance call them infeasible; more would hand the probed job
	// slack it does not really have); the next step's floors sit 1e-6 below,
	// safely inside what Clp can reproduce.
	levels := make([]float64, n)
	probeFloors := make([]float64, n)
	for m := range levels {
		lv := mm.levelOf(m, res.t)
		levels[m] = lv * (1 - 1e-6)
		probeFloors[m] = lv * (1 - 1e-9)
	}
	seed = seed[:0]
	for q := range pr {
		for j, v := range pr[q] {
			if v > 0 {
				seed = append(seed, [2]int{q, j})
			}
		}
	}
	var stuck []int
	bestM, bestRoom := -1, math.Inf(1)
	for m := 0; m < n; m++ {
		if mm.w[m] <= 0 {
			continue
		}
		one := make([]float64, n)
		one[m] = 1
		floors := append([]float64(nil), probeFloors...)
		floors[m] = 0
		probe := &maxMin{capacity: mm.capacity, e: mm.e, cap: mm.cap, w: one, floor: floors}
		top, _, err := probe.solveLPFrom(pairs, seed)
		if errors.Is(err, lp.ErrInfeasible) {
			stuck = append(stuck, m) // no room even to stay: cannot rise
			continue
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if top.t <= probeFloors[m]+math.Max(riseEps(probeFloors[m]), 1e-5*probeFloors[m]) {
			stuck = append(stuck, m)
		}
		if room := (top.t - probeFloors[m]) / math.Max(probeFloors[m], 1e-9); room < bestRoom {
			bestM, bestRoom = m, room
		}
	}
	if len(stuck) == 0 && bestM >= 0 {
		// Column generation can stop a hair short of the optimum; the job
		// with the least room to rise is then the bottleneck.
		stuck = []int{bestM}
	}
	mm.warm = res.r
	return levels, stuck, pr, nil
}

// waterFillTrace, when set (by tests), sees each iteration's GPU time and
// the jobs it froze.
var waterFillTrace func(iter int, r [][]float64, frozen []int)

// projectToCapacity scales down each type's use where it exceeds capacity.
func projectToCapacity(p *maxMin, r [][]float64) {
	for j, c := range p.capacity {
		use := 0.0
		for m := range r {
			use += r[m][j]
		}
		if use > c {
			f := c / use
			for m := range r {
				r[m][j] *= f
			}
		}
	}
}

func levelOfPoint(p *maxMin, m int, r []float64) float64 {
	lv := 0.0
	for j, v := range r {
		lv += p.e[m][j] * v
	}
	return lv
}

// leastHeadroom picks the candidate whose level is closest to the most it
// could reach alone (its own cap on its best types), ties by index.
func leastHeadroom(p *maxMin, cand []int, levels []float64) int {
	best, bestRatio := cand[0], math.Inf(1)
	for _, m := range cand {
		top := 0.0
		for _, v := range p.e[m] {
			top = math.Max(top, v*p.cap[m])
		}
		if r := top / math.Max(levels[m], 1e-12); r < bestRatio {
			best, bestRatio = m, r
		}
	}
	return best
}

// warmLevel is the largest t a feasible point r supports for weights w.
func warmLevel(p *maxMin, r [][]float64) float64 {
	t := math.Inf(1)
	for m := range r {
		if p.w[m] <= 0 {
			continue
		}
		t = math.Min(t, levelOfPoint(p, m, r[m])/p.w[m])
	}
	if math.IsInf(t, 1) {
		return 0
	}
	return math.Max(0, t)
}

// bottlenecked returns the candidates whose level cannot rise while every
// job keeps at least its level. It solves, by the same decomposition,
// "maximize Σ_{m∈U} min(z_m, δ_m) with level_m ≥ base_m + z_m": jobs with z > 0
// in the optimum can rise; if the optimum is 0, none in U can (were one able
// to, its own improvement would be a feasible point of positive value). The
// jobs shown to rise leave U and the test repeats on the rest.
func bottlenecked(p *maxMin, levels []float64, cand []int, start [][]float64, slack float64) ([]int, error) {
	inU := make([]bool, len(levels))
	for _, m := range cand {
		inU[m] = true
	}
	for round := 0; round < len(cand)+1; round++ {
		z, value, err := riseTest(p, levels, inU, start, slack)
		if err != nil {
			return nil, err
		}
		moved := false
		for m := range inU {
			if inU[m] && z[m] > math.Max(riseEps(levels[m]), slack) {
				inU[m] = false
				moved = true
			}
		}
		if !moved || value <= 0 {
			break
		}
	}
	var out []int
	for _, m := range cand {
		if inU[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// riseCap bounds each job's counted rise (any positive cap gives an exact
// test); riseEps is the rise that counts as real, well above the LP
// solver's feasibility tolerance.
func riseCap(level float64) float64 { return 0.1 * math.Max(level, 1e-2) }
func riseEps(level float64) float64 { return math.Max(1e-6, 1e-4*riseCap(level)) }

func riseTest(p *maxMin, levels []float64, inU []bool, start [][]float64, slack float64) ([]float64, float64, error) {
	n, k := len(p.e), len(p.capacity)
	hulls := make([][]hullPoint, n)
	r := make([]float64, k)
	use0 := make([]float64, k)
	for m := range start {
		for j, v := range start[m] {
			use0[j] += v
		}
	}
	cols := []column{{t: 0, use: use0}}
	// pick returns job m's best rise under the current hull.
	pick := func(m int) (float64, float64) {
		h := hulls[m]
		top := h[len(h)-1].v
		b := levels[m]
		c0 := costAt(h, b)
		if !inU[m] {
			return 0, -c0
		}
		d := riseCap(b)
		bestZ, bestG := 0.0, -c0
		try := func(z float64) {
			if z < 0 || b+z > top*(1+1e-12) {
				return
			}
			g := math.Min(z, d) - costAt(h, b+z)
			if g > bestG+1e-15 || (g >= bestG-1e-15 && z > bestZ) {
				bestZ, bestG = z, g
			}
		}
		try(math.Min(d, top-b))
		for _, v := range h {
			if v.v > b && v.v < b+d {
				try(v.v - b)
			}
		}
		return bestZ, bestG
	}
	var mu, lambda []float64
	var lower float64
	var err error
	for pass := 0; pass < 500; pass++ {
		mu, lambda, lower, err = solveMaster(cols, p.capacity)
		if err != nil {
			return nil, 0, err
		}
		upper := 0.0
		for j := 0; j < k; j++ {
			upper += lambda[j] * p.capacity[j]
		}
		use := make([]float64, k)
		value := 0.0
		for m := 0; m < n; m++ {
			hulls[m] = hull(p.e[m], p.cap[m], lambda, hulls[m])
			z, g := pick(m)
			upper += g
			value += math.Min(z, riseCap(levels[m]))
			pointAt(hulls[m], levels[m]+z, p.cap[m], r)
			for j := range r {
				use[j] += r[j]
			}
		}
		if upper-lower <= 1e-9*math.Max(1, math.Abs(lower)) || upper-lower <= slack {
			break
		}
		cols = append(cols, column{t: value, use: use, lambda: append([]float64(nil), lambda...)})
	}
	z := make([]float64, n)
	for i, c := range cols {
		if i >= len(mu) || mu[i] <= 1e-13 || c.lambda == nil {
			continue
		}
		for m := 0; m < n; m++ {
			if !inU[m] {
				continue
			}
			hulls[m] = hull(p.e[m], p.cap[m], c.lambda, hulls[m])
			zm, _ := pick(m)
			z[m] += mu[i] * zm
		}
	}
	return z, lower, nil
}

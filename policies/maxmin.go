package policies

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/rondo-sched/rondo/policies/lp"
)

// maxMin is the problem behind LAS, weighted LAS, makespan, finish-time
// fairness probes and each water-filling step, in GPU-time variables
// r[m][j] = sf_m·X_mj:
//
//	maximize t  s.t.  Σ_j e[m][j]·r[m][j] ≥ max(floor[m], w[m]·t)   per job
//	                  Σ_j r[m][j] ≤ cap[m],  r ≥ 0                  per job
//	                  Σ_m r[m][j] ≤ capacity[j]                     per type
//
// Only the k capacity rows couple the jobs, so it is solved by Dantzig–Wolfe
// decomposition: a master LP over the k capacity rows plus a convexity row
// proposes prices λ; for given prices each job's cheapest way to reach a
// level is the lower convex hull of the origin and its k points
// (cap·e_j, cap·λ_j), so the best new column is found by one sweep over the
// jobs' breakpoints. The master's value is a feasible lower bound and the
// pricing gives a proven upper bound; we stop when they meet.
type maxMin struct {
	capacity []float64
	e        [][]float64
	cap      []float64
	w        []float64
	floor    []float64
	// warm is an optional feasible starting point (e.g. the previous
	// water-filling step) with its level warmT.
	warm  [][]float64
	warmT float64
	// seedPrices are capacity-price vectors from an earlier solve of a
	// similar problem; pricing at them first starts the master near the
	// optimum (a warm start across consecutive rounds).
	seedPrices [][]float64
}

type maxMinResult struct {
	t      float64
	r      [][]float64
	passes int
	gap    float64 // certified upper bound minus t
	// prices are the capacity prices of the columns in the final mix and
	// the final prices: seeds for the next, similar solve.
	prices [][]float64
}

// relTol is the certified relative optimality gap at which the
// decomposition stops (the dense master is exact enough to reach it).
const relTol = 1e-9

type column struct {
	t      float64
	use    []float64 // GPU time per type
	lambda []float64 // prices the column was priced at (nil: warm or zero column)
}

// hullPoint is a vertex of a job's lower convex hull in (level, cost): the
// whole cap spent on type typ (typ = -1 is the origin).
type hullPoint struct {
	v, c float64
	typ  int
}

// hull returns the lower convex hull of the origin and (cap·e_j, cap·λ_j),
// from the origin to the highest reachable level, ties broken by type index.
func hull(e []float64, cap float64, lambda []float64, buf []hullPoint) []hullPoint {
	pts := buf[:0]
	for j, ej := range e {
		if ej > 0 {
			pts = append(pts, hullPoint{v: cap * ej, c: cap * lambda[j], typ: j})
		}
	}
	// Insertion sort: k is a handful of GPU types, and this runs for every
	// job in every pass.
	for i := 1; i < len(pts); i++ {
		for j := i; j > 0 && hullLess(pts[j], pts[j-1]); j-- {
			pts[j], pts[j-1] = pts[j-1], pts[j]
		}
	}
	// The hull is built in place after the sorted points' slots: it never
	// has more entries than points seen so far plus the origin.
	out := append(pts[len(pts):len(pts)], hullPoint{typ: -1})
	for _, p := range pts {
		// Among equal levels keep only the cheapest (first after sorting).
		if last := out[len(out)-1]; last.typ >= 0 && last.v == p.v {
			continue
		}
		// A point cheaper than the hull so far at a higher level replaces
		// every vertex it dominates (cost must be non-decreasing).
		for len(out) > 1 {
			a, b := out[len(out)-2], out[len(out)-1]
			// Pop b if it lies on or above segment a→p.
			if (b.c-a.c)*(p.v-a.v) >= (p.c-a.c)*(b.v-a.v) {
				out = out[:len(out)-1]
				continue
			}
			break
		}
		out = append(out, p)
	}
	return out
}

func hullLess(a, b hullPoint) bool {
	if a.v != b.v {
		return a.v < b.v
	}
	if a.c != b.c {
		return a.c < b.c
	}
	return a.typ < b.typ
}

// pointAt writes into r the cheapest GPU-time split reaching level v on the
// hull (v must lie within it).
func pointAt(h []hullPoint, v, cap float64, r []float64) {
	for j := range r {
		r[j] = 0
	}
	if v <= 0 {
		return
	}
	for i := 1; i < len(h); i++ {
		if v <= h[i].v || i == len(h)-1 {
			a, b := h[i-1], h[i]
			theta := (v - a.v) / (b.v - a.v)
			theta = math.Min(1, math.Max(0, theta))
			if a.typ >= 0 {
				r[a.typ] += (1 - theta) * cap
			}
			r[b.typ] += theta * cap
			return
		}
	}
}

// costAt is the hull's cost at level v.
func costAt(h []hullPoint, v float64) float64 {
	if v <= 0 {
		return 0
	}
	for i := 1; i < len(h); i++ {
		if v <= h[i].v || i == len(h)-1 {
			a, b := h[i-1], h[i]
			return a.c + (b.c-a.c)*(v-a.v)/(b.v-a.v)
		}
	}
	return 0
}

type event struct {
	t, dslope float64
}

// price finds t maximizing t − Σ_m cost_m(max(floor_m, w_m·t)) under prices
// λ, returning t and that maximum.
func (p *maxMin) price(lambda []float64, hulls [][]hullPoint, events []event) (float64, float64, []event) {
	n := len(p.e)
	tmax := math.Inf(1)
	events = events[:0]
	constCost := 0.0
	for m := 0; m < n; m++ {
		hulls[m] = hull(p.e[m], p.cap[m], lambda, hulls[m])
		h := hulls[m]
		top := h[len(h)-1].v
		if p.w[m] <= 0 {
			constCost += costAt(h, p.floor[m])
			continue
		}
		tmax = math.Min(tmax, top/p.w[m])
		v0 := p.floor[m]
		constCost += costAt(h, v0)
		// Slope of the job's cost in t, starting where w·t passes floor.
		prev := 0.0
		for i := 1; i < len(h); i++ {
			if h[i].v <= v0 {
				continue
			}
			slope := p.w[m] * (h[i].c - h[i-1].c) / (h[i].v - h[i-1].v)
			start := math.Max(v0, h[i-1].v) / p.w[m]
			events = append(events, event{t: start, dslope: slope - prev})
			prev = slope
		}
	}
	if math.IsInf(tmax, 1) {
		return 0, -constCost, events
	}
	slices.SortFunc(events, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	// Sweep: F(t) = t − Σ cost, concave; walk right while its slope is > 0.
	t, slope := 0.0, 0.0
	for _, ev := range events {
		if ev.t > tmax {
			break
		}
		if ev.t > t {
			if slope >= 1 {
				break
			}
			t = ev.t
		}
		slope += ev.dslope
	}
	if slope < 1 {
		t = tmax
	}
	// Evaluate F(t) exactly.
	f := t
	for m := 0; m < n; m++ {
		f -= costAt(hulls[m], math.Max(p.floor[m], p.w[m]*t))
	}
	return t, f, events
}

// levelOf is job m's demanded level at t.
func (p *maxMin) levelOf(m int, t float64) float64 { return math.Max(p.floor[m], p.w[m]*t) }

func (p *maxMin) solve() (*maxMinResult, error) {
	n, k := len(p.e), len(p.capacity)
	// Solve in units where t is about 1 (the largest t the most limited
	// job could reach alone): the master's tolerances are absolute.
	scale := math.Inf(1)
	for m := 0; m < n; m++ {
		if p.w[m] > 0 {
			top := 0.0
			for _, v := range p.e[m] {
				top = math.Max(top, v*p.cap[m])
			}
			scale = math.Min(scale, top/p.w[m])
		}
	}
	if math.IsInf(scale, 1) || scale <= 0 {
		scale = 1
	}
	q := *p
	q.e = make([][]float64, n)
	q.floor = make([]float64, n)
	for m := range p.e {
		q.e[m] = make([]float64, k)
		for j, v := range p.e[m] {
			q.e[m][j] = v / scale
		}
		q.floor[m] = p.floor[m] / scale
	}
	q.warmT = p.warmT / scale
	// Prices are per GPU in units of t, so they scale with it.
	q.seedPrices = scaleAll(p.seedPrices, 1/scale)
	res, err := q.solveScaled()
	if err != nil {
		return nil, err
	}
	res.t *= scale
	res.gap *= scale
	res.prices = scaleAll(res.prices, scale)
	return res, nil
}

func scaleAll(vs [][]float64, f float64) [][]float64 {
	out := make([][]float64, len(vs))
	for i, v := range vs {
		out[i] = make([]float64, len(v))
		for j, x := range v {
			out[i][j] = x * f
		}
	}
	return out
}

func (p *maxMin) solveScaled() (*maxMinResult, error) {
	n, k := len(p.e), len(p.capacity)
	hulls := make([][]hullPoint, n)
	var events []event
	r := make([]float64, k)
	var cols []column
	if p.warm != nil {
		use := make([]float64, k)
		for m := range p.warm {
			for j, v := range p.warm[m] {
				use[j] += v
			}
		}
		cols = append(cols, column{t: p.warmT, use: use})
	} else {
		// Zero column: feasible when no floors are demanded.
		for m := range p.floor {
			if p.floor[m] > 0 {
				return nil, fmt.Errorf("maxmin: floors need a warm start")
			}
		}
		cols = append(cols, column{t: 0, use: make([]float64, k)})
	}
	// addColumn adds the cheapest point at level t under the hulls of the
	// last pricing, which was at λ.
	addColumn := func(lambda []float64, t float64) {
		use := make([]float64, k)
		for m := 0; m < n; m++ {
			pointAt(hulls[m], p.levelOf(m, t), p.cap[m], r)
			for j := range r {
				use[j] += r[j]
			}
		}
		cols = append(cols, column{t: t, use: use, lambda: append([]float64(nil), lambda...)})
	}
	for _, lambda := range p.seedPrices {
		if len(lambda) == k {
			t, _, ev := p.price(lambda, hulls, events)
			events = ev
			addColumn(lambda, t)
		}
	}
	var lambda, mu []float64
	var lower float64
	var err error
	res := &maxMinResult{}
	const maxPasses = 500
	for pass := 0; pass < maxPasses; pass++ {
		mu, lambda, lower, err = solveMaster(cols, p.capacity)
		if err != nil {
			return nil, err
		}
		t, f, ev := p.price(lambda, hulls, events)
		events = ev
		upper := f
		for j := 0; j < k; j++ {
			upper += lambda[j] * p.capacity[j]
		}
		res.passes = pass + 1
		res.t = lower
		res.gap = upper - lower
		if upper-lower <= relTol*math.Max(math.Abs(lower), 1e-6) {
			break
		}
		addColumn(lambda, t)
	}
	res.prices = append(res.prices, append([]float64(nil), lambda...))
	// Rebuild the allocation as the master's convex mix of columns,
	// re-pricing each used column at the prices it was generated with.
	res.r = make([][]float64, n)
	for m := range res.r {
		res.r[m] = make([]float64, k)
	}
	for i, c := range cols {
		if i >= len(mu) || mu[i] <= 1e-13 {
			continue
		}
		if c.lambda != nil {
			res.prices = append(res.prices, c.lambda)
		}
		if c.lambda == nil {
			if p.warm != nil && i == 0 {
				for m := range res.r {
					for j := range res.r[m] {
						res.r[m][j] += mu[i] * p.warm[m][j]
					}
				}
			}
			continue
		}
		for m := 0; m < n; m++ {
			hulls[m] = hull(p.e[m], p.cap[m], c.lambda, hulls[m])
			pointAt(hulls[m], p.levelOf(m, c.t), p.cap[m], r)
			for j := range r {
				res.r[m][j] += mu[i] * r[j]
			}
		}
	}
	return res, nil
}

// solveMaster solves the Dantzig–Wolfe master over columns: maximize
// Σ μ_p·t_p subject to Σ μ_p·use_p ≤ capacity and Σ μ_p = 1. It returns the
// weights, the capacity prices λ ≥ 0 and the master's value.
func solveMaster(cols []column, capacity []float64) (mu, lambda []float64, value float64, err error) {
	if mu, lambda, value, err = denseMaster(cols, capacity); err == nil {
		return mu, lambda, value, nil
	}
	return clpMaster(cols, capacity)
}

// clpMaster is solveMaster by Clp: the fallback should the dense simplex
// ever stall, and the reference in tests.
func clpMaster(cols []column, capacity []float64) (mu, lambda []float64, value float64, err error) {
	k := len(capacity)
	var master lp.Model
	for _, c := range cols {
		master.AddVar(0, lp.Inf, c.t)
	}
	master.Maximize()
	idx := make([]int, len(cols))
	for i := range idx {
		idx[i] = i
	}
	// Rows are scaled to capacity 1 so that Clp's absolute tolerances
	// mean the same on every type.
	val := make([]float64, len(cols))
	norm := make([]float64, k)
	for j := 0; j < k; j++ {
		norm[j] = 1
		if capacity[j] > 0 {
			norm[j] = capacity[j]
		}
		for i, c := range cols {
			val[i] = c.use[j] / norm[j]
		}
		master.AddRow(idx, val, -lp.Inf, capacity[j]/norm[j])
	}
	for i := range val {
		val[i] = 1
	}
	master.AddRow(idx, val, 1, 1)
	sol, err := master.Solve()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("decomposition master: %w", err)
	}
	lambda = make([]float64, k)
	for j := 0; j < k; j++ {
		lambda[j] = math.Max(0, sol.Duals[j]/norm[j])
	}
	return sol.X, lambda, sol.Objective, nil
}

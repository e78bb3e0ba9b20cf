package policies

import (
	"fmt"
	"math"

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

// errFloorsNeedWarm: the zero column is infeasible when floors are demanded.
var errFloorsNeedWarm = fmt.Errorf("maxmin: floors need a warm start")

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
	d := newDW(n, k)
	d.cap, d.w, d.capacity = p.cap, p.w, p.capacity
	for m := range p.e {
		for j, v := range p.e[m] {
			d.e[m*k+j] = v / scale
		}
		d.floor[m] = p.floor[m] / scale
	}
	d.prepare()
	// Prices are per GPU in units of t, so they scale with it.
	res, err := d.solveFlat(p.warm, p.warmT/scale, scaleAll(p.seedPrices, 1/scale))
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

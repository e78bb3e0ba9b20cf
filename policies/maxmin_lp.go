package policies

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/rondo-sched/rondo/policies/lp"
)

// pairRates gives, per pair and type, each member's normalized rate per unit
// of the pair's GPU time (the pair uses sf GPUs of the type for Y of time).
type pairRates struct {
	a, b  []int
	sf    []float64
	rateA [][]float64 // pair x type
	rateB [][]float64
}

// maxMinLP solves the maxMin program with Clp, optionally with pair
// variables, generating pair columns on demand: the restricted LP starts with
// every single-job variable and no pairs; pairs whose reduced cost under the
// LP's duals is positive join, until none does. The answer is the full LP's
// optimum. It is the reference for the decomposition and the solver for
// space sharing.
func (p *maxMin) solveLP(pairs *pairRates) (*maxMinResult, [][]float64, error) {
	return p.solveLPFrom(pairs, nil)
}

// solveLPFrom starts the restricted LP with the given pair columns (pair,
// type): with floors that were reached using pairs, the LP without them can
// be infeasible. The restricted LP stays loaded in Clp across the
// column-generation passes: each pass adds the new pair columns and
// re-solves from the last optimal basis instead of rebuilding it.
func (p *maxMin) solveLPFrom(pairs *pairRates, seed [][2]int) (*maxMinResult, [][]float64, error) {
	res, pr, _, err := p.solveLPWarm(pairs, seed, nil, false)
	return res, pr, err
}

// lpBasis is the max-min LP's simplex basis by the problem's indices: what
// solveLPWarm starts from (entries the last model lacked are noEntry) and
// the basis it ends with.
type lpBasis struct {
	t       uint8
	x       []uint8 // job*k + type
	rows    []uint8 // job*3 + (time, level, floor)
	capRows []uint8 // type
	pairs   []pairStatus
}

// pairStatus is a pair column's status: pair q on type j.
type pairStatus struct {
	q, j int
	st   uint8
}

const noEntry uint8 = 255

// solveLPWarm is solveLPFrom whose first solve starts from start's basis
// (nil: from scratch) with the dual simplex; it also returns the final
// basis when wantEnd (nil otherwise: reading it costs a pass over the
// model). Columns and rows start has no entry for take the from-scratch
// defaults (columns at zero, rows' slacks basic). The optimum's value is
// the same either way; where the LP has several optima the point may
// differ.
func (p *maxMin) solveLPWarm(pairs *pairRates, seed [][2]int, start *lpBasis, wantEnd bool) (*maxMinResult, [][]float64, *lpBasis, error) {
	n, k := len(p.e), len(p.capacity)
	var inModel []bool  // pair*k + type
	var active [][2]int // (pair, type) columns in the restricted LP, in column order
	if pairs != nil {
		inModel = make([]bool, len(pairs.a)*k)
		for _, c := range seed {
			if !inModel[c[0]*k+c[1]] {
				inModel[c[0]*k+c[1]] = true
				active = append(active, c)
			}
		}
	}
	var m lp.Model
	tVar := m.AddVar(0, lp.Inf, 1)
	m.Maximize()
	xVar := make([][]int, n)
	for i := 0; i < n; i++ {
		xVar[i] = make([]int, k)
		for j := 0; j < k; j++ {
			xVar[i][j] = -1
			if p.e[i][j] > 0 && p.capacity[j] > 0 {
				xVar[i][j] = m.AddVar(0, p.cap[i], 0) // GPU time r
			}
		}
	}
	yVar := make([]int, len(active))
	for c, pj := range active {
		yVar[c] = m.AddVar(0, pairs.sf[pj[0]], 0)
	}
	// Per-job rows: time, level ≥ w·t, level ≥ floor.
	timeRow := make([]int, n)
	levelRow := make([]int, n)
	floorRow := make([]int, n)
	idxT := make([][]int, n)
	valT := make([][]float64, n)
	idxL := make([][]int, n)
	valL := make([][]float64, n)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			if v := xVar[i][j]; v >= 0 {
				idxT[i] = append(idxT[i], v)
				valT[i] = append(valT[i], 1)
				idxL[i] = append(idxL[i], v)
				valL[i] = append(valL[i], p.e[i][j])
			}
		}
	}
	for c, pj := range active {
		q, j := pj[0], pj[1]
		for _, side := range [2]struct {
			job  int
			rate float64
		}{{pairs.a[q], pairs.rateA[q][j]}, {pairs.b[q], pairs.rateB[q][j]}} {
			idxT[side.job] = append(idxT[side.job], yVar[c])
			valT[side.job] = append(valT[side.job], 1)
			idxL[side.job] = append(idxL[side.job], yVar[c])
			valL[side.job] = append(valL[side.job], side.rate)
		}
	}
	for i := 0; i < n; i++ {
		timeRow[i] = m.AddRow(idxT[i], valT[i], -lp.Inf, p.cap[i])
		levelRow[i] = -1
		if p.w[i] > 0 {
			levelRow[i] = m.AddRow(append(idxL[i], tVar), append(valL[i], -p.w[i]), 0, lp.Inf)
		}
		floorRow[i] = -1
		if p.floor[i] > 0 {
			floorRow[i] = m.AddRow(idxL[i], valL[i], p.floor[i], lp.Inf)
		}
	}
	capRow := make([]int, k)
	for j := 0; j < k; j++ {
		var idx []int
		var val []float64
		for i := 0; i < n; i++ {
			if v := xVar[i][j]; v >= 0 {
				idx = append(idx, v)
				val = append(val, 1)
			}
		}
		for c, pj := range active {
			if pj[1] == j {
				idx = append(idx, yVar[c])
				val = append(val, 1)
			}
		}
		capRow[j] = m.AddRow(idx, val, -lp.Inf, p.capacity[j])
	}
	// t is bounded by the jobs' own best levels; without any weighted job
	// the program only checks floors.
	anyW := false
	for i := range p.w {
		anyW = anyW || p.w[i] > 0
	}
	if !anyW {
		m.SetObj(tVar, 0)
	}
	live, err := m.Load()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("max-min LP: %w", err)
	}
	defer live.Close()
	if start != nil {
		if err := live.SetBasis(p.startBasis(start, &m, tVar, xVar, yVar, active, timeRow, levelRow, floorRow, capRow)); err != nil {
			return nil, nil, nil, err
		}
	}
	type cand struct {
		q, j int
		rc   float64
	}
	var cands []cand
	var newCols []lp.Column
	for iter := 0; ; iter++ {
		sol, err := live.Solve()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("max-min LP: %w", err)
		}
		if pairs != nil {
			// Price every (pair, type) not yet in the model.
			d := sol.Duals
			cands = cands[:0]
			for q := range pairs.a {
				a, b := pairs.a[q], pairs.b[q]
				// Reduced cost c − Σ_i y_i·a_i with y = ∂objective/∂rhs
				// (lp's convention): per unit of GPU time the column uses
				// a's and b's time rows and capacity j (coefficient 1) and
				// adds rate to both level rows (whose duals are ≤ 0:
				// raising a floor can only cost).
				base := -d[timeRow[a]] - d[timeRow[b]]
				la, lb := 0.0, 0.0
				if levelRow[a] >= 0 {
					la = d[levelRow[a]]
				}
				if levelRow[b] >= 0 {
					lb = d[levelRow[b]]
				}
				ra, rb := pairs.rateA[q], pairs.rateB[q]
				for j := 0; j < k; j++ {
					if inModel[q*k+j] || p.capacity[j] <= 0 {
						continue
					}
					if ra[j] <= 0 && rb[j] <= 0 {
						continue
					}
					rc := base - d[capRow[j]]
					if levelRow[a] >= 0 {
						rc -= la * ra[j]
					}
					if levelRow[b] >= 0 {
						rc -= lb * rb[j]
					}
					if rc > 1e-9 {
						cands = append(cands, cand{q, j, rc})
					}
				}
			}
			if len(cands) > 0 {
				slices.SortFunc(cands, func(x, y cand) int {
					if x.rc != y.rc {
						return cmp.Compare(y.rc, x.rc)
					}
					if x.q != y.q {
						return cmp.Compare(x.q, y.q)
					}
					return cmp.Compare(x.j, y.j)
				})
				limit := max(200, n)
				newCols = newCols[:0]
				for i, c := range cands {
					if i >= limit {
						break
					}
					inModel[c.q*k+c.j] = true
					active = append(active, [2]int{c.q, c.j})
					yVar = append(yVar, live.NumVars()+len(newCols))
					newCols = append(newCols, p.pairColumn(pairs, c.q, c.j, timeRow, levelRow, floorRow, capRow))
				}
				if err := live.AddColumns(newCols); err != nil {
					return nil, nil, nil, err
				}
				continue
			}
		}
		res := &maxMinResult{t: sol.X[tVar], passes: iter + 1, r: make([][]float64, n)}
		if !anyW {
			res.t = math.Inf(1)
		}
		for i := 0; i < n; i++ {
			res.r[i] = make([]float64, k)
			for j := 0; j < k; j++ {
				if v := xVar[i][j]; v >= 0 {
					res.r[i][j] = sol.X[v]
				}
			}
		}
		var pr [][]float64
		if pairs != nil {
			pr = rows(len(pairs.a), k)
			for c, pj := range active {
				pr[pj[0]][pj[1]] = sol.X[yVar[c]]
			}
		}
		if !wantEnd {
			return res, pr, nil, nil
		}
		return res, pr, p.endBasis(live.Basis(), tVar, xVar, yVar, active, timeRow, levelRow, floorRow, capRow), nil
	}
}

// startBasis lays start over the model's columns and rows: the defaults
// (columns at their lower bound, slacks basic) where it has no entry.
func (p *maxMin) startBasis(start *lpBasis, m *lp.Model, tVar int, xVar [][]int, yVar []int, active [][2]int,
	timeRow, levelRow, floorRow, capRow []int) lp.Basis {
	b := lp.Basis{Cols: make([]uint8, m.NumVars()), Rows: make([]uint8, m.NumRows())}
	for i := range b.Cols {
		b.Cols[i] = lp.BasisAtLower
	}
	for i := range b.Rows {
		b.Rows[i] = lp.BasisBasic
	}
	set := func(dst []uint8, at int, st uint8) {
		if at >= 0 && st != noEntry {
			dst[at] = st
		}
	}
	set(b.Cols, tVar, start.t)
	k := len(p.capacity)
	for i := range xVar {
		for j, v := range xVar[i] {
			set(b.Cols, v, start.x[i*k+j])
		}
		set(b.Rows, timeRow[i], start.rows[i*3])
		set(b.Rows, levelRow[i], start.rows[i*3+1])
		set(b.Rows, floorRow[i], start.rows[i*3+2])
	}
	for j, r := range capRow {
		set(b.Rows, r, start.capRows[j])
	}
	if len(start.pairs) > 0 {
		col := make(map[[2]int]int, len(active))
		for c, pj := range active {
			col[pj] = yVar[c]
		}
		for _, ps := range start.pairs {
			if v, ok := col[[2]int{ps.q, ps.j}]; ok {
				set(b.Cols, v, ps.st)
			}
		}
	}
	return b
}

// endBasis reads the final basis by the problem's indices.
func (p *maxMin) endBasis(b lp.Basis, tVar int, xVar [][]int, yVar []int, active [][2]int,
	timeRow, levelRow, floorRow, capRow []int) *lpBasis {
	k := len(p.capacity)
	out := &lpBasis{t: b.Cols[tVar], x: make([]uint8, len(xVar)*k), rows: make([]uint8, len(xVar)*3), capRows: make([]uint8, k)}
	get := func(src []uint8, at int) uint8 {
		if at < 0 {
			return noEntry
		}
		return src[at]
	}
	for i := range xVar {
		for j, v := range xVar[i] {
			out.x[i*k+j] = get(b.Cols, v)
		}
		out.rows[i*3] = get(b.Rows, timeRow[i])
		out.rows[i*3+1] = get(b.Rows, levelRow[i])
		out.rows[i*3+2] = get(b.Rows, floorRow[i])
	}
	for j, r := range capRow {
		out.capRows[j] = get(b.Rows, r)
	}
	for c, pj := range active {
		out.pairs = append(out.pairs, pairStatus{pj[0], pj[1], b.Cols[yVar[c]]})
	}
	return out
}

// pairColumn is pair q's variable on type j (GPU time, at most the pair's
// scale factor): it uses both jobs' time rows and capacity j, and adds each
// job's rate to its level and floor rows.
func (p *maxMin) pairColumn(pairs *pairRates, q, j int, timeRow, levelRow, floorRow, capRow []int) lp.Column {
	c := lp.Column{Lo: 0, Up: pairs.sf[q]}
	for _, side := range [2]struct {
		job  int
		rate float64
	}{{pairs.a[q], pairs.rateA[q][j]}, {pairs.b[q], pairs.rateB[q][j]}} {
		c.Rows = append(c.Rows, timeRow[side.job])
		c.Vals = append(c.Vals, 1)
		if r := levelRow[side.job]; r >= 0 {
			c.Rows = append(c.Rows, r)
			c.Vals = append(c.Vals, side.rate)
		}
		if r := floorRow[side.job]; r >= 0 {
			c.Rows = append(c.Rows, r)
			c.Vals = append(c.Vals, side.rate)
		}
	}
	c.Rows = append(c.Rows, capRow[j])
	c.Vals = append(c.Vals, 1)
	return c
}

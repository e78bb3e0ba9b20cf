package policies

import (
	"cmp"
	"math"
	"slices"
)

// dw is the decomposition's working state for one maxMin program in scaled
// units, laid out flat so that a pricing pass is one allocation-free walk
// over the jobs:
//
//   - A job's hull vertices are its own points (cap·e_mj, cap·λ_j); only
//     which of them lie on the hull, and the slopes, depend on the prices.
//     So every level at which a job's cost can change slope in t is known
//     before the first pass: floor_m/w_m (where w·t passes the floor) and
//     cap_m·e_mj/w_m per type. These breakpoints are sorted once per solve
//     (ties by slot index: deterministic); each pass writes the slope
//     changes into the slots and sweeps them in that fixed order, with no
//     sort.
//   - Per pass only the hull's vertex types are kept per job (hullTyp);
//     levels and costs are recomputed from e, cap and λ where needed.
type dw struct {
	n, k     int
	e        []float64 // n·k, scaled
	cap      []float64
	w        []float64
	floor    []float64 // scaled
	capacity []float64

	slotT  []float64 // n·(k+1): breakpoint t of slot (m, j<k) and (m, k) = floor
	order  []int32   // slots that can start a segment, by (t, slot)
	dslope []float64 // n·(k+1): slope change at the slot, this pass

	sv   []float64 // n·k: job m's positive points' levels, ascending
	styp []int8    // n·k: their types
	np   []uint8   // job m's positive points

	hullTyp []int8  // n·(k+1): the hull's vertices by type (-1: origin)
	hullLen []uint8 // vertices on job m's hull
	pts     []hullPoint
}

func newDW(n, k int) *dw {
	s := k + 1
	return &dw{n: n, k: k, e: make([]float64, n*k), floor: make([]float64, n),
		slotT: make([]float64, n*s), dslope: make([]float64, n*s),
		hullTyp: make([]int8, n*s), hullLen: make([]uint8, n), pts: make([]hullPoint, s)}
}

// prepare fills the per-job point order and the sorted breakpoints; e,
// cap, w and floor must be set. Both depend only on the program, not on the
// prices, so they are computed once per solve.
func (d *dw) prepare() {
	d.sv = make([]float64, d.n*d.k)
	d.styp = make([]int8, d.n*d.k)
	d.np = make([]uint8, d.n)
	keys := make([]radixKey, 0, d.n*2)
	for m := 0; m < d.n; m++ {
		keys = d.prepareJob(m, keys)
	}
	// Breakpoints are ≥ 0, so their bits order like the numbers; a stable
	// radix sort keeps slot order among equal ones (deterministic): keys are
	// appended in slot order, so the order is by (t, slot).
	keys = radixSort(keys)
	d.order = d.order[:0]
	for _, kk := range keys {
		d.order = append(d.order, kk.slot)
	}
}

// prepareJob fills job m's point order (sv, styp, np) and its breakpoints'
// slotT, and appends the breakpoints that can start a segment to keys, in
// slot order. It depends only on job m's e, cap, w and floor, so it is
// idempotent (LASSession calls it again to find a leaving job's keys).
func (d *dw) prepareJob(m int, keys []radixKey) []radixKey {
	k, s := d.k, d.k+1
	// The job's points by (level, type): the hull's candidates in the
	// order hull() sorts them, up to ties in level, which price resolves
	// by cost.
	cp := d.cap[m]
	sv, st := d.sv[m*k:m*k+k], d.styp[m*k:m*k+k]
	np := 0
	for j := 0; j < k; j++ {
		ej := d.e[m*k+j]
		if ej <= 0 {
			continue
		}
		v := cp * ej
		i := np
		for ; i > 0 && sv[i-1] > v; i-- {
			sv[i], st[i] = sv[i-1], st[i-1]
		}
		sv[i], st[i] = v, int8(j)
		np++
	}
	d.np[m] = uint8(np)
	w := d.w[m]
	if w <= 0 || np == 0 {
		return keys
	}
	v0 := d.floor[m]
	top := sv[np-1]
	// Slots (m, j) for j < k come before (m, k), the floor's; a point's
	// slot is (m, its type), so appending by type keeps slot order.
	for j := 0; j < k; j++ {
		// A point at or below the floor, or at the job's highest level,
		// never starts a segment.
		if ej := d.e[m*k+j]; ej > 0 {
			if v := cp * ej; v > v0 && v < top {
				d.slotT[m*s+j] = v / w
				keys = append(keys, radixKey{math.Float64bits(v / w), int32(m*s + j)})
			}
		}
	}
	d.slotT[m*s+k] = v0 / w
	keys = append(keys, radixKey{math.Float64bits(v0 / w), int32(m*s + k)})
	return keys
}

type radixKey struct {
	bits uint64
	slot int32
}

// radixMin is the number of keys from which radixSort sorts by radix.
const radixMin = 4096

// radixSort sorts keys by bits, stably, 16 bits a pass (passes where every
// key has the same digit are skipped).
func radixSort(keys []radixKey) []radixKey {
	if len(keys) < radixMin {
		// Few keys: a comparison sort by (bits, slot) gives the same order
		// (keys come in slot order, so the stable radix sort orders ties
		// by slot) without clearing 64 Ki counters per pass.
		slices.SortFunc(keys, func(a, b radixKey) int {
			if a.bits != b.bits {
				return cmp.Compare(a.bits, b.bits)
			}
			return cmp.Compare(a.slot, b.slot)
		})
		return keys
	}
	return radixSortBits(keys)
}

// radixSortBits is radixSort by radix whatever the number of keys.
func radixSortBits(keys []radixKey) []radixKey {
	tmp := make([]radixKey, len(keys))
	var count [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count[:])
		for _, kk := range keys {
			count[(kk.bits>>shift)&0xffff]++
		}
		if len(keys) > 0 && count[(keys[0].bits>>shift)&0xffff] == len(keys) {
			continue
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, kk := range keys {
			b := (kk.bits >> shift) & 0xffff
			tmp[count[b]] = kk
			count[b]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// hullOf computes job m's hull under prices λ into hullTyp/hullLen, as
// hull() does (points by level, the cheapest of equal levels, then lowest
// type; convex from the origin), and returns its vertices in d.pts.
func (d *dw) hullOf(m int, lambda []float64) []hullPoint {
	k, s := d.k, d.k+1
	cp := d.cap[m]
	np := int(d.np[m])
	sv, st := d.sv[m*k:m*k+np], d.styp[m*k:m*k+np]
	pts := d.pts[:cap(d.pts)]
	pts[0] = hullPoint{typ: -1}
	h := 1
	for i := 0; i < np; i++ {
		typ := int(st[i])
		p := hullPoint{v: sv[i], c: cp * lambda[typ], typ: typ}
		if last := pts[h-1]; last.typ >= 0 && last.v == p.v {
			// Equal levels: keep the cheapest (then the lower type).
			if p.c < last.c || (p.c == last.c && p.typ < last.typ) {
				h--
			} else {
				continue
			}
		}
		for h > 1 {
			a, b := pts[h-2], pts[h-1]
			if (b.c-a.c)*(p.v-a.v) >= (p.c-a.c)*(b.v-a.v) {
				h--
				continue
			}
			break
		}
		pts[h] = p
		h++
	}
	pts = pts[:h]
	d.hullLen[m] = uint8(h)
	typ := d.hullTyp[m*s : m*s+h]
	for i, p := range pts {
		typ[i] = int8(p.typ)
	}
	return pts
}

// point writes job m's cheapest split reaching level v on the hull last
// computed for it (hullTyp) into r.
func (d *dw) point(m int, v float64, r []float64) {
	k, s := d.k, d.k+1
	for j := range r {
		r[j] = 0
	}
	if v <= 0 {
		return
	}
	cp := d.cap[m]
	h := int(d.hullLen[m])
	typ := d.hullTyp[m*s : m*s+h]
	av := 0.0
	for i := 1; i < h; i++ {
		bv := cp * d.e[m*k+int(typ[i])]
		if v <= bv || i == h-1 {
			theta := (v - av) / (bv - av)
			if theta > 1 {
				theta = 1
			} else if !(theta >= 0) {
				theta = 0
			}
			if a := typ[i-1]; a >= 0 {
				r[a] += (1 - theta) * cp
			}
			r[typ[i]] += theta * cp
			return
		}
		av = bv
	}
}

// price is maxMin.price on the flat layout: it finds t maximizing
// t − Σ_m cost_m(max(floor_m, w_m·t)) under λ and returns t and that value,
// leaving each job's hull in hullTyp for addColumn.
func (d *dw) price(lambda []float64) (float64, float64) {
	k, s := d.k, d.k+1
	tmax := math.Inf(1)
	constCost := 0.0
	clear(d.dslope)
	for m := 0; m < d.n; m++ {
		h := d.hullOf(m, lambda)
		v0 := d.floor[m]
		constCost += costAt(h, v0)
		w := d.w[m]
		if w <= 0 {
			continue
		}
		if top := h[len(h)-1].v / w; top < tmax {
			tmax = top
		}
		prev := 0.0
		for i := 1; i < len(h); i++ {
			if h[i].v <= v0 {
				continue
			}
			slope := w * (h[i].c - h[i-1].c) / (h[i].v - h[i-1].v)
			slot := m*s + k // starts at the floor
			if h[i-1].v > v0 {
				slot = m*s + h[i-1].typ
			}
			d.dslope[slot] += slope - prev
			prev = slope
		}
	}
	if math.IsInf(tmax, 1) {
		return 0, -constCost
	}
	// Sweep: F(t) = t − Σ cost is concave; walk right while its slope is
	// > 0, accumulating the cost along the way.
	t, slope, cost := 0.0, 0.0, constCost
	for _, sl := range d.order {
		bt := d.slotT[sl]
		if bt > tmax {
			break
		}
		if bt > t {
			if slope >= 1 {
				break
			}
			cost += slope * (bt - t)
			t = bt
		}
		slope += d.dslope[sl]
	}
	if slope < 1 && tmax > t {
		cost += slope * (tmax - t)
		t = tmax
	}
	return t, t - cost
}

// addUse adds the GPU time of every job's point at level t (on the hulls of
// the last pricing) to use.
func (d *dw) addUse(t float64, use []float64, r []float64) {
	for m := 0; m < d.n; m++ {
		lv := d.w[m] * t
		if f := d.floor[m]; f > lv {
			lv = f
		}
		d.point(m, lv, r)
		for j, v := range r {
			use[j] += v
		}
	}
}

// solveFlat is the decomposition loop on d; warm (GPU time per job, or nil)
// is a feasible start at level warmT.
func (d *dw) solveFlat(warm [][]float64, warmT float64, seeds [][]float64) (*maxMinResult, error) {
	n, k := d.n, d.k
	r := make([]float64, k)
	var cols []column
	if warm != nil {
		use := make([]float64, k)
		for m := range warm {
			for j, v := range warm[m] {
				use[j] += v
			}
		}
		cols = append(cols, column{t: warmT, use: use})
	} else {
		for m := range d.floor {
			if d.floor[m] > 0 {
				return nil, errFloorsNeedWarm
			}
		}
		cols = append(cols, column{t: 0, use: make([]float64, k)})
	}
	addColumn := func(lambda []float64, t float64) {
		use := make([]float64, k)
		d.addUse(t, use, r)
		cols = append(cols, column{t: t, use: use, lambda: append([]float64(nil), lambda...)})
	}
	for _, lambda := range seeds {
		if len(lambda) == k {
			t, _ := d.price(lambda)
			addColumn(lambda, t)
		}
	}
	var lambda, mu []float64
	var lower float64
	var err error
	res := &maxMinResult{}
	const maxPasses = 500
	for pass := 0; pass < maxPasses; pass++ {
		mu, lambda, lower, err = solveMaster(cols, d.capacity)
		if err != nil {
			return nil, err
		}
		t, f := d.price(lambda)
		upper := f
		for j := 0; j < k; j++ {
			upper += lambda[j] * d.capacity[j]
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
	// The allocation is the master's convex mix of columns; each column in
	// it is re-priced at the prices it was generated with (only prices and
	// t are kept per column).
	res.r = rows(n, k)
	for i, c := range cols {
		if i >= len(mu) || mu[i] <= 1e-13 {
			continue
		}
		if c.lambda == nil {
			if warm != nil && i == 0 {
				for m := range res.r {
					for j := range res.r[m] {
						res.r[m][j] += mu[i] * warm[m][j]
					}
				}
			}
			continue
		}
		res.prices = append(res.prices, c.lambda)
		for m := 0; m < n; m++ {
			d.hullOf(m, c.lambda)
			d.point(m, math.Max(d.floor[m], d.w[m]*c.t), r)
			row := res.r[m]
			for j, v := range r {
				row[j] += mu[i] * v
			}
		}
	}
	return res, nil
}

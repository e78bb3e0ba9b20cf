package estimator

import (
	"math"
	"math/rand/v2"

	"github.com/rondo-sched/rondo/allocator/throughputs"
	"gonum.org/v1/gonum/mat"
)

// Hidden is a throughput table whose pair measurements were partly hidden
// and estimated: what a packing policy sees when half of Gavel's pair
// table is unknown (issue 13).
type Hidden struct {
	// Est maps a hidden pair (both orders) to its estimated steps/s per GPU
	// type (a's, then b's).
	Est map[[2]throughputs.Key]map[string][2]float64
	// Pairs counts the hidden unordered pairs, Entries the normalized
	// values estimated; MAE and MRE are their errors against the truth
	// (normalized throughputs, as docs/estimator.md).
	Pairs, Entries int
	MAE, MRE       float64
	// NaiveMAE and NaiveMRE are the errors of the naive baseline: each
	// hidden value taken as the mean of the visible values of its row.
	NaiveMAE, NaiveMRE float64
}

// HidePairs hides, on every GPU type, a fraction frac of the feasible
// measured pairs of t's single-GPU job types (unordered pairs, seeded) and
// estimates them by matrix completion from the rest (Complete, opt).
// Infeasible pairs stay known: feasibility is profiled, not predicted
// (docs/estimator.md).
func HidePairs(t *throughputs.Table, frac float64, seed uint64, opt Options) (*Hidden, error) {
	h := &Hidden{Est: map[[2]throughputs.Key]map[string][2]float64{}}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var absSum, relSum, nAbs, nRel float64
	for _, typ := range t.Types() {
		r, err := NewReference(t, typ)
		if err != nil {
			continue // a type without pair measurements
		}
		n := len(r.Keys)
		x := mat.NewDense(n, n, nil)
		mask := make([][]bool, n)
		for i := range mask {
			mask[i] = make([]bool, n)
			for j := range mask[i] {
				if r.Feasible[i][j] {
					x.Set(i, j, r.Norm[i][j])
					mask[i][j] = true
				}
			}
		}
		var hidden [][2]int
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				if r.Feasible[i][j] && r.Feasible[j][i] && rng.Float64() < frac {
					hidden = append(hidden, [2]int{i, j})
					mask[i][j], mask[j][i] = false, false
				}
			}
		}
		fit, err := Complete(x, mask, opt)
		if err != nil {
			return nil, err
		}
		rowMean := make([]float64, n)
		for i := 0; i < n; i++ {
			var sum float64
			var k int
			for j := 0; j < n; j++ {
				if mask[i][j] {
					sum += x.At(i, j)
					k++
				}
			}
			if k > 0 {
				rowMean[i] = sum / float64(k)
			}
		}
		for _, p := range hidden {
			i, j := p[0], p[1]
			a, b := r.Keys[i], r.Keys[j]
			ia, _ := t.Isolated(a, typ)
			ib, _ := t.Isolated(b, typ)
			na, nb := math.Max(fit.At(i, j), 0), math.Max(fit.At(j, i), 0)
			set := func(k [2]throughputs.Key, v [2]float64) {
				if h.Est[k] == nil {
					h.Est[k] = map[string][2]float64{}
				}
				h.Est[k][typ] = v
			}
			set([2]throughputs.Key{a, b}, [2]float64{na * ia, nb * ib})
			set([2]throughputs.Key{b, a}, [2]float64{nb * ib, na * ia})
			h.Pairs++
			for _, e := range [][3]float64{{na, r.Norm[i][j], rowMean[i]}, {nb, r.Norm[j][i], rowMean[j]}} {
				absSum += math.Abs(e[0] - e[1])
				relSum += math.Abs(e[0]-e[1]) / e[1]
				nAbs += math.Abs(e[2] - e[1])
				nRel += math.Abs(e[2]-e[1]) / e[1]
				h.Entries++
				if i == j {
					break // a job type with itself: one value
				}
			}
		}
	}
	if h.Entries > 0 {
		h.MAE, h.MRE = absSum/float64(h.Entries), relSum/float64(h.Entries)
		h.NaiveMAE, h.NaiveMRE = nAbs/float64(h.Entries), nRel/float64(h.Entries)
	}
	return h, nil
}

// Pair is the throughput a policy sees for a and b on typ: the estimate of
// a hidden pair, else the table's.
func (h *Hidden) Pair(t *throughputs.Table, a, b throughputs.Key, typ string) ([2]float64, bool) {
	if m, ok := h.Est[[2]throughputs.Key{a, b}]; ok {
		if v, ok := m[typ]; ok {
			return v, true
		}
	}
	return t.Pair(a, b, typ)
}

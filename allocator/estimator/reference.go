package estimator

import (
	"errors"
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/throughputs"
	"gonum.org/v1/gonum/mat"
)

// Reference is the colocation matrix of the pre-profiled job types on one
// GPU type: Norm[i][j] is Keys[i]'s steps/s when sharing a GPU with Keys[j],
// over Keys[i]'s isolated steps/s. Pairs measured as [0, 0] (they cannot
// share a GPU), or not measured, are infeasible: Feasible[i][j] is false and
// Norm[i][j] is NaN.
type Reference struct {
	GPUType  string
	Keys     []throughputs.Key
	Norm     [][]float64
	Feasible [][]bool
}

// NewReference builds the reference matrix of gpuType from t's single-GPU
// configurations (Gavel's 26 job types), in t.Keys order.
func NewReference(t *throughputs.Table, gpuType string) (*Reference, error) {
	var keys []throughputs.Key
	for _, k := range t.Keys(gpuType) {
		if k.ScaleFactor == 1 {
			keys = append(keys, k)
		}
	}
	if len(keys) < 2 {
		return nil, fmt.Errorf("estimator: %s: fewer than 2 single-GPU job types", gpuType)
	}
	return NewReferenceKeys(t, gpuType, keys)
}

// NewReferenceKeys builds the reference matrix of gpuType over keys.
func NewReferenceKeys(t *throughputs.Table, gpuType string, keys []throughputs.Key) (*Reference, error) {
	n := len(keys)
	r := &Reference{GPUType: gpuType, Keys: append([]throughputs.Key(nil), keys...)}
	r.Norm = make([][]float64, n)
	r.Feasible = make([][]bool, n)
	for i, a := range keys {
		iso, ok := t.Isolated(a, gpuType)
		if !ok {
			return nil, fmt.Errorf("estimator: %s: %v not measured", gpuType, a)
		}
		r.Norm[i] = make([]float64, n)
		r.Feasible[i] = make([]bool, n)
		for j, b := range keys {
			r.Norm[i][j] = math.NaN()
			v, ok := t.Pair(a, b, gpuType)
			if !ok || iso <= 0 || v[0] <= 0 || v[1] <= 0 {
				continue
			}
			r.Norm[i][j] = v[0] / iso
			r.Feasible[i][j] = true
		}
	}
	return r, nil
}

// Index is k's row in the matrix, or -1.
func (r *Reference) Index(k throughputs.Key) int {
	for i, x := range r.Keys {
		if x == k {
			return i
		}
	}
	return -1
}

// without returns the reference with job type h removed (leave-one-out).
func (r *Reference) without(h int) *Reference {
	n := len(r.Keys)
	out := &Reference{GPUType: r.GPUType}
	for i := 0; i < n; i++ {
		if i == h {
			continue
		}
		out.Keys = append(out.Keys, r.Keys[i])
		var row []float64
		var frow []bool
		for j := 0; j < n; j++ {
			if j == h {
				continue
			}
			row = append(row, r.Norm[i][j])
			frow = append(frow, r.Feasible[i][j])
		}
		out.Norm = append(out.Norm, row)
		out.Feasible = append(out.Feasible, frow)
	}
	return out
}

// Measurement is one profiling run of the new job with reference job Ref
// (an index into Keys): New is the new job's normalized throughput (pair
// steps/s over its isolated steps/s), Other the reference job's. Infeasible
// marks a pair that could not share the GPU (both values are then ignored).
type Measurement struct {
	Ref        int
	New, Other float64
	Infeasible bool
}

// Estimate is the completed row and column of a new job.
type Estimate struct {
	// Row[j]: the new job's normalized throughput with reference j.
	Row []float64
	// Col[j]: reference j's normalized throughput with the new job.
	Col []float64
	// Nearest is the reference job most similar to the new job (Euclidean
	// distance between completed row and column and the reference's
	// completed row and column), Distance that distance.
	Nearest  int
	Distance float64

	ref      *Reference
	fitted   *mat.Dense // (n+1)x(n+1), new job last
	measured map[int]Measurement
}

// Estimate profiles a new job from ms and completes its row and column.
func (r *Reference) Estimate(ms []Measurement, opt Options) (*Estimate, error) {
	n := len(r.Keys)
	N := n + 1
	x := mat.NewDense(N, N, nil)
	mask := make([][]bool, N)
	for i := range mask {
		mask[i] = make([]bool, N)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if r.Feasible[i][j] {
				x.Set(i, j, r.Norm[i][j])
				mask[i][j] = true
			}
		}
	}
	measured := make(map[int]Measurement, len(ms))
	for _, m := range ms {
		if m.Ref < 0 || m.Ref >= n {
			return nil, fmt.Errorf("estimator: measurement of reference %d out of range", m.Ref)
		}
		measured[m.Ref] = m
		if m.Infeasible {
			continue
		}
		if !(m.New > 0) || !(m.Other > 0) || math.IsInf(m.New, 0) || math.IsInf(m.Other, 0) {
			return nil, errors.New("estimator: feasible measurement needs positive finite throughputs")
		}
		x.Set(n, m.Ref, m.New)
		mask[n][m.Ref] = true
		x.Set(m.Ref, n, m.Other)
		mask[m.Ref][n] = true
	}
	fit, err := Complete(x, mask, opt)
	if err != nil {
		return nil, err
	}
	e := &Estimate{Row: make([]float64, n), Col: make([]float64, n), ref: r, fitted: fit, measured: measured}
	for j := 0; j < n; j++ {
		e.Row[j] = math.Max(0, fit.At(n, j))
		e.Col[j] = math.Max(0, fit.At(j, n))
		if m, ok := measured[j]; ok && !m.Infeasible {
			e.Row[j], e.Col[j] = m.New, m.Other
		}
	}
	e.Nearest, e.Distance = -1, math.Inf(1)
	for q := 0; q < n; q++ {
		var d float64
		for j := 0; j < n; j++ {
			a := fit.At(n, j) - fit.At(q, j)
			b := fit.At(j, n) - fit.At(j, q)
			d += a*a + b*b
		}
		d = math.Sqrt(d)
		if d < e.Distance {
			e.Nearest, e.Distance = q, d
		}
	}
	return e, nil
}

// Pair is the completed-matrix estimate of the new job's and reference j's
// normalized throughputs when they share a GPU; a profiled pair returns its
// measurement, and feasible is false only for a pair profiled as
// infeasible.
func (e *Estimate) Pair(j int) (newNorm, otherNorm float64, feasible bool) {
	if m, ok := e.measured[j]; ok && m.Infeasible {
		return 0, 0, false
	}
	return e.Row[j], e.Col[j], true
}

// NearestPair is the nearest-reference estimate (Gavel's matching): the
// new job behaves as its most similar reference job q, so its pair with j
// is taken from the reference matrix at (q, j) and (j, q). When that pair
// of reference jobs cannot share a GPU, feasible is false (the feasibility
// mask the new job inherits). Profiled pairs return their measurement.
func (e *Estimate) NearestPair(j int) (newNorm, otherNorm float64, feasible bool) {
	if m, ok := e.measured[j]; ok {
		if m.Infeasible {
			return 0, 0, false
		}
		return m.New, m.Other, true
	}
	q := e.Nearest
	if !e.ref.Feasible[q][j] || !e.ref.Feasible[j][q] {
		return 0, 0, false
	}
	return e.ref.Norm[q][j], e.ref.Norm[j][q], true
}

// PairThroughput turns normalized pair estimates into steps/s given the two
// jobs' isolated steps/s.
func PairThroughput(newNorm, otherNorm, newIsolated, otherIsolated float64) [2]float64 {
	return [2]float64{newNorm * newIsolated, otherNorm * otherIsolated}
}

package synergy

import "math"

// Throughput is the profile's throughput with coresPerGPU cores and
// memGBPerGPU GB per GPU, relative to the matrix's 1.0 (for the embedded
// data, the base share of 3 cores and 62.5 GB in every set); 0 means
// infeasible.
//
// Bilinear interpolation over the grid; a demand below an axis's first point
// or above its last is clamped to it (more than the grid holds is assumed to
// help no further). An infeasible (0.0) grid point among those the value is
// interpolated from, with non-zero weight, makes the result 0: the points
// between a feasible and an infeasible size are not known to fit, and an
// interpolated 1.2 would invite the allocator to place them. Grid points
// themselves are returned exactly. NaN demands are infeasible.
func (p *Profile) Throughput(coresPerGPU, memGBPerGPU float64) float64 {
	if math.IsNaN(coresPerGPU) || math.IsNaN(memGBPerGPU) {
		return 0
	}
	if p.Matrix == nil {
		return p.twoPoint(coresPerGPU, memGBPerGPU)
	}
	i0, i1, wi := bracket(p.CoresAxis, coresPerGPU)
	j0, j1, wj := bracket(p.MemAxis, memGBPerGPU)
	sum := 0.0
	for _, c := range [4]struct {
		i, j int
		w    float64
	}{{i0, j0, (1 - wi) * (1 - wj)}, {i1, j0, wi * (1 - wj)}, {i0, j1, (1 - wi) * wj}, {i1, j1, wi * wj}} {
		if c.w == 0 {
			continue
		}
		v := p.Matrix[c.i][c.j]
		if v == 0 {
			return 0
		}
		sum += c.w * v
	}
	return sum
}

// bracket finds the grid points around x and x's weight towards the upper
// one, clamping outside the axis.
func bracket(axis []float64, x float64) (lo, hi int, w float64) {
	last := len(axis) - 1
	if x <= axis[0] {
		return 0, 0, 0
	}
	if x >= axis[last] {
		return last, last, 0
	}
	for k := 0; k < last; k++ {
		if x < axis[k+1] {
			return k, k + 1, (x - axis[k]) / (axis[k+1] - axis[k])
		}
	}
	return last, last, 0 // unreachable
}

// twoPoint models a profile without a matrix from its two known points:
// the set's proportional share runs at 1.0 and the best-case demand at
// Speedup. Between them (both resources at least the share) the speedup
// grows linearly with the resource furthest from its best; at or beyond the
// best it stays at Speedup. Below min(share, best) of either resource the
// job is assumed to slow down in proportion (the pessimistic reading: no
// data says it can spare them).
func (p *Profile) twoPoint(cores, mem float64) float64 {
	needC := math.Min(p.ShareCoresPerGPU, p.CoresPerGPUBest)
	needM := math.Min(p.ShareMemGBPerGPU, p.MemGBPerGPUBest)
	if needC <= 0 || needM <= 0 { // share unset: only the best point is known
		needC, needM = p.CoresPerGPUBest, p.MemGBPerGPUBest
	}
	if cores < needC || mem < needM {
		return math.Max(0, math.Min(cores/needC, mem/needM))
	}
	progress := func(x, share, best float64) float64 {
		if x >= best {
			return 1
		}
		if x <= share {
			return 0
		}
		return (x - share) / (best - share)
	}
	f := math.Min(progress(cores, p.ShareCoresPerGPU, p.CoresPerGPUBest),
		progress(mem, p.ShareMemGBPerGPU, p.MemGBPerGPUBest))
	return 1 + (p.Speedup-1)*f
}

// Flat is the profile of a job without one: insensitive, 1.0 everywhere on
// the grid, best demand 1 core per GPU and the proportional memory. Its
// GPUs is 1; the profile is per GPU, so it serves any size.
func Flat() *Profile {
	m := make([][]float64, len(CoresAxis))
	for i := range m {
		m[i] = make([]float64, len(MemAxis))
		for j := range m[i] {
			m[i][j] = 1
		}
	}
	return &Profile{
		Model: "flat", GPUs: 1,
		CoresPerGPUBest: 1, MemGBPerGPUBest: BaseMemGBPerGPU, Speedup: 1,
		Matrix: m, CoresAxis: CoresAxis, MemAxis: MemAxis,
		ShareCoresPerGPU: BaseCoresPerGPU, ShareMemGBPerGPU: BaseMemGBPerGPU,
	}
}

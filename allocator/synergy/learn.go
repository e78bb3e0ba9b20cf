package synergy

import (
	"fmt"
	"math"
	"sort"
)

// Optimistic profiling (Synergy §4.1), fed by throughput reports instead of
// a profiling run before admission: Learn turns a job's measured
// throughputs under the grants it ran with into a Profile over the
// package's grid.
//
//   - CPU: throughput against cores per GPU is the samples' (the paper
//     profiles cores at the largest memory, so that memory does not limit
//     them; Rondo takes each core count's samples at the largest memory it
//     was measured with). Noisy means are made non-decreasing by isotonic
//     regression (pool adjacent violators, weighted by sample counts),
//     interpolated linearly between measured core counts and flat beyond
//     the last. Below the first measured count nothing is known: the grid
//     point just below it holds its value (the grid cannot hold a kink off
//     its points) and those further below fall in proportion to cores; the
//     best-case demand never asks for fewer cores than were measured.
//   - Memory: derived, not measured, from a cache model (CacheModel: the
//     paper's MinIO cache, a fixed share of the dataset stays cached, the
//     rest is read from storage every epoch): throughput is the smaller of
//     the CPU curve and the rate storage sustains for the misses. Without
//     a cache model the curve holds at and above the memory it was measured
//     with, falls in proportion below it (the grid point just below keeps
//     its value, as for cores) and the best case never asks for less.
//   - Normalised to 1.0 at the proportional share (LearnOptions' share,
//     exactly, also off the grid); best-case demand is the grid point with
//     the smallest share of a server (cores/share + memory/share, fewer
//     cores on a tie) reaching (1-ε) of the largest throughput; Speedup is
//     its throughput (at least 1).

// Sample is one throughput report: what a job ran at per GPU and how fast.
type Sample struct {
	CoresPerGPU, MemGBPerGPU float64
	// Throughput in any unit (steps/s as reported): only ratios matter,
	// but a CacheModel compares it with storage in steps/s.
	Throughput float64
}

// CacheModel derives memory's effect on throughput: the job reads its
// whole dataset once per epoch (StepsPerEpoch steps); memory m per GPU
// caches m × GPUs of it (a MinIO-like cache: the cached part stays, hit
// ratio h = min(1, m × GPUs / DatasetGB)), and the misses are read from
// storage at StorageGBps, so the job runs at most
// StorageGBps / ((1-h) × DatasetGB / StepsPerEpoch) steps/s.
type CacheModel struct {
	// DatasetGB is the job's training set.
	DatasetGB float64
	// StepsPerEpoch is the job's steps over its dataset (whole job).
	StepsPerEpoch float64
	// StorageGBps is the storage bandwidth the job gets (its share of its
	// server's): every miss is read at this rate.
	StorageGBps float64
}

// Validate checks the model; errors name the field.
func (c *CacheModel) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"dataset_gb", c.DatasetGB}, {"steps_per_epoch", c.StepsPerEpoch}, {"storage_gbps", c.StorageGBps}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("cache.%s: %v, want > 0", f.name, f.v)
		}
	}
	return nil
}

// bound is the steps/s storage sustains with memGBPerGPU per GPU (+Inf
// when the dataset fits).
func (c *CacheModel) bound(memGBPerGPU float64, gpus int) float64 {
	miss := 1 - memGBPerGPU*float64(gpus)/c.DatasetGB
	if miss <= 0 {
		return math.Inf(1)
	}
	return c.StorageGBps * c.StepsPerEpoch / (miss * c.DatasetGB)
}

// LearnOptions say what a learned profile is relative to and how it is
// derived.
type LearnOptions struct {
	// The proportional share per GPU of the server the job runs on: the
	// profile's 1.0. Required.
	ShareCoresPerGPU, ShareMemGBPerGPU float64
	// Epsilon: the best case reaches (1-Epsilon) of the largest throughput
	// (0: DefaultEpsilon).
	Epsilon float64
	// MinPoints distinct core counts are needed before there is a profile
	// (0: DefaultMinPoints).
	MinPoints int
	// Cache derives memory (nil: see Learn).
	Cache *CacheModel
}

// Defaults of LearnOptions.
const (
	DefaultEpsilon   = 0.05
	DefaultMinPoints = 2
)

// Validate checks the options; errors name the field.
func (o *LearnOptions) Validate() error {
	switch {
	case !(o.ShareCoresPerGPU > 0) || math.IsInf(o.ShareCoresPerGPU, 0):
		return fmt.Errorf("share_cores_per_gpu: %v, want > 0", o.ShareCoresPerGPU)
	case !(o.ShareMemGBPerGPU > 0) || math.IsInf(o.ShareMemGBPerGPU, 0):
		return fmt.Errorf("share_mem_gb_per_gpu: %v, want > 0", o.ShareMemGBPerGPU)
	case !(o.Epsilon >= 0 && o.Epsilon < 1):
		return fmt.Errorf("epsilon: %v, want in [0, 1)", o.Epsilon)
	case o.MinPoints < 0:
		return fmt.Errorf("min_points: %d, want >= 0", o.MinPoints)
	}
	if o.Cache != nil {
		return o.Cache.Validate()
	}
	return nil
}

// sameAxis says whether two axis values are one point (floating-point
// shares of servers).
func sameAxis(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// Points counts the samples' distinct core counts per GPU.
func Points(samples []Sample) int {
	var cs []float64
	for _, s := range samples {
		seen := false
		for _, c := range cs {
			if sameAxis(s.CoresPerGPU, c) {
				seen = true
				break
			}
		}
		if !seen {
			cs = append(cs, s.CoresPerGPU)
		}
	}
	return len(cs)
}

// cpuPoint is one measured core count: the mean at the largest memory it
// was measured with, the number of samples behind it.
type cpuPoint struct {
	cores, mem, v float64
	n             int
}

// Learn builds the profile of model at gpus GPUs from samples (see the
// package's optimistic profiling above). With fewer than MinPoints
// distinct core counts it returns nil and no error: the job has no profile
// yet (insensitive until learned). Errors name the bad option or sample.
func Learn(model string, gpus int, samples []Sample, o LearnOptions) (*Profile, error) {
	if model == "" {
		return nil, fmt.Errorf("model: empty")
	}
	if gpus < 1 {
		return nil, fmt.Errorf("gpus: %d, want >= 1", gpus)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	for i, s := range samples {
		for _, f := range []struct {
			name string
			v    float64
		}{{"cores_per_gpu", s.CoresPerGPU}, {"mem_gb_per_gpu", s.MemGBPerGPU}, {"throughput", s.Throughput}} {
			if !(f.v > 0) || math.IsInf(f.v, 0) {
				return nil, fmt.Errorf("samples[%d].%s: %v, want > 0", i, f.name, f.v)
			}
		}
	}
	eps, minPts := o.Epsilon, o.MinPoints
	if eps == 0 {
		eps = DefaultEpsilon
	}
	if minPts == 0 {
		minPts = DefaultMinPoints
	}
	if Points(samples) < max(minPts, 1) {
		return nil, nil
	}
	pts := cpuCurve(samples)

	// The curve at each grid row, then memory per column.
	rows := make([]float64, len(CoresAxis))
	for i, c := range CoresAxis {
		rows[i] = curveAt(pts, c, CoresAxis, i)
	}
	memFloor := 0.0 // without a cache model: the curve holds from here up
	for _, p := range pts {
		memFloor = math.Max(memFloor, p.mem)
	}
	matrix := make([][]float64, len(CoresAxis))
	for i := range CoresAxis {
		matrix[i] = make([]float64, len(MemAxis))
		for j, m := range MemAxis {
			if o.Cache == nil {
				matrix[i][j] = rows[i] * belowFactor(memFloor, m, MemAxis, j)
			} else {
				matrix[i][j] = math.Min(rows[i], o.Cache.bound(m, gpus))
			}
		}
	}
	p := &Profile{
		Model: model, GPUs: gpus, Matrix: matrix, CoresAxis: CoresAxis, MemAxis: MemAxis,
		ShareCoresPerGPU: o.ShareCoresPerGPU, ShareMemGBPerGPU: o.ShareMemGBPerGPU,
	}
	base := p.Throughput(o.ShareCoresPerGPU, o.ShareMemGBPerGPU)
	if !(base > 0) {
		return nil, fmt.Errorf("cache: storage sustains no throughput at the share (%v GB per GPU)", o.ShareMemGBPerGPU)
	}
	top := 0.0
	for i := range matrix {
		for j := range matrix[i] {
			matrix[i][j] /= base
			top = math.Max(top, matrix[i][j])
		}
	}

	// Best case: the cheapest grid point reaching (1-eps) of the top, never
	// below the measured cores (nor, without a cache model, memory).
	minC := math.Inf(1)
	for _, q := range pts {
		minC = math.Min(minC, q.cores)
	}
	bestCost := math.Inf(1)
	for i, c := range CoresAxis {
		for j, m := range MemAxis {
			if matrix[i][j] < (1-eps)*top-1e-12 {
				continue
			}
			c := math.Max(c, minC)
			if o.Cache == nil {
				m = math.Max(m, memFloor)
			}
			cost := c/o.ShareCoresPerGPU + m/o.ShareMemGBPerGPU
			if cost < bestCost-1e-12 || (math.Abs(cost-bestCost) <= 1e-12 && c < p.CoresPerGPUBest) {
				bestCost, p.CoresPerGPUBest, p.MemGBPerGPUBest = cost, c, m
			}
		}
	}
	p.Speedup = p.Throughput(p.CoresPerGPUBest, p.MemGBPerGPUBest)
	if p.Speedup < 1+1e-9 { // at the share, up to rounding
		p.Speedup = 1
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("learned profile: %w", err) // unreachable: inputs are checked
	}
	return p, nil
}

// cpuCurve is the samples' throughput per distinct core count, each at the
// largest memory it was measured with, made non-decreasing.
func cpuCurve(samples []Sample) []cpuPoint {
	type agg struct {
		sum float64
		n   int
	}
	type key struct{ c, m float64 }
	sums := map[key]*agg{}
	var keys []key
	for _, s := range samples {
		k := key{s.CoresPerGPU, s.MemGBPerGPU}
		for _, o := range keys { // one point for near-equal shares
			if sameAxis(o.c, k.c) && sameAxis(o.m, k.m) {
				k = o
				break
			}
		}
		a := sums[k]
		if a == nil {
			a = &agg{}
			sums[k] = a
			keys = append(keys, k)
		}
		a.sum += s.Throughput
		a.n++
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].c != keys[b].c {
			return keys[a].c < keys[b].c
		}
		return keys[a].m > keys[b].m
	})
	var pts []cpuPoint
	for _, k := range keys {
		if len(pts) > 0 && sameAxis(pts[len(pts)-1].cores, k.c) {
			continue // a smaller memory at the same cores
		}
		a := sums[k]
		pts = append(pts, cpuPoint{cores: k.c, mem: k.m, v: a.sum / float64(a.n), n: a.n})
	}
	return isotonic(pts)
}

// isotonic makes the points' values non-decreasing by pooling adjacent
// violators into their weighted mean (least squares).
func isotonic(pts []cpuPoint) []cpuPoint {
	type block struct {
		sum   float64
		n     int
		first int
	}
	var bs []block
	for i, p := range pts {
		bs = append(bs, block{sum: p.v * float64(p.n), n: p.n, first: i})
		for len(bs) > 1 {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			if a.sum/float64(a.n) <= b.sum/float64(b.n) {
				break
			}
			bs = append(bs[:len(bs)-2], block{sum: a.sum + b.sum, n: a.n + b.n, first: a.first})
		}
	}
	out := append([]cpuPoint(nil), pts...)
	for k, b := range bs {
		end := len(pts)
		if k+1 < len(bs) {
			end = bs[k+1].first
		}
		for i := b.first; i < end; i++ {
			out[i].v = b.sum / float64(b.n)
		}
	}
	return out
}

// curveAt is the curve at grid point axis[i] = x: interpolated between
// measured points, flat beyond the last, and below the first: its value at
// the grid point just below it, in proportion to x further down.
func curveAt(pts []cpuPoint, x float64, axis []float64, i int) float64 {
	first, last := pts[0], pts[len(pts)-1]
	switch {
	case x >= last.cores:
		return last.v
	case x < first.cores:
		return first.v * belowFactor(first.cores, x, axis, i)
	}
	for k := 0; k+1 < len(pts); k++ {
		a, b := pts[k], pts[k+1]
		if x <= b.cores {
			return a.v + (b.v-a.v)*(x-a.cores)/(b.cores-a.cores)
		}
	}
	return last.v // unreachable
}

// belowFactor is the share of a curve measured from floor up that grid
// point axis[i] = x keeps: all of it at or above floor and at the grid
// point just below floor (the next point is at or above it), x/floor
// further down.
func belowFactor(floor, x float64, axis []float64, i int) float64 {
	if x >= floor || i+1 >= len(axis) || axis[i+1] >= floor-1e-9 {
		return 1
	}
	return x / floor
}

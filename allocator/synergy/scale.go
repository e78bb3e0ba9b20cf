package synergy

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ProfiledGPU is the GPU type Synergy measured its profiles on (V100s).
const ProfiledGPU = "v100"

// GPURatio is how fast a job runs on a GPU type relative to ProfiledGPU,
// from its throughputs on both (steps/s, e.g. Gavel's table), rounded to 3
// significant digits so that jobs of one model share scaled profiles. 1
// when either is unknown (not positive).
func GPURatio(onType, onProfiled float64) float64 {
	if !(onType > 0) || !(onProfiled > 0) || math.IsInf(onType+onProfiled, 0) {
		return 1
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(onType/onProfiled, 'g', 3, 64), 64)
	return r
}

// ScaledName names model's profiles scaled by OnGPU(ratio): "res18@0.293".
func ScaledName(model string, ratio float64) string {
	return model + "@" + strconv.FormatFloat(ratio, 'g', -1, 64)
}

// OnGPU is the profile of the same job on a GPU ratio times as fast as the
// one it was measured on (ratio < 1: a slower GPU; GPURatio).
//
// The model is a roofline: the input pipeline feeds samples at a rate that
// grows with the cores it gets, the GPU consumes them at its own rate, and
// the job runs at the smaller of the two. The profile's shape over cores is
// read as the pipeline's rate relative to the GPU's: where it still rises,
// the job is CPU-bound. A GPU ratio times as fast needs ratio times the
// cores for the same relative rate, so the job at c cores per GPU runs as
// the measured job did at c/ratio: the cores axis is scaled by ratio (exact
// when the pipeline's rate is linear in cores, as the image profiles are
// to their best case). On a K80 a third as fast as a V100, res18_1 at 3
// cores per GPU is where it was at 9 on the V100, already GPU-bound: its
// best case becomes 3 cores and its speedup 1. Memory is not scaled (a
// dataset cache's hit rate does not depend on the GPU; the reading keeps
// the memory the job was measured to need).
//
// The result has a cores axis of its own: the original's points and the
// same points × ratio (where the scaled surface bends) from the original's
// first point (1 core per GPU) up, so that Throughput on it is the
// original's at c/ratio exactly, not a resampling (bilinear within cells
// that subdivide the scaled original cells). Below the first point it
// clamps, as the original does: Synergy measured nothing below 1 core per
// GPU, and a job keeps at least that on any GPU (the roofline would send a
// K80 job's demand towards zero). Values are relative to the base share
// again (1.0 at 3 cores, 62.5 GB per GPU). A point is infeasible where the
// original is at the same cores and memory (0.0: the server cannot hold
// that many cores for the job's GPUs: a capacity, not a speed); values read
// beyond a profile's feasible region take its last feasible value (nothing
// is known beyond it).
//
// Best case: the fewest cores (at least 1) at which the scaled profile
// reaches the most it gives, feasibly, up to the original's best cores ×
// ratio: a K80 ResNet-18 needs 1 core per GPU, not 0.9; a flat profile
// stays at 1 core on a faster GPU too (its matrix promises nothing for
// more); res18_4 on a GPU 1.5 times as fast stops at 6 cores, the most
// the server holds for 4 GPUs, not 9. The speedup is the throughput there over the set's share, at
// least 1. Model becomes ScaledName(model, ratio). Ratio 1, or not a
// positive finite number, returns p itself. (A profile without a matrix
// gets one, sampled from its two-point model at the same points.)
func (p *Profile) OnGPU(ratio float64) *Profile {
	if ratio == 1 || !(ratio > 0) || math.IsInf(ratio, 0) {
		return p
	}
	src := p.filled()
	ca, ma := CoresAxis, MemAxis
	if p.Matrix != nil {
		ca, ma = p.CoresAxis, p.MemAxis
	}
	floor := ca[0]
	at := func(c, m float64) float64 { return src.Throughput(math.Max(c, floor)/ratio, m) }
	base := at(BaseCoresPerGPU, BaseMemGBPerGPU)
	if !(base > 0) {
		return p
	}
	axis := make([]float64, 0, 2*len(ca))
	for _, c := range ca {
		axis = append(axis, c)
		if c*ratio >= floor {
			axis = append(axis, c*ratio)
		}
	}
	sort.Float64s(axis)
	axis = slices.CompactFunc(axis, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	m := make([][]float64, len(axis))
	for i, c := range axis {
		m[i] = make([]float64, len(ma))
		for j, mem := range ma {
			if p.Throughput(c, mem) > 0 {
				m[i][j] = at(c, mem) / base
			}
		}
	}
	q := *p
	q.Model = ScaledName(p.Model, ratio)
	q.Matrix, q.CoresAxis, q.MemAxis = m, axis, ma
	lim := math.Max(p.CoresPerGPUBest*ratio, floor)
	best, top := floor, -1.0
	for _, c := range append(slices.Clone(axis), lim) {
		if v := q.Throughput(c, p.MemGBPerGPUBest); c <= lim+1e-9 && (v > top+1e-9 || v >= top-1e-9 && c < best) {
			best, top = c, v
		}
	}
	q.CoresPerGPUBest = best
	if share := q.Throughput(p.ShareCoresPerGPU, p.ShareMemGBPerGPU); share > 0 {
		q.Speedup = math.Max(1, top/share)
	}
	return &q
}

// filled is p with every infeasible (0.0) point of its matrix replaced by
// the last feasible value below it in cores, else left of it in memory: a
// throughput surface without holes, for OnGPU to read between and beyond.
func (p *Profile) filled() *Profile {
	if p.Matrix == nil {
		return p
	}
	m := make([][]float64, len(p.Matrix))
	for i, row := range p.Matrix {
		m[i] = append([]float64(nil), row...)
		for j := range m[i] {
			if m[i][j] == 0 && i > 0 {
				m[i][j] = m[i-1][j]
			}
		}
	}
	for i := range m {
		for j := 1; j < len(m[i]); j++ {
			if m[i][j] == 0 {
				m[i][j] = m[i][j-1]
			}
		}
	}
	q := *p
	q.Matrix = m
	return &q
}

// Clone copies the table's sets and their profile maps (not the profiles),
// so that AddOnGPU can add to the copy.
func (t *Table) Clone() *Table {
	c := &Table{Source: t.Source, Sets: make(map[string]*Set, len(t.Sets))}
	for name, s := range t.Sets {
		cs := *s
		cs.Profiles = make(map[string]*Profile, len(s.Profiles))
		for k, p := range s.Profiles {
			cs.Profiles[k] = p
		}
		c.Sets[name] = &cs
	}
	return c
}

// AddOnGPU adds to every set the profiles of name (a model, or one
// explicit key) scaled by OnGPU(ratio), and returns the name to look them
// up by: ScaledName(model, ratio), or for a key that model's scaled key.
// Name itself when the ratio is 1 or no set knows name. It changes t:
// call it on a Clone, from one goroutine.
func (t *Table) AddOnGPU(name string, ratio float64) string {
	scaled := name
	if ratio == 1 || !(ratio > 0) || math.IsInf(ratio, 0) {
		return name
	}
	for _, s := range t.Sets {
		var src []*Profile
		p, isKey := s.Profiles[name]
		if isKey {
			src = append(src, p)
		} else {
			for _, p := range s.Profiles {
				if p.Model == name {
					src = append(src, p)
				}
			}
		}
		for _, p := range src {
			if strings.Contains(p.Model, "@") {
				continue // already scaled
			}
			q := p.OnGPU(ratio)
			if _, ok := s.Profiles[q.Key()]; !ok {
				s.Profiles[q.Key()] = q
			}
			scaled = q.Model
			if isKey {
				scaled = q.Key()
			}
		}
	}
	return scaled
}

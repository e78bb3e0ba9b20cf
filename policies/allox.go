package policies

import (
	"math"

	"github.com/rondo-sched/rondo/policies/lp"
)

func init() {
	define("allox", func(in *instance, p *Problem) (*Allocation, error) { return allox(in) })
}

// allox is the AlloX baseline (Le et al., EuroSys'20) as Gavel uses it:
// minimize the sum of completion times on heterogeneous GPUs by matching
// jobs to (GPU type, position from the end) slots at cost position ×
// processing time — a job k-th from the end of a GPU's queue delays k jobs.
// GPUs of one type are identical, so a type's slots at position q hold up to
// N_j GPUs' worth of jobs; the matching is a transportation LP (integral for
// single-GPU jobs; multi-GPU jobs take sf GPUs of a slot, the LP's relaxation).
// The jobs that run now are the last-position job of each busy GPU: at
// position q, (use at q) − (use at q+1) GPUs' worth, shortest first.
func allox(in *instance) (*Allocation, error) {
	n, k := in.n(), in.k()
	a := newAllocation("allox", in)
	total := 0.0
	for _, c := range in.counts {
		total += c
	}
	var mdl lp.Model
	type slot struct{ m, j, q, v int }
	var slots []slot
	sumSF := 0.0
	for m := 0; m < n; m++ {
		sumSF += in.sf[m]
	}
	depth := make([]int, k)
	for j := 0; j < k; j++ {
		if in.counts[j] > 0 {
			depth[j] = int(math.Ceil(sumSF / in.counts[j]))
		}
	}
	jobRow := make([][]int, n)
	proc := func(m, j int) float64 { return in.jobs[m].RemainingSteps / in.tput[m][j] }
	for m := 0; m < n; m++ {
		if in.jobs[m].RemainingSteps <= 0 {
			continue
		}
		for j := 0; j < k; j++ {
			if in.tput[m][j] <= 0 || in.counts[j] <= 0 {
				continue
			}
			for q := 1; q <= depth[j]; q++ {
				v := mdl.AddVar(0, 1, float64(q)*proc(m, j))
				slots = append(slots, slot{m, j, q, v})
				jobRow[m] = append(jobRow[m], v)
			}
		}
	}
	ones := func(nv int) []float64 {
		o := make([]float64, nv)
		for i := range o {
			o[i] = 1
		}
		return o
	}
	for m := 0; m < n; m++ {
		if len(jobRow[m]) > 0 {
			mdl.AddRow(jobRow[m], ones(len(jobRow[m])), 1, 1)
		}
	}
	type key struct{ j, q int }
	capIdx := map[key][]int{}
	capVal := map[key][]float64{}
	for _, s := range slots {
		kk := key{s.j, s.q}
		capIdx[kk] = append(capIdx[kk], s.v)
		capVal[kk] = append(capVal[kk], in.sf[s.m])
	}
	for j := 0; j < k; j++ {
		for q := 1; q <= depth[j]; q++ {
			if idx := capIdx[key{j, q}]; len(idx) > 0 {
				mdl.AddRow(idx, capVal[key{j, q}], -lp.Inf, in.counts[j])
			}
		}
	}
	sol, err := mdl.Solve()
	if err != nil {
		return nil, err
	}
	// GPU use per (type, position), and the jobs at each.
	use := map[key]float64{}
	at := map[key][]slot{}
	for _, s := range slots {
		if z := sol.X[s.v]; z > 1e-9 {
			use[key{s.j, s.q}] += z * in.sf[s.m]
			at[key{s.j, s.q}] = append(at[key{s.j, s.q}], s)
		}
	}
	for j := 0; j < k; j++ {
		for q := 1; q <= depth[j]; q++ {
			free := use[key{j, q}] - use[key{j, q + 1}] // GPUs whose queue ends at q
			list := at[key{j, q}]
			idx := make([]int, len(list))
			for i := range idx {
				idx[i] = i
			}
			sortStable(idx, func(x, y int) bool { return proc(list[x].m, j) < proc(list[y].m, j) })
			for _, i := range idx {
				if free <= 1e-9 {
					break
				}
				s := list[i]
				z := sol.X[s.v]
				take := math.Min(z, free/in.sf[s.m])
				a.X[s.m][j] += take
				free -= take * in.sf[s.m]
			}
		}
	}
	a.Objective = sol.Objective
	return a, nil
}

package policies

import (
	"errors"
	"math"

	"github.com/rondo-sched/rondo/policies/lp"
)

func init() {
	define("max_sum_throughput_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return costPolicy("max_sum_throughput_perf", in, false, false)
	})
	define("max_sum_throughput_normalized_by_cost_perf", func(in *instance, p *Problem) (*Allocation, error) {
		return costPolicy("max_sum_throughput_normalized_by_cost_perf", in, true, false)
	})
	define("max_sum_throughput_normalized_by_cost_perf_SLOs", func(in *instance, p *Problem) (*Allocation, error) {
		return costPolicy("max_sum_throughput_normalized_by_cost_perf_SLOs", in, true, true)
	})
}

// sloNeed is the throughput job m needs to meet its SLO: remaining steps over
// the time left before the deadline (slo_s counts from the job's start). A
// deadline already passed gives no constraint.
func sloNeed(in *instance, m int) float64 {
	j := in.jobs[m]
	if j.SLOs == nil || j.RemainingSteps <= 0 {
		return 0
	}
	left := *j.SLOs - j.TimeSinceStartS
	if left <= 0 {
		return 0
	}
	return j.RemainingSteps / left
}

// costPolicy maximizes total throughput, or total normalized throughput per
// dollar (Gavel §4.1 "minimize cost": Σ_m thr_m(X)/T_m,best over
// Σ_m Σ_j cost_j·sf_m·X_mj, a linear-fractional program solved by
// Dinkelbach's sequence of LPs), optionally with SLO rows thr_m ≥ need_m. If
// the SLOs cannot all be met, they are dropped (as Gavel does).
func costPolicy(name string, in *instance, perCost, slos bool) (*Allocation, error) {
	if slos {
		a, err := costPolicyOnce(name, in, perCost, true)
		if !errors.Is(err, lp.ErrInfeasible) {
			return a, err
		}
	}
	return costPolicyOnce(name, in, perCost, false)
}

func costPolicyOnce(name string, in *instance, perCost, slos bool) (*Allocation, error) {
	n, k := in.n(), in.k()
	value := make([][]float64, n) // numerator coefficient per X_mj
	spend := make([][]float64, n) // denominator ($/h) per X_mj
	for m := 0; m < n; m++ {
		value[m] = make([]float64, k)
		spend[m] = make([]float64, k)
		best := 0.0
		for _, v := range in.tput[m] {
			best = math.Max(best, v)
		}
		for j := 0; j < k; j++ {
			value[m][j] = in.tput[m][j]
			if perCost {
				value[m][j] /= best
			}
			spend[m][j] = in.cost[j] * in.sf[m]
		}
	}
	q := 0.0
	var x [][]float64
	for iter := 0; iter < 100; iter++ {
		var mdl lp.Model
		mdl.Maximize()
		vars := make([][]int, n)
		for m := 0; m < n; m++ {
			vars[m] = make([]int, k)
			var idx []int
			var val []float64
			for j := 0; j < k; j++ {
				vars[m][j] = -1
				if in.tput[m][j] > 0 && in.counts[j] > 0 {
					vars[m][j] = mdl.AddVar(0, 1, value[m][j]-q*spend[m][j])
					idx = append(idx, vars[m][j])
					val = append(val, 1)
				}
			}
			if len(idx) == 0 {
				continue
			}
			mdl.AddRow(idx, val, -lp.Inf, 1)
			if need := sloNeed(in, m); slos && need > 0 {
				tv := make([]float64, len(idx))
				for i, v := range idx {
					for j := 0; j < k; j++ {
						if vars[m][j] == v {
							tv[i] = in.tput[m][j]
						}
					}
				}
				mdl.AddRow(idx, tv, need, lp.Inf)
			}
		}
		for j := 0; j < k; j++ {
			var idx []int
			var val []float64
			for m := 0; m < n; m++ {
				if vars[m][j] >= 0 {
					idx = append(idx, vars[m][j])
					val = append(val, in.sf[m])
				}
			}
			if len(idx) > 0 {
				mdl.AddRow(idx, val, -lp.Inf, in.counts[j])
			}
		}
		sol, err := mdl.Solve()
		if err != nil {
			return nil, err
		}
		x = make([][]float64, n)
		num, den := 0.0, 0.0
		for m := 0; m < n; m++ {
			x[m] = make([]float64, k)
			for j := 0; j < k; j++ {
				if v := vars[m][j]; v >= 0 {
					x[m][j] = sol.X[v]
					num += value[m][j] * x[m][j]
					den += spend[m][j] * x[m][j]
				}
			}
		}
		if !perCost {
			q = num
			break
		}
		if den <= 0 {
			q = 0
			break
		}
		// Dinkelbach: stop when max N − qD is (numerically) zero.
		if sol.Objective <= 1e-9*math.Max(1, num) {
			break
		}
		q = num / den
	}
	a := newAllocation(name, in)
	for m := range x {
		copy(a.X[m], x[m])
	}
	a.Objective = q
	return a, nil
}

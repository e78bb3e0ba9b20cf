package estimator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// Errors are the mean absolute and mean relative errors of normalized pair
// throughputs over N held-out entries.
type Errors struct {
	MAE, MRE float64
	N        int
}

type errAcc struct{ abs, rel float64 }

func (a *errAcc) add(est, truth float64) {
	d := math.Abs(est - truth)
	a.abs += d
	a.rel += d / truth
}

func (a errAcc) errors(n int) Errors {
	if n == 0 {
		return Errors{}
	}
	return Errors{MAE: a.abs / float64(n), MRE: a.rel / float64(n), N: n}
}

// LOOResult is the leave-one-out error of one GPU type at one profiling
// budget K.
type LOOResult struct {
	GPUType string
	K       int // reference jobs each held-out job is profiled against
	Trials  int // random profiling sets per held-out job

	Completion Errors // completed row/column (Estimate.Pair)
	Nearest    Errors // nearest reference job (Estimate.NearestPair; completed value where it says infeasible)
	Naive      Errors // mean of the profiled entries (row: the new job's, column: the partners')
	RefMean    Errors // reference mean: entry (new, j) ≈ mean_i Norm[i][j], (j, new) ≈ mean_i Norm[j][i]

	// Infeasible pairs among the evaluated (unprofiled) ones, and how the
	// nearest reference's feasibility mask classifies them.
	Infeasible        int // truly infeasible
	InfeasibleCaught  int // ... predicted infeasible by the nearest reference
	FalseInfeasible   int // feasible pairs the nearest reference calls infeasible
	NearestExactMatch int // trials whose nearest reference is the held-out job's best match in truth
	Cases             int // held-out jobs × trials
}

// LeaveOneOut treats each reference job type of gpuType in turn as new: its
// row and column are hidden except for k randomly chosen profiled partners
// (per trial, seeded by seed), the rest are estimated from the other 25
// types and compared with the true values. Infeasible pairs (measured
// [0, 0]) are excluded from the error; profiling an infeasible partner
// yields only that fact. The diagonal (a job with itself) is not evaluated.
func LeaveOneOut(t *throughputs.Table, gpuType string, k, trials int, seed uint64, opt Options) (LOOResult, error) {
	full, err := NewReference(t, gpuType)
	if err != nil {
		return LOOResult{}, err
	}
	n := len(full.Keys)
	if k < 1 || k > n-1 {
		return LOOResult{}, fmt.Errorf("estimator: k=%d out of 1..%d", k, n-1)
	}
	if trials < 1 {
		trials = 1
	}
	res := LOOResult{GPUType: gpuType, K: k, Trials: trials}
	var comp, near, naive, rmean errAcc
	var cnt int
	for h := 0; h < n; h++ {
		sub := full.without(h)
		m := n - 1
		orig := func(j int) int { // sub index → full index
			if j >= h {
				return j + 1
			}
			return j
		}
		// reference means (over the feasible entries of the sub matrix)
		colMean := make([]float64, m) // mean_i Norm[i][j]
		rowMean := make([]float64, m) // mean_i Norm[j][i]
		var globalSum float64
		var globalN int
		for j := 0; j < m; j++ {
			var cs, rs float64
			var cn, rn int
			for i := 0; i < m; i++ {
				if sub.Feasible[i][j] {
					cs += sub.Norm[i][j]
					cn++
				}
				if sub.Feasible[j][i] {
					rs += sub.Norm[j][i]
					rn++
					globalSum += sub.Norm[j][i]
					globalN++
				}
			}
			colMean[j], rowMean[j] = cs/math.Max(1, float64(cn)), rs/math.Max(1, float64(rn))
		}
		global := globalSum / math.Max(1, float64(globalN))

		// the held-out job's true best match: nearest reference by true
		// row and column over the feasible entries
		trueBest, trueBestD := -1, math.Inf(1)
		for q := 0; q < m; q++ {
			var d float64
			var c int
			for j := 0; j < m; j++ {
				oj := orig(j)
				if full.Feasible[h][oj] && sub.Feasible[q][j] {
					a := full.Norm[h][oj] - sub.Norm[q][j]
					d += a * a
					c++
				}
				if full.Feasible[oj][h] && sub.Feasible[j][q] {
					a := full.Norm[oj][h] - sub.Norm[j][q]
					d += a * a
					c++
				}
			}
			if c > 0 && d/float64(c) < trueBestD {
				trueBest, trueBestD = q, d/float64(c)
			}
		}

		for tr := 0; tr < trials; tr++ {
			rng := rand.New(rand.NewPCG(seed, uint64(h)<<32|uint64(tr)))
			perm := rng.Perm(m)
			prof := perm[:k]
			isProf := make([]bool, m)
			var ms []Measurement
			var rowSum, colSum float64
			var feasN int
			for _, j := range prof {
				isProf[j] = true
				oj := orig(j)
				if !full.Feasible[h][oj] {
					ms = append(ms, Measurement{Ref: j, Infeasible: true})
					continue
				}
				ms = append(ms, Measurement{Ref: j, New: full.Norm[h][oj], Other: full.Norm[oj][h]})
				rowSum += full.Norm[h][oj]
				colSum += full.Norm[oj][h]
				feasN++
			}
			naiveRow, naiveCol := global, global
			if feasN > 0 {
				naiveRow, naiveCol = rowSum/float64(feasN), colSum/float64(feasN)
			}
			o := opt
			o.Seed = opt.Seed + uint64(h*trials+tr)
			est, err := sub.Estimate(ms, o)
			if err != nil {
				return LOOResult{}, fmt.Errorf("%s: held out %v: %w", gpuType, full.Keys[h], err)
			}
			res.Cases++
			if est.Nearest == trueBest {
				res.NearestExactMatch++
			}
			for j := 0; j < m; j++ {
				if isProf[j] {
					continue
				}
				oj := orig(j)
				_, _, nf := est.NearestPair(j)
				if !full.Feasible[h][oj] {
					res.Infeasible++
					if !nf {
						res.InfeasibleCaught++
					}
					continue
				}
				if !nf {
					res.FalseInfeasible++
				}
				tRow, tCol := full.Norm[h][oj], full.Norm[oj][h]
				cRow, cCol, _ := est.Pair(j)
				nRow, nCol := cRow, cCol
				if nf {
					nRow, nCol, _ = est.NearestPair(j)
				}
				comp.add(cRow, tRow)
				comp.add(cCol, tCol)
				near.add(nRow, tRow)
				near.add(nCol, tCol)
				naive.add(naiveRow, tRow)
				naive.add(naiveCol, tCol)
				rmean.add(colMean[j], tRow)
				rmean.add(rowMean[j], tCol)
				cnt += 2
			}
		}
	}
	res.Completion = comp.errors(cnt)
	res.Nearest = near.errors(cnt)
	res.Naive = naive.errors(cnt)
	res.RefMean = rmean.errors(cnt)
	return res, nil
}

// Table formats results as a Markdown table.
func Table(rs []LOOResult) string {
	var b strings.Builder
	b.WriteString("| GPU type | k | entries | completion MAE / MRE | nearest ref MAE / MRE | naive MAE / MRE | ref mean MAE / MRE | infeasible caught | false infeasible | best match found |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.3f / %.1f%% | %.3f / %.1f%% | %.3f / %.1f%% | %.3f / %.1f%% | %d/%d | %d | %d/%d |\n",
			r.GPUType, r.K, r.Completion.N,
			r.Completion.MAE, 100*r.Completion.MRE,
			r.Nearest.MAE, 100*r.Nearest.MRE,
			r.Naive.MAE, 100*r.Naive.MRE,
			r.RefMean.MAE, 100*r.RefMean.MRE,
			r.InfeasibleCaught, r.Infeasible, r.FalseInfeasible,
			r.NearestExactMatch, r.Cases)
	}
	return b.String()
}

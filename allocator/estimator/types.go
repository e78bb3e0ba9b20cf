package estimator

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// TypeOptions are CompleteTypes' options for Complete: biases only (a job
// factor times a type factor in log space), a light ridge. TestCompleteTypes
// and TestCompleteTypesGavel hold their measured error (docs/gpu-types.md).
var TypeOptions = Options{Rank: 0, Lambda: 0.01, Iters: 200, Seed: 1}

// TypeEstimate is one completed (job, GPU type) throughput.
type TypeEstimate struct {
	Value float64
	// Defaulted: nothing tied the type to the job's known types (no job
	// is known on both), or nothing is known of the job; Value is then
	// the job's geometric mean over its known types, or 1.
	Defaulted bool
	// Support is how many other jobs are known on the type and on one of
	// the job's known types (0 when Defaulted).
	Support int
}

// CompleteTypes estimates jobs' throughputs on GPU types nobody measured
// for them: the jobs x types completion of issue #18 (not the pair
// estimator). known[job][type] are the throughputs known (measured, or a
// table's; values <= 0 are ignored: "cannot run there" is not a speed);
// want[job] lists the types to estimate for each job.
//
// The model is multiplicative, a job's speed times a type's speed:
// log tput(j, t) ≈ mu + b_j + c_t, fitted on every known entry by
// Complete (TypeOptions). So job j, measured only on s, gets on t its
// value on s times the typical ratio t/s of the jobs known on both
// (least squares in log space: the geometric mean of their ratios, every
// path between s and t counted). Rows are whole jobs at their scale
// factors: ratios between types are what carries over, not absolute
// steps/s, so a job with nothing known gets nothing from other jobs.
//
// The rule where that says nothing (Defaulted): a job with known values
// gets their geometric mean on a type no job is known on together with
// one of its types (the type counts as average for that job); a job with
// none gets 1 on every type (all alike), as before completion. Pure and
// deterministic.
func CompleteTypes(known map[string]map[string]float64, want map[string][]string) map[string]map[string]TypeEstimate {
	out := map[string]map[string]TypeEstimate{}
	set := func(j, t string, e TypeEstimate) {
		if out[j] == nil {
			out[j] = map[string]TypeEstimate{}
		}
		out[j][t] = e
	}
	// Rows: jobs with a known value; columns: every type named.
	var jobs, types []string
	col := map[string]int{}
	addType := func(t string) {
		if _, ok := col[t]; !ok {
			col[t] = len(types)
			types = append(types, t)
		}
	}
	for j, m := range known {
		if pos(m) > 0 {
			jobs = append(jobs, j)
		}
	}
	slices.Sort(jobs) // deterministic order
	for _, j := range jobs {
		for _, t := range sortedKeys(known[j]) {
			addType(t)
		}
	}
	wanted := sortedKeys(want)
	for _, j := range wanted {
		for _, t := range want[j] {
			addType(t)
		}
	}
	row := map[string]int{}
	for i, j := range jobs {
		row[j] = i
	}
	var fit *mat.Dense
	fitted := func() *mat.Dense {
		if fit != nil || len(jobs) == 0 {
			return fit
		}
		x := mat.NewDense(len(jobs), len(types), nil)
		mask := make([][]bool, len(jobs))
		for i, j := range jobs {
			mask[i] = make([]bool, len(types))
			for t, v := range known[j] {
				if v > 0 {
					x.Set(i, col[t], math.Log(v))
					mask[i][col[t]] = true
				}
			}
		}
		fit, _ = Complete(x, mask, TypeOptions) // nothing observed is ruled out: len(jobs) > 0
		return fit
	}
	for _, j := range wanted {
		own := known[j]
		if pos(own) == 0 {
			for _, t := range want[j] {
				set(j, t, TypeEstimate{Value: 1, Defaulted: true})
			}
			continue
		}
		for _, t := range want[j] {
			n := support(known, j, t)
			if n == 0 {
				set(j, t, TypeEstimate{Value: geoMean(own), Defaulted: true})
				continue
			}
			set(j, t, TypeEstimate{Value: math.Exp(fitted().At(row[j], col[t])), Support: n})
		}
	}
	return out
}

// support counts the jobs other than j known on t and on a type j is
// known on (not t itself).
func support(known map[string]map[string]float64, j, t string) int {
	n := 0
	for k, m := range known {
		if k == j || !(m[t] > 0) {
			continue
		}
		for s, v := range known[j] {
			if s != t && v > 0 && m[s] > 0 {
				n++
				break
			}
		}
	}
	return n
}

func pos(m map[string]float64) int {
	n := 0
	for _, v := range m {
		if v > 0 {
			n++
		}
	}
	return n
}

func geoMean(m map[string]float64) float64 {
	var s float64
	n := 0
	for _, v := range m {
		if v > 0 {
			s += math.Log(v)
			n++
		}
	}
	return math.Exp(s / float64(n))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

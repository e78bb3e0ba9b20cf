package estimator

import (
	"math"
	"slices"
)

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
// The rule is ratios between types: job j, known on types S, gets on t
//
//	est(j, t) = geomean over s in S of  tput(j, s) x median_k tput(k, t) / tput(k, s)
//
// k ranging over the other rows known on both s and t, each s weighted by
// its number of such k. Rows are whole jobs at their scale factors:
// ratios between types carry over, absolute steps/s do not, so a job with
// nothing known gets nothing from other jobs. Only direct ratios count:
// a global fit (Complete's biases in log space, tried first) pools every
// type into each job's level, so a job's K80 speed moved its L40S
// estimate (docs/gpu-types.md).
//
// Where that says nothing (Defaulted): a job with known values gets their
// geometric mean on a type no other row is known on together with one of
// its types (the type counts as average for that job); a job with none
// gets 1 on every type (all alike), as before completion. Pure and
// deterministic.
func CompleteTypes(known map[string]map[string]float64, want map[string][]string) map[string]map[string]TypeEstimate {
	out := map[string]map[string]TypeEstimate{}
	rows := sortedKeys(known) // deterministic order of the medians' inputs
	for _, j := range sortedKeys(want) {
		for _, t := range want[j] {
			e := estimateType(known, rows, j, t)
			if out[j] == nil {
				out[j] = map[string]TypeEstimate{}
			}
			out[j][t] = e
		}
	}
	return out
}

// estimateType is CompleteTypes' rule for one (job, type).
func estimateType(known map[string]map[string]float64, rows []string, j, t string) TypeEstimate {
	own := known[j]
	if pos(own) == 0 {
		return TypeEstimate{Value: 1, Defaulted: true}
	}
	var logSum, weight float64
	support := map[string]bool{}
	for _, s := range sortedKeys(own) {
		if s == t || !(own[s] > 0) {
			continue
		}
		var ratios []float64
		for _, k := range rows {
			m := known[k]
			if k != j && m[t] > 0 && m[s] > 0 {
				ratios = append(ratios, math.Log(m[t]/m[s]))
				support[k] = true
			}
		}
		if len(ratios) == 0 {
			continue
		}
		w := float64(len(ratios))
		logSum += w * (math.Log(own[s]) + median(ratios))
		weight += w
	}
	if weight == 0 {
		return TypeEstimate{Value: geoMean(own), Defaulted: true}
	}
	return TypeEstimate{Value: math.Exp(logSum / weight), Support: len(support)}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
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

package fairshare

import (
	"math"
	"sort"
)

// ReferenceType is the slowest GPU type of a population of jobs, each given
// as its throughput per type (0 or absent: cannot run there): the type with
// the lowest mean over all jobs of the job's throughput there divided by its
// best throughput (a job that cannot run there counts 0), ties by name.
// Types no job can run on are not candidates; "" when there is none.
func ReferenceType(jobs map[string][]map[string]float64) string {
	sum := map[string]float64{}          // Σ normalized: the same job count for every type
	for _, u := range sortedKeys(jobs) { // users in a fixed order: the same sums every run
		for _, j := range jobs[u] {
			best := 0.0
			for _, v := range j {
				best = math.Max(best, v)
			}
			if best <= 0 {
				continue
			}
			for t, v := range j {
				if v > 0 {
					sum[t] += v / best
				}
			}
		}
	}
	ref := ""
	for _, t := range sortedKeys(sum) {
		if ref == "" || sum[t] < sum[ref] {
			ref = t
		}
	}
	return ref
}

// Valuations is each user's value of one GPU of each type from its jobs'
// throughputs per type (jobs by user; 0 or absent: the job cannot run
// there), in units of the reference type (ReferenceType, the slowest):
//
//   - value[u][ref] = 1 when some job of u runs on ref, else 0;
//   - value[u][t] = the mean over u's jobs that run on both t and ref of
//     throughput_t / throughput_ref.
//
// With two types a user's speedup value[u][fast]/value[u][slow] is then
// exactly the mean of its jobs' measured speedups (slow being the
// reference). Fallback, for a user with jobs on t none of which runs on
// ref (or no job on ref at all): value[u][t] is the population's mean
// ratio throughput_t/throughput_ref over all jobs that run on both, or,
// if no job does, the ratio of the two types' mean normalized throughputs
// (ReferenceType's statistic). A user with no job on t values it 0.
func Valuations(jobs map[string][]map[string]float64) Value {
	ref := ReferenceType(jobs)
	out := Value{}
	if ref == "" {
		for u := range jobs {
			out[u] = map[string]float64{}
		}
		return out
	}
	// Population statistics for the fallback.
	popSum, popN := map[string]float64{}, map[string]float64{}
	normSum := map[string]float64{}
	for _, u := range sortedKeys(jobs) {
		for _, j := range jobs[u] {
			best := 0.0
			for _, v := range j {
				best = math.Max(best, v)
			}
			for t, v := range j {
				if v <= 0 {
					continue
				}
				normSum[t] += v / best
				if r := j[ref]; r > 0 {
					popSum[t] += v / r
					popN[t]++
				}
			}
		}
	}
	fallback := func(t string) float64 {
		if popN[t] > 0 {
			return popSum[t] / popN[t]
		}
		return normSum[t] / normSum[ref]
	}
	for u, js := range jobs {
		sum, n := map[string]float64{}, map[string]float64{}
		runs := map[string]bool{}
		for _, j := range js {
			r := j[ref]
			for t, v := range j {
				if v <= 0 {
					continue
				}
				runs[t] = true
				if r > 0 {
					sum[t] += v / r
					n[t]++
				}
			}
		}
		m := map[string]float64{}
		for t := range runs {
			switch {
			case t == ref:
				m[t] = 1
			case n[t] > 0:
				m[t] = sum[t] / n[t]
			default:
				m[t] = fallback(t)
			}
		}
		out[u] = m
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

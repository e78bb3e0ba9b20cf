package policies

import (
	"fmt"
	"math/rand"
	"testing"
)

// Benchmark instances follow POLICY-SOLVER-NOTES: 3 GPU types, about one GPU
// per eight jobs (capacity binds), scale factors 1/2/4/8, weights 1 or 2.
func benchProblem(n int) *Problem {
	return randomProblem(rand.New(rand.NewSource(int64(n))), n, n/8)
}

func benchPolicy(b *testing.B, policy string, sizes []int, pairs bool) {
	for _, n := range sizes {
		p := benchProblem(n)
		if pairs {
			addPairs(rand.New(rand.NewSource(1)), p, n)
		}
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var obj float64
			for i := 0; i < b.N; i++ {
				a, err := Solve(policy, p)
				if err != nil {
					b.Fatal(err)
				}
				obj = a.Objective
			}
			b.ReportMetric(obj, "objective")
		})
	}
}

func BenchmarkLAS(b *testing.B) {
	benchPolicy(b, "max_min_fairness_perf", []int{256, 1024, 2048, 4096, 10000, 100000}, false)
}

func BenchmarkLASClp(b *testing.B) {
	for _, n := range []int{256, 1024, 2048} {
		p := benchProblem(n)
		in := newInstance(p)
		mm := lasProblem(in, in.tput)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var t float64
			for i := 0; i < b.N; i++ {
				res, _, err := mm.solveLP(nil)
				if err != nil {
					b.Fatal(err)
				}
				t = res.t
			}
			dec, err := mm.solve()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(t, "objective")
			b.ReportMetric((t-dec.t)/t, "decomposition_rel_gap")
		})
	}
}

func BenchmarkHierarchical(b *testing.B) {
	benchPolicy(b, "max_min_fairness_water_filling_perf", []int{256, 1024, 2048, 10000}, false)
}

func BenchmarkLASPacked(b *testing.B) {
	benchPolicy(b, "max_min_fairness_packed", []int{128, 256, 512, 1024, 2048}, true)
}

func BenchmarkFTF(b *testing.B) {
	benchPolicy(b, "finish_time_fairness_perf", []int{256, 2048}, false)
}

func BenchmarkMakespan(b *testing.B) {
	benchPolicy(b, "min_total_duration_perf", []int{256, 2048}, false)
}

// BenchmarkLASCore is the decomposition alone (mm.solve on a built
// instance): Solve's time less validation, the dense instance, fillLeftover
// and the effective throughputs.
func BenchmarkLASCore(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		p := benchProblem(n)
		in := newInstance(p)
		mm := lasProblem(in, in.tput)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var res *maxMinResult
			var err error
			for i := 0; i < b.N; i++ {
				if res, err = mm.solve(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.t, "objective")
			b.ReportMetric(float64(res.passes), "passes")
			b.ReportMetric(1e9*res.gap/res.t, "certified_rel_gap_x1e9")
		})
	}
}

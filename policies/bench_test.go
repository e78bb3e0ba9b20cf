package policies

import (
	"fmt"
	"math"
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
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) { benchDecomposition(b, mm) })
	}
}

// BenchmarkLASCold10k is a cold LAS solve at 10,000 jobs: the
// decomposition alone, as BenchmarkLASCore/jobs=10000 (per-job data,
// breakpoint sort, column generation from the zero column, allocation).
func BenchmarkLASCold10k(b *testing.B) {
	in := newInstance(benchProblem(10000))
	benchDecomposition(b, lasProblem(in, in.tput))
}

// benchDecomposition times mm's decomposition solve and reports its
// objective, passes and certified gap.
func benchDecomposition(b *testing.B, mm *maxMin) {
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
}

// BenchmarkLASIncremental10k is the same instance held in a LASSession,
// solved once before the timer; each op is one arrival (a new random job)
// and its re-solve, then one departure (a random held job) and its
// re-solve, at a certified relative gap of 1e-9 like the cold solve. The
// job count stays at 10,000-10,001. ns/solve is ns/op over the two solves.
func BenchmarkLASIncremental10k(b *testing.B) {
	const n = 10000
	p := benchProblem(n)
	s, err := NewLASSession(p.GPUTypes)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, n+1)
	for _, j := range p.Jobs {
		if err := s.Add(j); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if _, err := s.Solve(); err != nil {
		b.Fatal(err)
	}
	arrivals := randomProblem(rand.New(rand.NewSource(2)), b.N, n/8).Jobs
	for i := range arrivals {
		arrivals[i].ID = fmt.Sprintf("arrival%d", i)
	}
	rng := rand.New(rand.NewSource(3))
	passes, worstGap := 0, 0.0
	var res LASResult
	solve := func() {
		if res, err = s.Solve(); err != nil {
			b.Fatal(err)
		}
		passes += res.Passes
		worstGap = math.Max(worstGap, res.Gap/res.Objective)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Add(arrivals[i]); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, arrivals[i].ID)
		solve()
		q := rng.Intn(len(ids))
		if err := s.Remove(ids[q]); err != nil {
			b.Fatal(err)
		}
		ids[q] = ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		solve()
	}
	b.StopTimer()
	if worstGap > 1e-6 {
		b.Fatalf("certified relative gap %g over 1e-6", worstGap)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/solve")
	b.ReportMetric(float64(passes)/float64(2*b.N), "passes/solve")
	b.ReportMetric(1e9*worstGap, "worst_certified_rel_gap_x1e9")
	b.ReportMetric(res.Objective, "objective")
}

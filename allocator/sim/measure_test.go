package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// measureRun simulates 100 jobs of a seeded continuous trace on a small
// heterogeneous cluster under max_min_fairness_perf (throughput-aware, so
// estimates change decisions), with the given measurement noise.
func measureRun(t *testing.T, seed int64, noise float64) (*Result, *simulator) {
	t.Helper()
	return measureRunPolicy(t, "max_min_fairness_perf", seed, noise)
}

func measureRunPolicy(t *testing.T, policy string, seed int64, noise float64) (*Result, *simulator) {
	t.Helper()
	jobs, err := trace.Generate(trace.Options{Seed: seed, Rate: 3}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var sp *simulator
	res, err := Run(&SliceSource{Jobs: jobs}, Options{
		Cluster:      Cluster{Types: map[string]int{"v100": 4, "p100": 4, "k80": 4}, GPUsPerServer: 1},
		Engine:       engine.Config{Policy: policy, RoundS: 360, Seed: seed},
		MeasureNoise: noise, observe: func(s *simulator) { sp = s }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.JobsDone != 100 {
		t.Fatalf("seed %d noise %g: %d/%d jobs done, finished %v", seed, noise, res.JobsDone, res.JobsInWindow, res.Finished)
	}
	return res, sp
}

// sameResult compares two runs but for the timings and the estimate
// error.
func sameResult(a, b *Result) bool {
	x, y := *a, *b
	x.WallS, y.WallS = 0, 0
	x.SolveMSP50, y.SolveMSP50, x.SolveMSMax, y.SolveMSMax = 0, 0, 0, 0
	x.EstimateErrorMean, y.EstimateErrorMean = 0, 0
	return reflect.DeepEqual(x, y)
}

// TestMeasuredThroughputs: with noisy measurements (sigma 0.1) the
// estimating stage decides on estimates whose error shrinks with the
// reports as the estimator's weights say, and the average JCT stays within
// the bound those errors allow.
//
// The bound: max_min_fairness_perf's allocation is a function of the
// throughput matrix, homogeneous in each job's row. Deciding on estimates
// T̂ with |T̂/T − 1| ≤ ε, each job's true normalized rate under the chosen
// allocation is within a factor (1−ε)/(1+ε) ≈ 1 − 2ε of the one the
// decider intended, so a job's time to finish, and the average JCT, moves
// by at most about 2ε. ε is the run's mean estimate error
// (EstimateErrorMean, about 3.5% here: 8% after the first report, about
// 2.7% in the EWMA's steady state), so |ΔJCT| ≤ 2·EstimateErrorMean.
func TestMeasuredThroughputs(t *testing.T) {
	bySamples := map[int]errStat{}
	changed := false
	for seed := int64(0); seed < 3; seed++ {
		base, _ := measureRun(t, seed, 0)
		if base.EstimateErrorMean != 0 {
			t.Fatalf("seed %d: noiseless run has an estimate error %g", seed, base.EstimateErrorMean)
		}
		res, sp := measureRun(t, seed, 0.1)
		eps := res.EstimateErrorMean
		d := res.AvgJCTS/base.AvgJCTS - 1
		t.Logf("seed %d: avg JCT %.0f s noiseless, %.0f s measured (%+.2f%%), mean estimate error %.2f%%",
			seed, base.AvgJCTS, res.AvgJCTS, 100*d, 100*eps)
		// Between the steady state's 2.7% and the first report's 8%: the
		// bound below is then at most 10%.
		if eps < 0.02 || eps > 0.05 {
			t.Errorf("seed %d: mean estimate error %.4f, want within [0.02, 0.05] for sigma 0.1", seed, eps)
		}
		if math.Abs(d) > 2*eps {
			t.Errorf("seed %d: average JCT moved by %+.2f%%, more than 2×%.2f%% estimate error", seed, 100*d, 100*eps)
		}
		changed = changed || !sameResult(base, res)
		for n, b := range sp.meas.bySamples {
			a := bySamples[n]
			a.sum += b.sum
			a.n += b.n
			bySamples[n] = a
		}
	}
	if !changed {
		t.Errorf("noisy estimates never changed a decision: the measurements do not reach the decider")
	}
	// A mean of n lognormal reports is off by σ·√(2/π)/√n ≈ 0.0798/√n on
	// average (n ≤ 5, the plain-mean phase); the EWMA (alpha 0.2) then
	// settles at σ·√(α/(2−α))·√(2/π) ≈ 0.027. About 450 samples per n: the
	// standard error is under 0.003.
	mean := func(lo, hi int) (float64, int) {
		s, c := 0.0, 0
		for n := lo; n <= hi; n++ {
			s += bySamples[n].sum
			c += bySamples[n].n
		}
		return s / float64(c), c
	}
	for n := 1; n <= 5; n++ {
		got, c := mean(n, n)
		want := 0.1 * math.Sqrt(2/math.Pi) / math.Sqrt(float64(n))
		t.Logf("estimates from %d reports: error %.4f over %d (theory %.4f)", n, got, c, want)
		if c < 300 || math.Abs(got-want) > 0.2*want {
			t.Errorf("estimates from %d reports: mean error %.4f over %d, want %.4f ± 20%%", n, got, c, want)
		}
	}
	late, c := mean(10, math.MaxInt16)
	first, _ := mean(1, 1)
	t.Logf("estimates from 10 or more reports: error %.4f over %d", late, c)
	if c < 300 || late > 0.035 || late > first/2 {
		t.Errorf("estimates from 10+ reports: mean error %.4f over %d, want ≤ 0.035 and under half the first report's %.4f", late, c, first)
	}
}

// TestExactMeasurementsChangeNothing: measurements equal to the truth
// (noise so small that exp(σZ) is exactly 1) go through the whole path
// (reports, snapshot, estimator, amended throughputs) and give the
// noiseless run bit for bit; the same seed gives the same noisy run.
func TestExactMeasurementsChangeNothing(t *testing.T) {
	base, _ := measureRun(t, 1, 0)
	exact, sp := measureRun(t, 1, 1e-300)
	if sp.meas == nil || sp.meas.errN == 0 {
		t.Fatal("no estimate was formed from the measurements")
	}
	if !sameResult(base, exact) || exact.EstimateErrorMean != 0 {
		t.Errorf("exact measurements changed the run:\n%+v\n%+v", base, exact)
	}
	a, _ := measureRun(t, 1, 0.1)
	b, _ := measureRun(t, 1, 0.1)
	if !sameResult(a, b) || a.EstimateErrorMean != b.EstimateErrorMean {
		t.Errorf("the same seed gave different noisy runs:\n%+v\n%+v", a, b)
	}
	// Packed: colocated runs report their pair throughputs, learned as the
	// pairs' (round.PairEstimates); exact reports change nothing either.
	base, _ = measureRunPolicy(t, "max_min_fairness_packed", 1, 0)
	exact, sp = measureRunPolicy(t, "max_min_fairness_packed", 1, 1e-300)
	if sp.meas.pairReports == 0 {
		t.Fatal("no colocated run reported its pair throughput")
	}
	if !sameResult(base, exact) {
		t.Errorf("exact pair measurements changed the packed run:\n%+v\n%+v", base, exact)
	}
}

func TestMeasureNoiseRefused(t *testing.T) {
	jobs, err := trace.Generate(trace.Options{Seed: 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		noise float64
		ideal bool
	}{{-0.1, false}, {math.NaN(), false}, {math.Inf(1), false}, {0.1, true}} {
		_, err := Run(&SliceSource{Jobs: jobs}, Options{Cluster: Cluster{Types: map[string]int{"v100": 2}},
			Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, MeasureNoise: c.noise, Ideal: c.ideal})
		if err == nil {
			t.Errorf("noise %v ideal %v: no error", c.noise, c.ideal)
		}
	}
}

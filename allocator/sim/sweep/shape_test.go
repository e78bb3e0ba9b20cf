package sweep

import (
	"fmt"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/sim"
)

// The shape of Gavel's results, asserted on the simulator. Each check has
// a scaled-down version here (part of `make test`) and a full-size one in
// long_test.go (`make test-long`, RONDO_LONG=1); docs/checks.md records
// both with their numbers.

// requireLong skips a full-size check unless RONDO_LONG is set.
func requireLong(t *testing.T) {
	t.Helper()
	if os.Getenv("RONDO_LONG") == "" {
		t.Skip("full-size check: set RONDO_LONG=1 (make test-long)")
	}
}

// unitPrices makes every GPU-hour cost 1: a run's cost is then the
// GPU-hours charged to jobs, where each job of a pair is charged the pair's
// GPUs, while busy time (utilization) counts those GPUs once. Their
// difference is the GPU-hours pairs ran (pairHours).
var unitPrices = map[string]float64{"v100": 1, "p100": 1, "k80": 1}

// gavelOptions is the Figure 8 setting on n GPUs of each of Gavel's three
// types, one GPU per server, 360 s rounds, measuring jobs [from, to).
func gavelOptions(n, from, to, maxActive int) sim.Options {
	return sim.Options{
		Cluster:     sim.Cluster{Types: map[string]int{"v100": n, "p100": n, "k80": n}, GPUsPerServer: 1, PricePerHourUS: unitPrices},
		Engine:      engine.Config{RoundS: 360},
		WindowStart: from, WindowEnd: to, MaxActive: maxActive,
	}
}

// maxTimeFor is `rondo simulate sweep`'s default limit: generous, a
// sustained rate finishes its window well before it.
func maxTimeFor(windowEnd int) func(float64) float64 {
	return func(rate float64) float64 { return 4*float64(windowEnd)/rate*3600 + 2000*3600 }
}

// busyHours is the GPU-hours a run's GPUs were busy, on a cluster of
// nGPUs; pairHours the GPU-hours pairs ran (see unitPrices).
func busyHours(r *sim.Result, nGPUs int) float64 {
	return r.Utilization * float64(nGPUs) * r.EndS / 3600
}
func pairHours(r *sim.Result, nGPUs int) float64 { return r.CostUSD - busyHours(r, nGPUs) }

// runsBy indexes runs by policy spec and seed (one rate per sweep here).
func runsBy(t *testing.T, runs []Run) map[string]map[int64]*Run {
	t.Helper()
	out := map[string]map[int64]*Run{}
	for i := range runs {
		r := &runs[i]
		if r.Error != "" {
			t.Fatalf("%s seed %d: %s", r.Policy, r.Seed, r.Error)
		}
		if out[r.Policy] == nil {
			out[r.Policy] = map[int64]*Run{}
		}
		out[r.Policy][r.Seed] = r
	}
	return out
}

func hours(r *Run) float64 { return r.Result.AvgJCTS / 3600 }

// checkAwareVsAgnostic: heterogeneity-aware LAS finishes every seed, has a
// lower average JCT than agnostic LAS on every seed, and agnostic's mean
// over aware's mean is at least minRatio. A seed agnostic did not finish
// (it stopped at MaxActive: the rate is not sustained) counts as lower for
// aware; at least two agnostic seeds must finish so the ratio compares
// measured JCTs.
func checkAwareVsAgnostic(t *testing.T, runs []Run, aware, agnostic string, seeds []int64, minRatio float64) {
	t.Helper()
	by := runsBy(t, runs)
	var aw, ag []float64
	line := ""
	for _, s := range seeds {
		a, g := by[aware][s], by[agnostic][s]
		if a == nil || g == nil {
			t.Fatalf("seed %d: missing run", s)
		}
		if !a.Finished() {
			t.Errorf("%s seed %d did not finish (peak %d active)", aware, s, a.Result.PeakActive)
			continue
		}
		aw = append(aw, hours(a))
		if !g.Finished() {
			line += fmt.Sprintf(" seed %d: %.2f h vs not sustained (peak %d active);", s, hours(a), g.Result.PeakActive)
			continue
		}
		ag = append(ag, hours(g))
		line += fmt.Sprintf(" seed %d: %.2f h vs %.2f h (%.2fx);", s, hours(a), hours(g), hours(g)/hours(a))
		if hours(a) >= hours(g) {
			t.Errorf("seed %d: aware LAS %.2f h, agnostic %.2f h", s, hours(a), hours(g))
		}
	}
	if len(ag) < 2 || len(aw) != len(seeds) {
		t.Fatalf("finished: aware %d, agnostic %d of %d seeds;%s", len(aw), len(ag), len(seeds), line)
	}
	ma, _ := MeanSD(aw)
	mg, _ := MeanSD(ag)
	ratio := mg / ma
	t.Logf("%s vs %s: mean %.2f h vs %.2f h, %.2fx (want >= %.2f);%s", aware, agnostic, ma, mg, ratio, minRatio, line)
	if ratio < minRatio {
		t.Errorf("agnostic/aware average JCT %.2fx (%.2f h / %.2f h), want >= %.2f", ratio, mg, ma, minRatio)
	}
}

// highLoad is Figure 8's 5.6 jobs/h point scaled down: 8+8+8 GPUs (108/24
// fewer than Gavel's cluster) at 5.6 × 24/108 = 1.244 jobs/h, the same load
// per GPU, jobs 400–799 (Gavel measures 4000–4999), 3 seeds, Rondo's default
// mechanism; run once for the tests that share it.
var highLoad struct {
	once sync.Once
	runs []Run
	err  error
}

const highLoadGPUs = 24

func highLoadRuns(t *testing.T) []Run {
	t.Helper()
	highLoad.once.Do(func() {
		highLoad.runs, highLoad.err = Execute(Config{
			Policies: []string{"max_min_fairness_perf+default", "max_min_fairness+default", "max_min_fairness_packed+default"},
			Rates:    []float64{1.244},
			Seeds:    []int64{0, 1, 2},
			Options:  gavelOptions(8, 400, 800, 2500),
		})
	})
	if highLoad.err != nil {
		t.Fatal(highLoad.err)
	}
	return highLoad.runs
}

// TestAwareBeatsAgnostic: Figure 8's headline, scaled down (highLoad). At
// full size aware LAS is 3.4–3.5x better than agnostic LAS and
// TestLongFigure8HighLoad asserts 2.5x; here the same policies measure
// 2.02x (per seed 1.77x, 1.74x, 2.42x; --gavel-compat 2.03x), not 3.5x:
// agnostic LAS past its saturation rate builds a queue whose length, and
// so its JCT, grows with the number of jobs run at the overload, and this
// window runs 5x fewer (1.5x with jobs 200–399 instead). The bound, 1.75x,
// keeps more of the measured ratio (87%) than the full-size bound does
// (2.5 of 3.46, 72%); a mechanism blind to heterogeneity gives 1.0x.
func TestAwareBeatsAgnostic(t *testing.T) {
	checkAwareVsAgnostic(t, highLoadRuns(t), "max_min_fairness_perf+default", "max_min_fairness+default", []int64{0, 1, 2}, 1.75)
}

// checkPackingHelps: packed LAS finishes every seed with a lower average
// JCT than aware LAS on every seed, its mean at most maxRatio of aware's,
// and pairs ran (pairHours > 0) while aware LAS, which offers no pairs,
// ran none (which also checks the pair-hours measure reads 0 without
// pairs). A mechanism that never runs a pair gives packed = aware: before
// the pricing fix (docs/reproduction.md) 26.53 vs 26.60 h at full size.
func checkPackingHelps(t *testing.T, runs []Run, nGPUs int, packed, aware string, seeds []int64, maxRatio float64) {
	t.Helper()
	by := runsBy(t, runs)
	var pk, aw []float64
	line := ""
	for _, s := range seeds {
		p, a := by[packed][s], by[aware][s]
		if p == nil || a == nil {
			t.Fatalf("seed %d: missing run", s)
		}
		if !p.Finished() || !a.Finished() {
			t.Fatalf("seed %d: finished packed %v, aware %v (peak active %d, %d)", s, p.Finished(), a.Finished(),
				p.Result.PeakActive, a.Result.PeakActive)
		}
		pk, aw = append(pk, hours(p)), append(aw, hours(a))
		ph, busy := pairHours(p.Result, nGPUs), busyHours(p.Result, nGPUs)
		line += fmt.Sprintf(" seed %d: %.2f h vs %.2f h (%+.0f%%), pairs ran %.0f of %.0f busy GPU-hours;",
			s, hours(p), hours(a), (hours(p)/hours(a)-1)*100, ph, busy)
		if hours(p) >= hours(a) {
			t.Errorf("seed %d: packed LAS %.2f h, aware %.2f h", s, hours(p), hours(a))
		}
		if ph < 0.01*busy {
			t.Errorf("seed %d: pairs ran %.1f GPU-hours of %.0f busy: space sharing barely used", s, ph, busy)
		}
		if ah := pairHours(a.Result, nGPUs); math.Abs(ah) > 1e-6*a.Result.CostUSD {
			t.Errorf("seed %d: aware LAS shows %.3f pair GPU-hours (cost %.1f): the measure is wrong", s, ah, a.Result.CostUSD)
		}
	}
	mp, _ := MeanSD(pk)
	ma, _ := MeanSD(aw)
	t.Logf("%s vs %s: mean %.2f h vs %.2f h (%+.1f%%, want <= %+.0f%%);%s", packed, aware, mp, ma, (mp/ma-1)*100,
		(maxRatio-1)*100, line)
	if mp > maxRatio*ma {
		t.Errorf("packed LAS %.2f h vs aware %.2f h (%+.1f%%), want <= %+.0f%%", mp, ma, (mp/ma-1)*100, (maxRatio-1)*100)
	}
}

// TestPackingHelpsAtHighLoad: space sharing pays at high load, scaled down
// (highLoad): packed LAS measures −24.9% against aware LAS here (per seed
// −22%, −18%, −32%), −30% at full size (TestLongFigure8HighLoad); both
// assert −20%, which a mechanism that never runs a pair (±0%) fails.
func TestPackingHelpsAtHighLoad(t *testing.T) {
	checkPackingHelps(t, highLoadRuns(t), highLoadGPUs, "max_min_fairness_packed+default", "max_min_fairness_perf+default",
		[]int64{0, 1, 2}, 0.8)
}

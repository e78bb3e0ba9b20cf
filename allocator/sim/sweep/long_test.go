package sweep

import (
	"math"
	"testing"
)

// Full-size checks (`make test-long`, RONDO_LONG=1): Gavel's cluster
// (36+36+36 GPUs, one per server, 360 s rounds), jobs 4000–4999 of the
// continuous single-GPU trace, seeds 0–2, as the figures in
// docs/reproduction.md. Results: docs/checks.md.

// TestLongMechanismVsIdeal is Figure 13b: Rondo's default mechanism
// against the fluid realization of the same allocations, average JCT
// within 5% on every seed and on the mean, at 2.0 and 3.0 jobs/h.
func TestLongMechanismVsIdeal(t *testing.T) {
	requireLong(t)
	seeds := []int64{0, 1, 2}
	cfg := Config{
		Policies:   []string{"max_min_fairness_perf+default", "max_min_fairness_perf+ideal"},
		Rates:      []float64{2, 3},
		Seeds:      seeds,
		Options:    gavelOptions(36, 4000, 5000, 1000),
		MaxTimeFor: maxTimeFor(5000),
	}
	runs, err := Execute(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		policy string
		rate   float64
		seed   int64
	}
	by := map[key]*Run{}
	for i := range runs {
		r := &runs[i]
		if !r.Finished() {
			t.Fatalf("%s at %g jobs/h seed %d did not finish: %s", r.Policy, r.Rate, r.Seed, r.Error)
		}
		by[key{r.Policy, r.Rate, r.Seed}] = r
	}
	for _, rate := range cfg.Rates {
		var m, id []float64
		for _, s := range seeds {
			mech, ideal := hours(by[key{cfg.Policies[0], rate, s}]), hours(by[key{cfg.Policies[1], rate, s}])
			m, id = append(m, mech), append(id, ideal)
			d := mech/ideal - 1
			t.Logf("%g jobs/h seed %d: mechanism %.2f h, ideal %.2f h (%+.1f%%)", rate, s, mech, ideal, d*100)
			if math.Abs(d) > 0.05 {
				t.Errorf("%g jobs/h seed %d: mechanism %.2f h vs ideal %.2f h (%+.1f%%), want within 5%%", rate, s, mech, ideal, d*100)
			}
		}
		mm, _ := MeanSD(m)
		mi, _ := MeanSD(id)
		d := mm/mi - 1
		t.Logf("%g jobs/h: mechanism %.2f h, ideal %.2f h (%+.1f%%)", rate, mm, mi, d*100)
		if math.Abs(d) > 0.05 {
			t.Errorf("%g jobs/h: mechanism %.2f h vs ideal %.2f h (%+.1f%%), want within 5%%", rate, mm, mi, d*100)
		}
	}
}

// TestLongFigure8HighLoad is Figure 8's 5.6 jobs/h point with both
// mechanisms: aware LAS's average JCT at least 2.5x lower than agnostic
// LAS's (measured 3.4–3.5x), and packed LAS's at least 20% lower than aware
// LAS's with pairs running (measured −30%). `--max-active 2500` as
// `rondo simulate sweep` (agnostic LAS peaks near 1,200 active jobs).
func TestLongFigure8HighLoad(t *testing.T) {
	requireLong(t)
	seeds := []int64{0, 1, 2}
	var policies []string
	for _, m := range []string{"default", "compat"} {
		for _, p := range []string{"max_min_fairness_perf", "max_min_fairness", "max_min_fairness_packed"} {
			policies = append(policies, p+"+"+m)
		}
	}
	runs, err := Execute(Config{
		Policies:   policies,
		Rates:      []float64{5.6},
		Seeds:      seeds,
		Options:    gavelOptions(36, 4000, 5000, 2500),
		MaxTimeFor: maxTimeFor(5000),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"default", "compat"} {
		t.Run("AwareVsAgnostic/"+m, func(t *testing.T) {
			checkAwareVsAgnostic(t, runs, "max_min_fairness_perf+"+m, "max_min_fairness+"+m, seeds, 2.5)
		})
		t.Run("PackedVsAware/"+m, func(t *testing.T) {
			checkPackingHelps(t, runs, 108, "max_min_fairness_packed+"+m, "max_min_fairness_perf+"+m, seeds, 0.8)
		})
	}
}

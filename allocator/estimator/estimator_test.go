package estimator

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
	"gonum.org/v1/gonum/mat"
)

var fullTable = flag.Bool("estimator.table", false, "print the full leave-one-out table (docs/estimator.md)")

func TestOnlineConverges(t *testing.T) {
	tab := throughputs.Default()
	models := map[string]throughputs.Key{"j1": {Model: "ResNet-18 (batch size 64)", ScaleFactor: 1}}
	o := NewOnline(0.2, TablePrior(tab, func(job string) (throughputs.Key, bool) { k, ok := models[job]; return k, ok }))

	prior, _ := tab.Isolated(models["j1"], "v100")
	if v, ok := o.Isolated("j1", "v100"); !ok || v != prior {
		t.Fatalf("prior: got %v %v, want %v", v, ok, prior)
	}
	if _, ok := o.Isolated("unknown", "v100"); ok {
		t.Fatal("unknown job has an estimate")
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const truth = 17.5
	for i := 0; i < 200; i++ {
		o.Observe("j1", "v100", truth*(1+0.05*(rng.Float64()*2-1)))
	}
	o.Observe("j1", "v100", math.NaN())
	o.Observe("j1", "v100", -1)
	if v, _ := o.Isolated("j1", "v100"); math.Abs(v-truth)/truth > 0.03 {
		t.Fatalf("estimate %v, want ≈ %v", v, truth)
	}
	if n := o.Samples("j1", "v100"); n != 200 {
		t.Fatalf("samples %d, want 200", n)
	}
	// the mean follows a change in the reported rate
	for i := 0; i < 50; i++ {
		o.Observe("j1", "v100", 10)
	}
	if v, _ := o.Isolated("j1", "v100"); math.Abs(v-10) > 1e-3 {
		t.Fatalf("after the change: %v, want 10", v)
	}
	// the first samples are averaged evenly
	o.Observe("j2", "k80", 1)
	o.Observe("j2", "k80", 3)
	if v, _ := o.Isolated("j2", "k80"); v != 2 {
		t.Fatalf("mean of two samples %v, want 2", v)
	}
	o.Observe("j2", "a100", 5)
	if got := o.Types("j2"); !slices.Equal(got, []string{"a100", "k80"}) {
		t.Fatalf("types %v, want [a100 k80]", got)
	}
	o.Forget("j2")
	if _, ok := o.Isolated("j2", "k80"); ok {
		t.Fatal("forgotten job still has an estimate")
	}
	if got := o.Types("j2"); len(got) != 0 || o.Samples("j2", "a100") != 0 {
		t.Fatalf("forgotten job still measured on %v", got)
	}
	if o.Samples("j1", "v100") != 250 {
		t.Fatal("forgetting j2 lost j1's samples")
	}
}

func TestCompleteSyntheticLowRank(t *testing.T) {
	const m, n, r = 30, 30, 2
	rng := rand.New(rand.NewPCG(42, 1))
	U := mat.NewDense(m, r, nil)
	V := mat.NewDense(n, r, nil)
	for i := 0; i < m; i++ {
		for k := 0; k < r; k++ {
			U.Set(i, k, rng.NormFloat64())
		}
	}
	for j := 0; j < n; j++ {
		for k := 0; k < r; k++ {
			V.Set(j, k, rng.NormFloat64())
		}
	}
	var x mat.Dense
	x.Mul(U, V.T())
	mask := make([][]bool, m)
	var hidden int
	for i := range mask {
		mask[i] = make([]bool, n)
		for j := range mask[i] {
			mask[i][j] = rng.Float64() < 0.5
			if !mask[i][j] {
				hidden++
			}
		}
	}
	fit, err := Complete(&x, mask, Options{Rank: r, Lambda: 1e-3, Iters: 300, NoBias: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var rms, scale float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if !mask[i][j] {
				d := fit.At(i, j) - x.At(i, j)
				rms += d * d
				scale += x.At(i, j) * x.At(i, j)
			}
		}
	}
	rel := math.Sqrt(rms / scale)
	if rel > 0.01 {
		t.Fatalf("relative RMS error on hidden entries %.4f, want < 0.01", rel)
	}
	// deterministic for a seed
	fit2, _ := Complete(&x, mask, Options{Rank: r, Lambda: 1e-3, Iters: 300, NoBias: true, Seed: 3})
	if !mat.Equal(fit, fit2) {
		t.Fatal("completion is not deterministic")
	}
}

func TestReferenceMatrix(t *testing.T) {
	ref, err := NewReference(throughputs.Default(), "v100")
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Keys) != 26 {
		t.Fatalf("%d reference job types, want 26", len(ref.Keys))
	}
	a := ref.Index(throughputs.Key{Model: "ResNet-50 (batch size 128)", ScaleFactor: 1})
	if a < 0 || ref.Feasible[a][0] || !math.IsNaN(ref.Norm[a][0]) {
		t.Fatal("ResNet-50 (batch size 128) with A3C is measured [0, 0] and must be infeasible")
	}
	// a profiled job identical to a reference job is matched to it
	q := ref.Index(throughputs.Key{Model: "LM (batch size 20)", ScaleFactor: 1})
	var ms []Measurement
	for _, j := range []int{0, 5, 12, 20} {
		if ref.Feasible[q][j] {
			ms = append(ms, Measurement{Ref: j, New: ref.Norm[q][j], Other: ref.Norm[j][q]})
		}
	}
	est, err := ref.Estimate(ms, DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if a, b, ok := est.Pair(m.Ref); !ok || a != m.New || b != m.Other {
			t.Fatalf("profiled pair %d not returned as measured", m.Ref)
		}
	}
	if len(est.Row) != 26 || est.Nearest < 0 {
		t.Fatalf("estimate: %d entries, nearest %d", len(est.Row), est.Nearest)
	}
}

// TestLeaveOneOutBeatsNaive: on Gavel's data, the completed estimate's
// error is below the naive baseline's (mean of the profiled entries) for
// every GPU type.
func TestLeaveOneOutBeatsNaive(t *testing.T) {
	tab := throughputs.Default()
	ks, trials := []int{3}, 1
	if *fullTable {
		ks, trials = []int{3, 5}, 5
	}
	var rs []LOOResult
	for _, typ := range []string{"v100", "p100", "k80"} {
		for _, k := range ks {
			r, err := LeaveOneOut(tab, typ, k, trials, 1, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
			if r.Completion.MAE >= r.Naive.MAE || r.Completion.MRE >= r.Naive.MRE {
				t.Errorf("%s k=%d: completion %+v not below naive %+v", typ, k, r.Completion, r.Naive)
			}
		}
	}
	t.Log("\n" + Table(rs))
}

var sweep = flag.Bool("estimator.sweep", false, "print the rank/λ ablation (docs/estimator.md)")

// TestRankSweep prints completion error for several ranks and ridge
// penalties (k = 3, 2 trials); only with -estimator.sweep.
func TestRankSweep(t *testing.T) {
	if !*sweep {
		t.Skip("run with -args -estimator.sweep")
	}
	t.Log("\n| rank | λ | v100 MAE / MRE | p100 MAE / MRE | k80 MAE / MRE |\n|---|---|---|---|---|")
	for _, rk := range []int{0, 1, 2, 3, 5} {
		for _, l := range []float64{0.01, 0.1, 1} {
			s := fmt.Sprintf("| %d | %g |", rk, l)
			for _, typ := range []string{"v100", "p100", "k80"} {
				o := DefaultOptions
				o.Rank, o.Lambda = rk, l
				r, err := LeaveOneOut(throughputs.Default(), typ, 3, 2, 1, o)
				if err != nil {
					t.Fatal(err)
				}
				s += fmt.Sprintf(" %.3f / %.1f%% |", r.Completion.MAE, 100*r.Completion.MRE)
			}
			t.Log(s)
		}
	}
}

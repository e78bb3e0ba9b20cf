package policies

import (
	"math"
	"math/rand"
	"os"
	"testing"
)

func readProblem(t *testing.T, path string) *Problem {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ReadProblem(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Gavel §3.1's worked example: 1 V100 + 1 K80, throughputs [[4,1],[3,1],[2,1]].
func TestLASWorkedExample(t *testing.T) {
	p := readProblem(t, "testdata/worked_example.json")
	a, err := Solve("max_min_fairness_perf", p)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{0.45, 0}, {0.45, 0.09}, {0.09, 0.91}} // (v100, k80)
	vi, ki := indexOf(a.Types, "v100"), indexOf(a.Types, "k80")
	for m := range want {
		if math.Abs(a.X[m][vi]-want[m][0]) > 0.01 || math.Abs(a.X[m][ki]-want[m][1]) > 0.01 {
			t.Errorf("job %d: got v100=%.3f k80=%.3f, want %v", m, a.X[m][vi], a.X[m][ki], want[m])
		}
	}
	iso, err := Solve("isolated", p)
	if err != nil {
		t.Fatal(err)
	}
	// ~10% more total throughput than the isolated 1/n split.
	var got, base float64
	for m := range a.Effective {
		got += a.Effective[m]
		base += iso.Effective[m]
	}
	if gain := got/base - 1; gain < 0.08 || gain > 0.12 {
		t.Errorf("throughput gain over isolated = %.3f, want about 0.10", gain)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The decomposition reaches the LP optimum (Clp) on random instances.
func TestLASDecompositionMatchesLP(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 30; trial++ {
		n := 5 + rng.Intn(120)
		p := randomProblem(rng, n, 3+rng.Intn(n))
		in := newInstance(p)
		mm := lasProblem(in, in.tput)
		dec, err := mm.solve()
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := mm.solveLP(nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(dec.t-ref.t) > 1e-6*math.Max(1, ref.t) {
			t.Fatalf("trial %d (n=%d): decomposition t=%.9g, LP t=%.9g", trial, n, dec.t, ref.t)
		}
		checkGPUTimeFeasible(t, mm, dec.r, dec.t)
	}
}

// checkGPUTimeFeasible checks every constraint of a maxMin solution to 1e-6.
func checkGPUTimeFeasible(t *testing.T, p *maxMin, r [][]float64, level float64) {
	t.Helper()
	const tol = 1e-6
	use := make([]float64, len(p.capacity))
	for m := range r {
		sum, lv := 0.0, 0.0
		for j, v := range r[m] {
			if v < -tol {
				t.Fatalf("job %d type %d: negative GPU time %g", m, j, v)
			}
			sum += v
			use[j] += v
			lv += p.e[m][j] * v
		}
		if sum > p.cap[m]+tol {
			t.Fatalf("job %d: GPU time %g over its cap %g", m, sum, p.cap[m])
		}
		if need := p.levelOf(m, level); lv < need-tol*math.Max(1, need) {
			t.Fatalf("job %d: level %g below demanded %g", m, lv, need)
		}
	}
	for j := range use {
		if use[j] > p.capacity[j]+tol {
			t.Fatalf("type %d: uses %g of %g GPUs", j, use[j], p.capacity[j])
		}
	}
}

// Placement sensitivity: a job wider than a type's servers runs at its
// unconsolidated throughput there, which steers it to a type where it fits.
func TestPlacementSensitivity(t *testing.T) {
	p := &Problem{GPUTypes: map[string]GPUType{
		"v100": {Count: 8, GPUsPerServer: 4},
		"p100": {Count: 8, GPUsPerServer: 8},
	}, Jobs: []Job{{ID: "wide", ScaleFactor: 8,
		Throughput:               map[string]float64{"v100": 10, "p100": 6},
		UnconsolidatedThroughput: map[string]float64{"v100": 4, "p100": 3}}}}
	a, err := Solve("max_throughput", p)
	if err != nil {
		t.Fatal(err)
	}
	if pi := indexOf(a.Types, "p100"); a.X[0][pi] < 0.999 || math.Abs(a.Effective[0]-6) > 1e-6 {
		t.Fatalf("want the job consolidated on p100 at 6 steps/s, got X=%v eff=%v", a.X[0], a.Effective[0])
	}
	p.GPUTypes["v100"] = GPUType{Count: 8, GPUsPerServer: 8}
	a, err = Solve("max_throughput", p)
	if err != nil {
		t.Fatal(err)
	}
	if vi := indexOf(a.Types, "v100"); a.X[0][vi] < 0.999 {
		t.Fatalf("with 8-GPU V100 servers the job should run on v100, got %v", a.X[0])
	}
}

// A hint from the previous round's solve warm-starts the next one: same
// optimum, fewer decomposition passes.
func TestSolveWithHint(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	p := randomProblem(rng, 400, 50)
	_, hint, err := SolveWithHint("las", p, nil)
	if err != nil || hint == nil {
		t.Fatalf("err %v hint %v", err, hint)
	}
	// Next round: two jobs left, one arrived.
	next := *p
	next.Jobs = append(append([]Job(nil), p.Jobs[2:]...), randomProblem(rng, 1, 50).Jobs[0])
	next.Jobs[len(next.Jobs)-1].ID = "new"
	cold, err := Solve("las", &next)
	if err != nil {
		t.Fatal(err)
	}
	warm, _, err := SolveWithHint("las", &next, hint)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(cold.Objective-warm.Objective) > 1e-8*cold.Objective {
		t.Fatalf("warm objective %.12g, cold %.12g", warm.Objective, cold.Objective)
	}
	in := newInstance(&next)
	mm := lasProblem(in, in.tput)
	coldRes, _ := mm.solve()
	mm.seedPrices = hint.prices
	warmRes, _ := mm.solve()
	if warmRes.passes >= coldRes.passes {
		t.Fatalf("warm start took %d passes, cold %d", warmRes.passes, coldRes.passes)
	}
	t.Logf("passes: cold %d, warm %d", coldRes.passes, warmRes.passes)
	// A hint for another policy is ignored, not misapplied.
	if _, _, err := SolveWithHint("makespan", &next, hint); err != nil {
		t.Fatal(err)
	}
}

// Space sharing must actually be used when it helps: two jobs, one GPU,
// each keeps 80% of its speed when they share. Alone they split the GPU
// (0.5 each); packed they both run all the time at 0.8.
func TestPackingHelps(t *testing.T) {
	p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 1}},
		Jobs:  []Job{{ID: "a", Throughput: map[string]float64{"v100": 10}, ScaleFactor: 1, RemainingSteps: 1000}, {ID: "b", Throughput: map[string]float64{"v100": 4}, ScaleFactor: 1, RemainingSteps: 1000}},
		Pairs: []Pair{{Jobs: [2]string{"a", "b"}, Throughput: map[string][2]float64{"v100": {8, 3.2}}}}}
	alone, err := Solve("max_min_fairness_perf", p)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := Solve("max_min_fairness_packed", p)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(packed.Objective/alone.Objective-1.6) > 1e-6 {
		t.Fatalf("packed objective %g, unpacked %g: want 1.6x", packed.Objective, alone.Objective)
	}
	if math.Abs(packed.PairX[0][0]-1) > 1e-6 || math.Abs(packed.Effective[0]-8) > 1e-6 {
		t.Fatalf("pair share %v, effective %v", packed.PairX, packed.Effective)
	}
	for _, name := range []string{"finish_time_fairness_packed", "max_min_fairness_water_filling_packed"} {
		a, err := Solve(name, p)
		if err != nil {
			t.Fatal(err)
		}
		if a.PairX[0][0] < 0.99 {
			t.Errorf("%s does not use the pair: %v", name, a.PairX)
		}
	}
	// Makespan mixes: b alone is faster for b, the pair is better overall.
	mk, err := Solve("min_total_duration_packed", p)
	if err != nil {
		t.Fatal(err)
	}
	mkAlone, err := Solve("min_total_duration_perf", p)
	if err != nil {
		t.Fatal(err)
	}
	if mk.PairX[0][0] < 0.1 || mk.Objective >= mkAlone.Objective {
		t.Errorf("makespan packed %g (pair %v) vs alone %g", mk.Objective, mk.PairX, mkAlone.Objective)
	}
}

// The incremental restricted LP (kept in Clp, columns added, re-solved from
// the last basis) reaches the optimum of the full LP (every pair column from
// the start, one pass), cold and when started from an earlier solve's pair
// columns, as the engine's warm start does through a Hint.
func TestPackedIncrementalMatchesCold(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 12; trial++ {
		n := 10 + rng.Intn(60)
		p := randomProblem(rng, n, 2+rng.Intn(n/2))
		addPairs(rng, p, n)
		in := newInstance(p)
		mm := lasProblem(in, in.tput)
		share := make([]float64, n)
		for m := range share {
			share[m] = in.equalShareThroughput(m)
		}
		pairs := pairRatesFor(in, func(m int) float64 { return share[m] })
		if pairs == nil {
			continue
		}
		ref, _, err := mm.solveLPFrom(pairs, allPairCols(mm, pairs))
		if err != nil {
			t.Fatal(err)
		}
		got, pr, err := mm.solveLPFrom(pairs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.t-ref.t) > 1e-7*math.Max(1, ref.t) {
			t.Fatalf("trial %d (n=%d): incremental t=%.10g, cold t=%.10g", trial, n, got.t, ref.t)
		}
		// Warm: seeded with the pair columns that had a share, on the
		// problem with a few jobs gone (their pairs drop out).
		var seed [][2]int
		for q := range pr {
			for j, v := range pr[q] {
				if v > 0 {
					seed = append(seed, [2]int{q, j})
				}
			}
		}
		if len(seed) == 0 {
			t.Fatalf("trial %d: no pair used", trial)
		}
		warm, _, err := mm.solveLPFrom(pairs, seed)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(warm.t-ref.t) > 1e-7*math.Max(1, ref.t) {
			t.Fatalf("trial %d (n=%d): seeded t=%.10g, cold t=%.10g", trial, n, warm.t, ref.t)
		}
		// Through the public API: a hint from the full problem, then the
		// problem without its first three jobs.
		_, h, err := SolveWithHint("max_min_fairness_packed", p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h == nil || len(h.pairs) == 0 {
			t.Fatalf("trial %d: packed solve left no pair columns in its hint", trial)
		}
		q := *p
		q.Jobs = p.Jobs[3:]
		q.Pairs = nil
		for _, pp := range p.Pairs {
			if pp.Jobs[0] != "j0" && pp.Jobs[0] != "j1" && pp.Jobs[0] != "j2" {
				q.Pairs = append(q.Pairs, pp)
			}
		}
		hinted, _, err := SolveWithHint("max_min_fairness_packed", &q, h)
		if err != nil {
			t.Fatal(err)
		}
		cold, err := Solve("max_min_fairness_packed", &q)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(hinted.Objective-cold.Objective) > 1e-7*math.Max(1, cold.Objective) {
			t.Fatalf("trial %d: hinted objective %.10g, cold %.10g", trial, hinted.Objective, cold.Objective)
		}
		qin := newInstance(&q)
		qin.seedPairs = h.pairs
		if len(seedPairCols(qin)) == 0 {
			t.Fatalf("trial %d: none of the hint's %d pair columns mapped onto the smaller problem", trial, len(h.pairs))
		}
		qmm := lasProblem(qin, qin.tput)
		qshare := make([]float64, qin.n())
		for m := range qshare {
			qshare[m] = qin.equalShareThroughput(m)
		}
		qpairs := pairRatesFor(qin, func(m int) float64 { return qshare[m] })
		qref, _, err := qmm.solveLPFrom(qpairs, allPairCols(qmm, qpairs))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(hinted.Objective-qref.t) > 1e-7*math.Max(1, qref.t) {
			t.Fatalf("trial %d: hinted objective %.10g, cold reference LP %.10g", trial, hinted.Objective, qref.t)
		}
	}
}

// allPairCols is every usable (pair, type) column: the restricted LP seeded
// with all of them is the full LP, solved in one pass without column
// generation — the reference for the incremental, column-adding solve.
func allPairCols(p *maxMin, pairs *pairRates) [][2]int {
	var cols [][2]int
	for q := range pairs.a {
		for j := range p.capacity {
			if p.capacity[j] > 0 && (pairs.rateA[q][j] > 0 || pairs.rateB[q][j] > 0) {
				cols = append(cols, [2]int{q, j})
			}
		}
	}
	return cols
}

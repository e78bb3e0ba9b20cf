package policies

import (
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/policies/names"
)

// Gavel's water-filling example: 4 identical jobs on 4 identical GPUs with
// weights 3,1,1,1. The first iteration caps job 1 at a whole GPU and the
// others at 1/3; the final allocation gives every job a whole GPU.
func TestWaterFillingPaperExample(t *testing.T) {
	p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 4}}}
	for i, w := range []float64{3, 1, 1, 1} {
		p.Jobs = append(p.Jobs, Job{ID: string(rune('a' + i)), Throughput: map[string]float64{"v100": 1}, ScaleFactor: 1, Weight: w})
	}
	var first [][]float64
	var firstFrozen []int
	waterFillTrace = func(iter int, r [][]float64, frozen []int) {
		if iter == 0 {
			first, firstFrozen = r, frozen
		}
	}
	defer func() { waterFillTrace = nil }()
	a, err := Solve("max_min_fairness_water_filling_perf", p)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1.0 / 3, 1.0 / 3, 1.0 / 3}
	for m, w := range want {
		if math.Abs(first[m][0]-w) > 1e-6 {
			t.Errorf("iteration 1, job %d: %.4f GPUs, want %.4f", m, first[m][0], w)
		}
	}
	if len(firstFrozen) != 1 || firstFrozen[0] != 0 {
		t.Errorf("iteration 1 froze %v, want [0]", firstFrozen)
	}
	for m := range want {
		if math.Abs(a.X[m][0]-1) > 1e-6 {
			t.Errorf("final job %d: X=%.4f, want 1", m, a.X[m][0])
		}
	}
}

// Every policy's answer satisfies every constraint, on random instances.
func TestAllPoliciesFeasible(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 6; trial++ {
		n := 4 + rng.Intn(40)
		p := randomProblem(rng, n, 2+rng.Intn(n))
		addPairs(rng, p, 12)
		p.Entities = map[string]Entity{"e0": {Weight: 1, Policy: "fairness"}, "e1": {Weight: 2, Policy: "fifo"}, "e2": {Weight: 1}}
		for _, name := range Names() {
			a, err := Solve(name, p)
			if err != nil {
				t.Fatalf("trial %d, %s: %v", trial, name, err)
			}
			checkFeasible(t, name, p, a)
		}
	}
}

func checkFeasible(t *testing.T, name string, p *Problem, a *Allocation) {
	t.Helper()
	const tol = 1e-6
	in := newInstance(p)
	rows := make([]float64, in.n())
	use := make([]float64, in.k())
	for m := range a.X {
		for j, x := range a.X[m] {
			if x < -tol || x > 1+tol || math.IsNaN(x) {
				t.Fatalf("%s: X[%d][%d] = %g", name, m, j, x)
			}
			if x > tol && in.tput[m][j] == 0 {
				t.Fatalf("%s: job %d on type %s where it cannot run", name, m, in.types[j])
			}
			rows[m] += x
			use[j] += x * in.sf[m]
		}
	}
	for q := range a.PairX {
		for j, x := range a.PairX[q] {
			if x < -tol || x > 1+tol {
				t.Fatalf("%s: pair X[%d][%d] = %g", name, q, j, x)
			}
			rows[in.pairA[q]] += x
			rows[in.pairB[q]] += x
			use[j] += x * in.sf[in.pairA[q]]
		}
	}
	for m, r := range rows {
		if r > 1+tol {
			t.Fatalf("%s: job %d gets %g of its time", name, m, r)
		}
	}
	for j, u := range use {
		if u > in.counts[j]+tol {
			t.Fatalf("%s: type %s uses %g of %g GPUs", name, in.types[j], u, in.counts[j])
		}
	}
}

// Sharing incentive: LAS is never worse than the isolated split; space
// sharing never worse than without it.
func TestSharingIncentiveAndColocation(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 15; trial++ {
		n := 3 + rng.Intn(30)
		p := randomProblem(rng, n, 2+rng.Intn(n))
		addPairs(rng, p, n)
		las, err := Solve("max_min_fairness_perf", p)
		if err != nil {
			t.Fatal(err)
		}
		iso, err := Solve("isolated", p)
		if err != nil {
			t.Fatal(err)
		}
		if las.Objective < iso.Objective-1e-7 {
			t.Fatalf("trial %d: LAS objective %g below isolated %g", trial, las.Objective, iso.Objective)
		}
		packed, err := Solve("max_min_fairness_packed", p)
		if err != nil {
			t.Fatal(err)
		}
		if packed.Objective < las.Objective-1e-7*math.Max(1, las.Objective) {
			t.Fatalf("trial %d: packed objective %g below unpacked %g", trial, packed.Objective, las.Objective)
		}
	}
}

// After water-filling no job can gain without another losing.
func TestWaterFillingParetoEfficient(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for trial := 0; trial < 10; trial++ {
		n := 3 + rng.Intn(25)
		p := randomProblem(rng, n, 2+rng.Intn(2*n))
		a, err := Solve("max_min_fairness_water_filling_perf", p)
		if err != nil {
			t.Fatal(err)
		}
		in := newInstance(p)
		mm := lasProblem(in, in.tput)
		r := make([][]float64, n)
		levels := make([]float64, n)
		var all []int
		for m := 0; m < n; m++ {
			r[m] = make([]float64, in.k())
			for j := range r[m] {
				r[m][j] = a.X[m][j] * in.sf[m]
				levels[m] += mm.e[m][j] * r[m][j]
			}
			if mm.w[m] > 0 {
				all = append(all, m)
			}
		}
		// Shave a relative 1e-12 off the levels so rounding cannot make a
		// point look infeasible (far below what counts as a rise).
		for m := range levels {
			levels[m] *= 1 - 1e-12
		}
		stuck, err := bottlenecked(mm, levels, all, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(stuck) != len(all) {
			t.Fatalf("trial %d: %d of %d jobs could still rise", trial, len(all)-len(stuck), len(all))
		}
	}
}

// On one GPU type the aware and agnostic LAS give the same allocation.
func TestHomogeneousAwareEqualsAgnostic(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for trial := 0; trial < 10; trial++ {
		n := 2 + rng.Intn(40)
		p := randomProblem(rng, n, 2+rng.Intn(n))
		p.GPUTypes = map[string]GPUType{"v100": {Count: 1 + rng.Intn(n)}}
		for i := range p.Jobs {
			p.Jobs[i].Throughput = map[string]float64{"v100": p.Jobs[i].Throughput["v100"]}
		}
		for _, pair := range [][2]string{{"max_min_fairness_perf", "max_min_fairness"},
			{"max_min_fairness_water_filling_perf", "max_min_fairness_water_filling"}} {
			aw, err := Solve(pair[0], p)
			if err != nil {
				t.Fatal(err)
			}
			ag, err := Solve(pair[1], p)
			if err != nil {
				t.Fatal(err)
			}
			for m := range aw.X {
				if math.Abs(aw.X[m][0]-ag.X[m][0]) > 1e-6 {
					t.Fatalf("trial %d %s: job %d aware %g agnostic %g", trial, pair[0], m, aw.X[m][0], ag.X[m][0])
				}
			}
		}
	}
}

func TestInvalidInput(t *testing.T) {
	cases := map[string]string{
		"negative throughput": `{"gpu_types":{"v100":{"count":1}},"jobs":[{"id":"a","throughput":{"v100":-1},"scale_factor":1}]}`,
		"zero GPUs":           `{"gpu_types":{"v100":{"count":0}},"jobs":[{"id":"a","throughput":{"v100":1},"scale_factor":1}]}`,
		"unknown type":        `{"gpu_types":{"v100":{"count":1}},"jobs":[{"id":"a","throughput":{"h100":1},"scale_factor":1}]}`,
		"duplicate id":        `{"gpu_types":{"v100":{"count":1}},"jobs":[{"id":"a","throughput":{"v100":1},"scale_factor":1},{"id":"a","throughput":{"v100":1},"scale_factor":1}]}`,
		"unknown field":       `{"gpu_types":{"v100":{"count":1}},"jobz":[]}`,
		"not json":            `{"gpu_types":`,
	}
	for name, js := range cases {
		if _, err := ReadProblem(strings.NewReader(js)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// NaN cannot be written in JSON; check Validate directly.
	p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 1}}, Jobs: []Job{{ID: "a", Throughput: map[string]float64{"v100": math.NaN()}, ScaleFactor: 1}}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "throughput.v100") {
		t.Errorf("NaN throughput: %v", err)
	}
	ok := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 1}}, Jobs: []Job{{ID: "a", Throughput: map[string]float64{"v100": 1}, ScaleFactor: 1}}}
	if _, err := Solve("no_such_policy", ok); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("unknown policy: %v", err)
	}
}

// The JSON output follows the CLI contract.
func TestAllocationJSON(t *testing.T) {
	p := readProblem(t, "testdata/worked_example.json")
	a, err := Solve("las", p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Policy     string                        `json:"policy"`
		Objective  float64                       `json:"objective"`
		Allocation map[string]map[string]float64 `json:"allocation"`
		Effective  map[string]float64            `json:"effective_throughput"`
		SolveMS    *float64                      `json:"solve_ms"`
		Pairs      []map[string]any              `json:"pair_allocation"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Policy != "max_min_fairness_perf" || len(out.Allocation) != 3 || out.SolveMS == nil || out.Pairs == nil {
		t.Fatalf("bad output: %s", b)
	}
	if math.Abs(out.Allocation["j1"]["v100"]-0.4545) > 0.01 || math.Abs(out.Effective["j1"]-1.818) > 0.01 {
		t.Fatalf("bad values: %s", b)
	}
}

// Gandiva pairs jobs only when more GPUs are requested than exist, each job
// at most once, and only pairs that do not lose throughput.
func TestGandivaPairsOnlyWhenOversubscribed(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for trial := 0; trial < 10; trial++ {
		n := 6 + rng.Intn(30)
		gpus := 3 + rng.Intn(2*n)
		p := randomProblem(rng, n, gpus)
		addPairs(rng, p, n)
		// Half the pairs gain throughput.
		for i := range p.Pairs {
			if i%2 == 0 {
				for ty, v := range p.Pairs[i].Throughput {
					p.Pairs[i].Throughput[ty] = [2]float64{v[0] * 2, v[1] * 2}
				}
			}
		}
		a, err := Solve("gandiva", p)
		if err != nil {
			t.Fatal(err)
		}
		in := newInstance(p)
		requested, total := 0.0, 0.0
		for m := range in.sf {
			requested += in.sf[m]
		}
		for _, c := range in.counts {
			total += c
		}
		inPairs := map[string]int{}
		used := 0
		for q, row := range a.PairX {
			share := 0.0
			for _, v := range row {
				share += v
			}
			if share == 0 {
				continue
			}
			used++
			inPairs[a.PairJobs[q][0]]++
			inPairs[a.PairJobs[q][1]]++
			ratio := 0.0
			for j := range in.types {
				pa, pb := in.pairA[q], in.pairB[q]
				if in.tput[pa][j] > 0 && in.tput[pb][j] > 0 {
					ratio += in.pairT[q][j][0]/in.tput[pa][j] + in.pairT[q][j][1]/in.tput[pb][j]
				}
			}
			if ratio < 1 {
				t.Fatalf("trial %d: pair %v with throughput ratio %g < 1", trial, a.PairJobs[q], ratio)
			}
		}
		for id, c := range inPairs {
			if c > 1 {
				t.Fatalf("trial %d: job %s in %d pairs", trial, id, c)
			}
		}
		if requested <= total && used > 0 {
			t.Fatalf("trial %d: %d pairs used with %g GPUs requested of %g", trial, used, requested, total)
		}
		if requested > 2*total && used == 0 {
			t.Fatalf("trial %d: no pair used with %g GPUs requested of %g", trial, requested, total)
		}
	}
}

// TestRegistryMatchesNames: every name of the pure-Go registry that hcl
// checks against has a solver, and every solver has a name there.
func TestRegistryMatchesNames(t *testing.T) {
	if len(registry) != len(names.Names()) {
		t.Errorf("%d solvers, %d names", len(registry), len(names.Names()))
	}
	for _, n := range names.Names() {
		if registry[n] == nil {
			t.Errorf("policy %q has a name but no solver", n)
		}
	}
}

// TestScaleFactorBelowOne: a job with scale_factor 0 (or missing, or
// negative) is refused, naming the job and the field; it used to get one GPU.
func TestScaleFactorBelowOne(t *testing.T) {
	// Absent, the field is 1, as it always was.
	if p, err := ReadProblem(strings.NewReader(`{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","throughput":{"v100":1}}]}`)); err != nil || p.Jobs[0].ScaleFactor != 1 {
		t.Errorf("no scale_factor: %v, %v", p, err)
	}
	if _, err := ReadProblem(strings.NewReader(`{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","throughput":{"v100":1},"bogus":1}]}`)); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown job field: %v", err)
	}
	for _, c := range []struct{ js, want string }{
		{`{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","throughput":{"v100":1},"scale_factor":1},{"id":"b","throughput":{"v100":1},"scale_factor":0}]}`,
			"jobs[1] (b).scale_factor: must be at least 1, got 0"},
		{`{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","throughput":{"v100":1},"scale_factor":0}]}`,
			"jobs[0] (a).scale_factor: must be at least 1, got 0"},
		{`{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","throughput":{"v100":1},"scale_factor":-2}]}`,
			"jobs[0] (a).scale_factor: must be at least 1, got -2"},
	} {
		if _, err := ReadProblem(strings.NewReader(c.js)); err == nil || err.Error() != c.want {
			t.Errorf("ReadProblem: %v, want %q", err, c.want)
		}
		var p Problem
		if err := json.Unmarshal([]byte(c.js), &p); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"max_min_fairness_perf", "fifo", "isolated"} {
			if a, err := Solve(name, &p); err == nil || err.Error() != c.want {
				t.Errorf("Solve(%s) = %v, %v; want error %q", name, a, err, c.want)
			}
		}
	}
}

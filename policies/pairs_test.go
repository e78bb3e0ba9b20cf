package policies

import (
	"maps"
	"math"
	"math/rand"
	"reflect"
	"testing"
)

// Bad pairs are reported at the first pair that has the problem, also when
// pairs share one throughput map (validated once) or share a first job
// (looked up once).
func TestInvalidPairs(t *testing.T) {
	good := map[string][2]float64{"v100": {1, 1}}
	unknownType := map[string][2]float64{"v100": {1, 1}, "h100": {1, 1}}
	negative := map[string][2]float64{"v100": {1, -1}}
	nan := map[string][2]float64{"v100": {math.NaN(), 1}}
	jobs := []Job{}
	for _, id := range []string{"a", "b", "c"} {
		jobs = append(jobs, Job{ID: id, Throughput: map[string]float64{"v100": 1}, ScaleFactor: 1})
	}
	cases := []struct {
		name  string
		pairs []Pair
		want  string
	}{
		{"unknown second job after a shared first", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"a", "z"}, good}},
			`pairs[1].jobs: unknown job "z"`},
		{"unknown first job", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"z", "b"}, good}},
			`pairs[1].jobs: unknown job "z"`},
		{"unknown first job in the first pair", []Pair{{[2]string{"", "b"}, good}},
			`pairs[0].jobs: unknown job ""`},
		{"itself", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"c", "c"}, good}},
			"pairs[1].jobs: a job cannot pair with itself"},
		{"unknown type after a shared good map", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"a", "c"}, good}, {[2]string{"b", "c"}, unknownType}},
			"pairs[2].throughput.h100: unknown GPU type"},
		{"bad map shared: the first pair reports", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"a", "c"}, negative}, {[2]string{"b", "c"}, negative}},
			"pairs[1].throughput.v100: must be non-negative numbers"},
		{"NaN", []Pair{{[2]string{"a", "b"}, good}, {[2]string{"b", "c"}, nan}},
			"pairs[1].throughput.v100: must be non-negative numbers"},
	}
	for _, c := range cases {
		p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 1}}, Jobs: jobs, Pairs: c.pairs}
		err := p.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		if _, err := Solve("gandiva", p); err == nil || err.Error() != c.want {
			t.Errorf("%s: Solve got %v, want %q", c.name, err, c.want)
		}
	}
	ok := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 1}}, Jobs: jobs,
		Pairs: []Pair{{[2]string{"a", "b"}, good}, {[2]string{"a", "c"}, good}, {[2]string{"b", "c"}, good}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid pairs: %v", err)
	}
}

// Pairs sharing throughput maps (as the simulator's do, one per model pair)
// get the same answer as the same pairs with a map each: per-map work is
// memoized, never its result.
func TestSharedPairMapsSameAnswer(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	shares := map[string]int{} // pair columns with a share, per policy
	for trial := 0; trial < 4; trial++ {
		n := 20 + rng.Intn(20)
		shared := randomProblem(rng, n, 4+rng.Intn(n))
		// Jobs of four "models": a job's throughputs are its model's.
		model := make([]int, n)
		for m := range shared.Jobs {
			model[m] = rng.Intn(4)
			shared.Jobs[m].Throughput = shared.Jobs[model[m]].Throughput
			shared.Jobs[m].ScaleFactor = shared.Jobs[model[m]].ScaleFactor
		}
		byModels := map[[2]int]map[string][2]float64{}
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				if shared.Jobs[a].ScaleFactor != shared.Jobs[b].ScaleFactor {
					continue
				}
				k := [2]int{model[a], model[b]}
				tp, ok := byModels[k]
				if !ok {
					tp = map[string][2]float64{}
					for ty := range shared.GPUTypes {
						// Some model pairs lose throughput, some gain,
						// some cannot share a type.
						f := 0.3 + rng.Float64()*0.8
						if rng.Float64() < 0.2 {
							f = 0
						}
						tp[ty] = [2]float64{shared.Jobs[a].Throughput[ty] * f, shared.Jobs[b].Throughput[ty] * f}
					}
					byModels[k] = tp
				}
				shared.Pairs = append(shared.Pairs, Pair{Jobs: [2]string{shared.Jobs[a].ID, shared.Jobs[b].ID}, Throughput: tp})
			}
		}
		own := *shared
		own.Pairs = nil
		for _, pr := range shared.Pairs {
			own.Pairs = append(own.Pairs, Pair{Jobs: pr.Jobs, Throughput: maps.Clone(pr.Throughput)})
		}
		// Every kept pair's dense row is its own map's numbers.
		in := newInstance(shared)
		byJobs := map[[2]string]Pair{}
		for _, pr := range shared.Pairs {
			byJobs[pr.Jobs] = pr
		}
		for q := range in.pairA {
			pr := byJobs[[2]string{in.ids[in.pairA[q]], in.ids[in.pairB[q]]}]
			for k, ty := range in.types {
				if in.pairT[q][k] != pr.Throughput[ty] {
					t.Fatalf("trial %d: pair %v on %s: row %v, map %v", trial, pr.Jobs, ty, in.pairT[q][k], pr.Throughput[ty])
				}
			}
		}
		if len(in.pairA) == 0 {
			t.Fatalf("trial %d: no pairs kept", trial)
		}
		// The job indices validate hands the instance are the ids'.
		pairJobs, err := shared.validate()
		if err != nil {
			t.Fatal(err)
		}
		vin := newIndexedInstance(shared, pairJobs)
		if !reflect.DeepEqual(vin.pairA, in.pairA) || !reflect.DeepEqual(vin.pairB, in.pairB) || !reflect.DeepEqual(vin.pairT, in.pairT) {
			t.Fatalf("trial %d: validated pair indices differ from the ids' indices", trial)
		}
		for _, name := range []string{"gandiva", "max_min_fairness_packed", "fifo_packed", "finish_time_fairness_packed"} {
			as, err := Solve(name, shared)
			if err != nil {
				t.Fatal(err)
			}
			ao, err := Solve(name, &own)
			if err != nil {
				t.Fatal(err)
			}
			as.SolveMS, ao.SolveMS = 0, 0
			if !reflect.DeepEqual(as, ao) {
				t.Fatalf("trial %d %s: shared maps give a different answer", trial, name)
			}
			for _, row := range as.PairX {
				for _, v := range row {
					if v > 0 {
						shares[name]++
					}
				}
			}
		}
	}
	for _, name := range []string{"gandiva", "max_min_fairness_packed"} {
		if shares[name] == 0 {
			t.Errorf("%s: no pair ever shared a GPU; the test checks nothing", name)
		}
	}
}

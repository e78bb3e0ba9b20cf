package policies

import (
	"math/rand"
	"testing"
)

// referenceWaterFill is a slow, obviously-correct water-filling with one
// entity (weights = job weights): each step solves the max-min LP with Clp,
// then tests every active job with its own LP ("how high can this job go
// while every job keeps its level?").
func referenceWaterFill(t *testing.T, in *instance) []float64 {
	base := lasProblem(in, in.tput)
	n := in.n()
	frozen := make([]bool, n)
	floor := make([]float64, n)
	for m := 0; m < n; m++ {
		frozen[m] = base.w[m] == 0
	}
	for iter := 0; iter <= n; iter++ {
		w := make([]float64, n)
		sum := 0.0
		for m := 0; m < n; m++ {
			if !frozen[m] {
				sum += in.weight[m]
			}
		}
		if sum == 0 {
			break
		}
		for m := 0; m < n; m++ {
			if !frozen[m] {
				w[m] = in.weight[m] / sum
			}
		}
		mm := &maxMin{capacity: base.capacity, e: base.e, cap: base.cap, w: w, floor: floor}
		res, _, err := mm.solveLP(nil)
		if err != nil {
			t.Fatal(err)
		}
		levels := make([]float64, n)
		for m := range levels {
			levels[m] = mm.levelOf(m, res.t) * (1 - 1e-9)
		}
		progress := false
		for m := 0; m < n; m++ {
			if frozen[m] {
				continue
			}
			one := make([]float64, n)
			one[m] = 1
			fl := append([]float64(nil), levels...)
			fl[m] = 0
			probe := &maxMin{capacity: base.capacity, e: base.e, cap: base.cap, w: one, floor: fl}
			pr, _, err := probe.solveLP(nil)
			if err != nil {
				t.Fatal(err)
			}
			if pr.t <= levels[m]*(1+1e-5)+1e-9 {
				frozen[m] = true
				progress = true
			}
		}
		if !progress {
			t.Fatalf("reference water-filling made no progress at iteration %d", iter)
		}
		floor = levels
	}
	return floor
}

// The decomposition-based water-filling reaches the same (unique) max-min
// fair levels as the slow reference.
func TestWaterFillingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	for trial := 0; trial < 8; trial++ {
		n := 3 + rng.Intn(18)
		p := randomProblem(rng, n, 2+rng.Intn(n))
		for i := range p.Jobs {
			p.Jobs[i].Entity = ""
		}
		in := newInstance(p)
		want := referenceWaterFill(t, in)
		a, err := Solve("max_min_fairness_water_filling_perf", p)
		if err != nil {
			t.Fatal(err)
		}
		base := lasProblem(in, in.tput)
		for m := 0; m < n; m++ {
			got := 0.0
			for j := range a.X[m] {
				got += base.e[m][j] * a.X[m][j] * in.sf[m]
			}
			// fillLeftover may only add; the levels themselves must match.
			if got < want[m]*(1-1e-4)-1e-9 {
				t.Fatalf("trial %d job %d: level %.6f below the reference %.6f", trial, m, got, want[m])
			}
			if got > want[m]*(1+1e-3)+1e-9 {
				t.Fatalf("trial %d job %d: level %.6f above the reference %.6f (reference not Pareto?)", trial, m, got, want[m])
			}
		}
	}
}

// Entities: FIFO hands an entity's weight to its jobs in arrival order,
// fairness spreads it. Two entities of weight 1 on 3 GPUs; A has 3 jobs.
func TestWaterFillingEntities(t *testing.T) {
	for _, tc := range []struct {
		policy string
		wantA  []float64
	}{{"fifo", []float64{1, 1, 0}}, {"fairness", []float64{2.0 / 3, 2.0 / 3, 2.0 / 3}}} {
		p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 3}},
			Entities: map[string]Entity{"A": {Weight: 1, Policy: tc.policy}, "B": {Weight: 1}}}
		for i, e := range []string{"A", "A", "A", "B"} {
			p.Jobs = append(p.Jobs, Job{ID: string(rune('a' + i)), Throughput: map[string]float64{"v100": 2}, ScaleFactor: 1, Entity: e})
		}
		a, err := Solve("hierarchical", p)
		if err != nil {
			t.Fatal(err)
		}
		for m, w := range tc.wantA {
			if d := a.X[m][0] - w; d > 1e-6 || d < -1e-6 {
				t.Errorf("%s: job %d gets %.4f, want %.4f", tc.policy, m, a.X[m][0], w)
			}
		}
		if d := a.X[3][0] - 1; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: entity B's job gets %.4f, want 1", tc.policy, a.X[3][0])
		}
	}
}

package placement

import (
	"math"
	"math/rand"
	"testing"
)

// TestOptSearchExact: on random small programs optSearch's choice fits and
// is worth as much as the best of every combination (brute force).
func TestOptSearchExact(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 300; trial++ {
		k := 1 + rng.Intn(5)
		groups := make([][]optCand, k)
		n := 0
		for i := range groups {
			for c := 0; c < 1+rng.Intn(6); c++ {
				groups[i] = append(groups[i], optCand{n: n, c: float64(1 + rng.Intn(8)), m: float64(10 * (1 + rng.Intn(8))), r: 1 + rng.Float64()})
				n++
			}
		}
		capC, capM := float64(4+rng.Intn(20)), float64(40+rng.Intn(200))
		byN := map[int]optCand{}
		for _, g := range groups {
			for _, c := range g {
				byN[c.n] = c
			}
		}
		// Brute force over every combination.
		want := math.Inf(-1)
		var walk func(i int, c, m, v float64)
		walk = func(i int, c, m, v float64) {
			if c > capC || m > capM {
				return
			}
			if i == k {
				want = math.Max(want, v)
				return
			}
			for _, x := range groups[i] {
				walk(i+1, c+x.c, m+x.m, v+x.r)
			}
		}
		walk(0, 0, 0, 0)
		got := optSearch(capC, capM, groups)
		if math.IsInf(want, -1) {
			if got != nil {
				t.Fatalf("trial %d: infeasible, got %v", trial, got)
			}
			continue
		}
		if len(got) != k {
			t.Fatalf("trial %d: chose %v for %d jobs", trial, got, k)
		}
		var c, m, v float64
		for i, id := range got {
			x := byN[id]
			if !containsN(groups[i], id) {
				t.Fatalf("trial %d: job %d got candidate %d of another job", trial, i, id)
			}
			c, m, v = c+x.c, m+x.m, v+x.r
		}
		if c > capC || m > capM {
			t.Fatalf("trial %d: over capacity (%g/%g cores, %g/%g GB)", trial, c, capC, m, capM)
		}
		if math.Abs(v-want) > 1e-9 {
			t.Fatalf("trial %d: value %g, best %g", trial, v, want)
		}
	}
}

func containsN(g []optCand, n int) bool {
	for _, c := range g {
		if c.n == n {
			return true
		}
	}
	return false
}

package policies

import (
	"math"
	"math/rand"
	"testing"
)

// The dense master agrees with Clp on random degenerate-looking masters.
func TestDenseMasterMatchesClp(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for trial := 0; trial < 300; trial++ {
		k := 1 + rng.Intn(4)
		capacity := make([]float64, k)
		for j := range capacity {
			capacity[j] = float64(1 + rng.Intn(50))
		}
		cols := []column{{t: 0, use: make([]float64, k)}}
		for q := 0; q < 1+rng.Intn(40); q++ {
			use := make([]float64, k)
			for j := range use {
				use[j] = capacity[j] * rng.Float64() * 2
				if rng.Intn(4) == 0 {
					use[j] = capacity[j] // ties make the master degenerate
				}
			}
			tt := rng.Float64()
			if rng.Intn(5) == 0 && q > 0 {
				tt = cols[q].t
			}
			cols = append(cols, column{t: tt, use: use})
		}
		mu, lambda, v, err := denseMaster(cols, capacity)
		if err != nil {
			t.Fatal(err)
		}
		_, _, ref, err := clpMaster(cols, capacity)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(v-ref) > 1e-7 {
			t.Fatalf("trial %d: dense %.10f, Clp %.10f", trial, v, ref)
		}
		// μ is feasible and attains v; λ with σ = v − λ·cap is dual feasible.
		sum, got := 0.0, 0.0
		use := make([]float64, k)
		for q, m := range mu {
			if m < -1e-12 {
				t.Fatalf("negative weight")
			}
			sum += m
			got += m * cols[q].t
			for j := range use {
				use[j] += m * cols[q].use[j]
			}
		}
		if math.Abs(sum-1) > 1e-9 || math.Abs(got-v) > 1e-9 {
			t.Fatalf("trial %d: Σμ=%g value %g vs %g", trial, sum, got, v)
		}
		sigma := v
		for j := range use {
			if use[j] > capacity[j]*(1+1e-9) {
				t.Fatalf("trial %d: capacity %d: %g > %g", trial, j, use[j], capacity[j])
			}
			sigma -= lambda[j] * capacity[j]
		}
		for q, c := range cols {
			rc := c.t - sigma
			for j := range lambda {
				rc -= lambda[j] * c.use[j]
			}
			if rc > 1e-7 {
				t.Fatalf("trial %d: column %d has reduced cost %g at the returned prices", trial, q, rc)
			}
		}
	}
}

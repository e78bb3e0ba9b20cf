package policies

import (
	"math/rand"
	"os"
	"strconv"
	"testing"
)

// TestSoakAllPolicies runs every policy on many random instances when
// RONDO_SOAK=N is set (N seeds): a longer version of TestAllPoliciesFeasible
// for hunting solver robustness problems.
func TestSoakAllPolicies(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("RONDO_SOAK"))
	if seeds == 0 {
		t.Skip("set RONDO_SOAK=N to run N seeds")
	}
	for seed := int64(1000); seed < 1000+int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 4 + rng.Intn(40)
		p := randomProblem(rng, n, 2+rng.Intn(n))
		addPairs(rng, p, 12)
		p.Entities = map[string]Entity{"e0": {Weight: 1, Policy: "fairness"}, "e1": {Weight: 2, Policy: "fifo"}, "e2": {Weight: 1}}
		for _, name := range Names() {
			a, err := Solve(name, p)
			if err != nil {
				t.Errorf("seed %d, %s: %v", seed, name, err)
				continue
			}
			checkFeasible(t, name, p, a)
		}
	}
}

package fairlp

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/rondo-sched/rondo/policies/fairshare"
)

// Two users, no demand limits: the best IR allocation gives all fast GPUs
// to the user with the higher speedup; trading reaches it.
func TestBestIRTwoUsers(t *testing.T) {
	shares := fairshare.Shares{"a": {"v100": 2, "k80": 6}, "b": {"v100": 2, "k80": 6}}
	value := fairshare.Value{"a": {"v100": 4, "k80": 1}, "b": {"v100": 2, "k80": 1}}
	x, best, err := BestIR(shares, value, nil)
	if err != nil {
		t.Fatal(err)
	}
	traded, _ := fairshare.TradeShares(shares, value, nil, 0)
	if got := fairshare.TotalUtility(traded, value); math.Abs(got-best) > 1e-6 {
		t.Errorf("trading %v, best IR %v (%v)", got, best, x)
	}
	if math.Abs(x["a"]["v100"]-4) > 1e-6 {
		t.Errorf("a gets %v v100, want all 4", x["a"]["v100"])
	}
}

// On random markets the LP optimum is feasible, individually rational and
// at least trading's total utility.
func TestBestIRBoundsTrading(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	types := []string{"k80", "p100", "v100"}
	for trial := 0; trial < 40; trial++ {
		shares := fairshare.Shares{}
		value := fairshare.Value{}
		demand := map[string]float64{}
		for u := 0; u < 2+rng.Intn(6); u++ {
			name := fmt.Sprintf("u%d", u)
			shares[name], value[name] = map[string]float64{}, map[string]float64{}
			for _, ty := range types {
				shares[name][ty] = 4 * rng.Float64()
				value[name][ty] = 0.5 + 3*rng.Float64()
			}
			demand[name] = shares.Total(name) * (1 + rng.Float64())
		}
		x, best, err := BestIR(shares, value, demand)
		if err != nil {
			t.Fatal(err)
		}
		traded, _ := fairshare.TradeShares(shares, value, demand, 0)
		if tu := fairshare.TotalUtility(traded, value); tu > best+1e-6*best {
			t.Fatalf("trial %d: trading %v above the LP's %v", trial, tu, best)
		}
		for u := range shares {
			if fairshare.Utility(x, value, u) < fairshare.Utility(shares, value, u)-1e-6 {
				t.Fatalf("trial %d: %s below its no-trade utility", trial, u)
			}
			if x.Total(u) > demand[u]+1e-6 {
				t.Fatalf("trial %d: %s above its demand", trial, u)
			}
		}
		for _, ty := range types {
			a, b := 0.0, 0.0
			for u := range shares {
				a += shares[u][ty]
				b += x[u][ty]
			}
			if math.Abs(a-b) > 1e-6 {
				t.Fatalf("trial %d: %s %v -> %v", trial, ty, a, b)
			}
		}
	}
}

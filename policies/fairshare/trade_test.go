package fairshare

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// Two users, two types: the buyer (speedup 4) buys the seller's fast share
// at the seller's own speedup (2), as much as the buyer's slow share pays.
func TestTradeSharesTwoUsers(t *testing.T) {
	shares := Shares{"a": {"v100": 2, "k80": 6}, "b": {"v100": 2, "k80": 6}}
	value := Value{"a": {"v100": 4, "k80": 1}, "b": {"v100": 2, "k80": 1}}
	got, trades := TradeShares(shares, value, nil, 0)
	if len(trades) != 1 {
		t.Fatalf("trades %+v", trades)
	}
	tr := trades[0]
	if tr.Buyer != "a" || tr.Seller != "b" || tr.Fast != "v100" || tr.Slow != "k80" || !near(tr.Price, 2) || !near(tr.Amount, 2) {
		t.Fatalf("trade %+v", tr)
	}
	want := Shares{"a": {"v100": 4, "k80": 2}, "b": {"k80": 10}}
	for u := range want {
		for ty, w := range want[u] {
			if !near(got[u][ty], w) {
				t.Errorf("%s %s: %v, want %v", u, ty, got[u][ty], w)
			}
		}
	}
	if shares["b"]["v100"] != 2 {
		t.Error("input shares modified")
	}
	// Seller's utility unchanged (price = its speedup), buyer's up.
	if !near(Utility(got, value, "b"), Utility(shares, value, "b")) || Utility(got, value, "a") <= Utility(shares, value, "a") {
		t.Errorf("utilities %v -> %v", Utility(shares, value, "a"), Utility(got, value, "a"))
	}
}

// The seller's demand limits how many slow GPUs it can take; the margin
// stops trades between nearly equal speedups.
func TestTradeSharesDemandAndMargin(t *testing.T) {
	shares := Shares{"a": {"v100": 2, "k80": 6}, "b": {"v100": 2, "k80": 6}}
	value := Value{"a": {"v100": 4, "k80": 1}, "b": {"v100": 2, "k80": 1}}
	got, trades := TradeShares(shares, value, map[string]float64{"b": 9}, 0)
	if len(trades) != 1 || !near(trades[0].Amount, 1) || !near(got.Total("b"), 9) {
		t.Fatalf("demand 9: trades %+v, b has %v", trades, got["b"])
	}
	if _, trades := TradeShares(shares, value, map[string]float64{"b": 8}, 0); len(trades) != 0 {
		t.Fatalf("b at its demand traded: %+v", trades)
	}
	if _, trades := TradeShares(shares, value, nil, 1); len(trades) != 0 {
		t.Fatalf("speedups 4 vs 2 traded with margin 1 (4 <= 2·2): %+v", trades)
	}
	if _, trades := TradeShares(shares, value, nil, 0.99); len(trades) != 1 {
		t.Fatalf("margin 0.99: %+v", trades)
	}
}

// Second price: with three users the price is the next-highest bid.
func TestTradeSharesSecondPrice(t *testing.T) {
	shares := Shares{"a": {"v100": 1, "k80": 3}, "b": {"v100": 1, "k80": 3}, "c": {"v100": 1, "k80": 3}}
	value := Value{"a": {"v100": 5, "k80": 1}, "b": {"v100": 3, "k80": 1}, "c": {"v100": 2, "k80": 1}}
	_, trades := TradeShares(shares, value, nil, 0)
	if len(trades) == 0 || trades[0].Buyer != "a" || trades[0].Seller != "c" || !near(trades[0].Price, 3) || !near(trades[0].Amount, 1) {
		t.Fatalf("trades %+v", trades)
	}
}

// Users with jobs on one type only value the other at 0: speedup +Inf
// (buys first, any price) or 0 (sells first); neither ends worse off.
func TestTradeSharesSingleTypeUser(t *testing.T) {
	shares := Shares{"onlyfast": {"v100": 1, "k80": 2}, "onlyslow": {"v100": 1, "k80": 4}, "both": {"v100": 3, "k80": 4}}
	value := Value{"onlyfast": {"v100": 3}, "onlyslow": {"k80": 1}, "both": {"v100": 3, "k80": 1}}
	got, trades := TradeShares(shares, value, nil, 0)
	checkMarket(t, "single", shares, got, value, nil)
	if len(trades) == 0 || trades[0].Buyer != "onlyfast" || trades[0].Seller != "onlyslow" || !near(trades[0].Price, 3) || !near(trades[0].Amount, 2.0/3) {
		t.Fatalf("trades %+v", trades)
	}
	if got["onlyfast"]["k80"] != 0 || got["onlyslow"]["v100"] != 0 {
		t.Errorf("single-type users keep GPUs they cannot use: %v", got)
	}
}

// checkMarket: totals per type conserved, no user below its no-trade
// utility, demand respected where it was before.
func checkMarket(t *testing.T, name string, before, after Shares, value Value, demand map[string]float64) {
	t.Helper()
	tot := func(s Shares) map[string]float64 {
		m := map[string]float64{}
		for _, us := range s {
			for ty, g := range us {
				m[ty] += g
				if g < -1e-12 {
					t.Fatalf("%s: negative share %v", name, g)
				}
			}
		}
		return m
	}
	tb, ta := tot(before), tot(after)
	for ty := range tb {
		if math.Abs(tb[ty]-ta[ty]) > 1e-9 {
			t.Fatalf("%s: %s total %v -> %v", name, ty, tb[ty], ta[ty])
		}
	}
	for u := range before {
		ub, ua := Utility(before, value, u), Utility(after, value, u)
		if ua < ub-1e-9*math.Max(1, ub) {
			t.Fatalf("%s: user %s utility %v -> %v", name, u, ub, ua)
		}
		if d, ok := demand[u]; ok && after.Total(u) > math.Max(d, before.Total(u))+1e-9 {
			t.Fatalf("%s: user %s has %v GPUs, demand %v", name, u, after.Total(u), d)
		}
	}
	if TotalUtility(after, value) < TotalUtility(before, value)-1e-9 {
		t.Fatalf("%s: total utility fell", name)
	}
}

// Property test over random markets from Compute: conservation, no user
// below its no-trade utility, total utility never lower, demand kept.
func TestTradeSharesRandomMarkets(t *testing.T) {
	rng := rand.New(rand.NewSource(15))
	types := []string{"k80", "p100", "v100"}
	for trial := 0; trial < 300; trial++ {
		capa := map[string]float64{}
		for _, ty := range types {
			capa[ty] = float64(rng.Intn(12))
		}
		var users []User
		value := Value{}
		demand := map[string]float64{}
		for u := 0; u < 2+rng.Intn(7); u++ {
			name := fmt.Sprintf("u%d", u)
			var js []Job
			var runs []string
			for _, ty := range types {
				if rng.Float64() < 0.8 {
					runs = append(runs, ty)
				}
			}
			if len(runs) == 0 {
				runs = types[:1]
			}
			for j := 0; j < 1+rng.Intn(6); j++ {
				js = append(js, Job{GPUs: 1 << rng.Intn(3), Types: runs})
				demand[name] += float64(js[len(js)-1].GPUs)
			}
			users = append(users, User{Name: name, Tickets: float64(50 + rng.Intn(200)), Jobs: js})
			value[name] = map[string]float64{}
			for _, ty := range runs {
				value[name][ty] = 0.2 + 5*rng.Float64()
			}
		}
		shares := Compute(capa, users)
		margin := []float64{0, 0.05, 0.2}[trial%3]
		after, trades := TradeShares(shares, value, demand, margin)
		checkMarket(t, fmt.Sprintf("trial %d", trial), shares, after, value, demand)
		for _, tr := range trades {
			if !(tr.Amount > minTrade) || tr.Buyer == tr.Seller {
				t.Fatalf("trial %d: trade %+v", trial, tr)
			}
			sb := value[tr.Buyer][tr.Fast] / value[tr.Buyer][tr.Slow]
			ss := value[tr.Seller][tr.Fast] / value[tr.Seller][tr.Slow]
			if !(sb > ss*(1+margin)) || tr.Price < ss-1e-12 || tr.Price > sb+1e-12 {
				t.Fatalf("trial %d: trade %+v with speedups %v, %v", trial, tr, sb, ss)
			}
		}
		// Without demand limits as well.
		after, _ = TradeShares(shares, value, nil, margin)
		checkMarket(t, fmt.Sprintf("trial %d, no demand", trial), shares, after, value, nil)
	}
}

func TestValuations(t *testing.T) {
	jobs := map[string][]map[string]float64{
		"a": {{"k80": 1, "v100": 4}, {"k80": 2, "v100": 4}}, // speedups 4, 2
		"b": {{"k80": 1, "v100": 3}, {"v100": 5}},           // one job without k80
		"c": {{"v100": 2}},                                  // no job on k80
		"d": {{"k80": 3}},                                   // k80 only
	}
	if ref := ReferenceType(jobs); ref != "k80" {
		t.Fatalf("reference %q", ref)
	}
	v := Valuations(jobs)
	if !near(v["a"]["k80"], 1) || !near(v["a"]["v100"]/v["a"]["k80"], 3) {
		t.Errorf("a: %v, want speedup = mean of 4 and 2", v["a"])
	}
	if !near(v["b"]["v100"], 3) || !near(v["b"]["k80"], 1) {
		t.Errorf("b: %v (only jobs on both types count)", v["b"])
	}
	// c: fallback, the population's mean ratio over jobs on both (4, 2, 3).
	if v["c"]["k80"] != 0 || !near(v["c"]["v100"], 3) {
		t.Errorf("c: %v", v["c"])
	}
	if v["d"]["v100"] != 0 || v["d"]["k80"] != 1 {
		t.Errorf("d: %v", v["d"])
	}
}

package fairshare_test

// The numbers in docs/gandiva-fair-trading.md:
//
//	go test ./policies/fairshare -run TestTradingOnGavelTable -v
//
// This external test package reads Gavel's throughput table from
// allocator/throughputs, which imports only the standard library (no
// cycle; package fairshare itself imports nothing of Rondo's).

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/policies/fairshare"
	"github.com/rondo-sched/rondo/policies/fairshare/fairlp"
)

var gavelTypes = []string{"k80", "p100", "v100"}

// gavelModels: Gavel's single-GPU configurations, isolated steps/s on
// k80, p100 and v100, sorted by model.
func gavelModels(t *testing.T) ([]string, map[string]map[string]float64) {
	tb := throughputs.Default()
	var models []string
	tput := map[string]map[string]float64{}
	for _, k := range tb.Keys("v100") {
		if k.ScaleFactor != 1 {
			continue
		}
		m := map[string]float64{}
		for _, ty := range gavelTypes {
			v, ok := tb.Isolated(k, ty)
			if !ok {
				t.Fatalf("%s not measured on %s", k.Model, ty)
			}
			m[ty] = v
		}
		models = append(models, k.Model)
		tput[k.Model] = m
	}
	if len(models) < 20 {
		t.Fatalf("%d single-GPU models in Gavel's table", len(models))
	}
	return models, tput
}

type stats struct{ sum, min, max float64 }

func (s *stats) add(v float64, n int) {
	if n == 0 || v < s.min {
		s.min = v
	}
	if n == 0 || v > s.max {
		s.max = v
	}
	s.sum += v
}

func TestTradingOnGavelTable(t *testing.T) {
	models, tput := gavelModels(t)
	if testing.Verbose() {
		fmt.Printf("\n%d random markets per row on 8 v100 + 8 p100 + 16 k80 (seed 15): 4-8 users, each training single-GPU jobs of one or two Gavel models of its own, tickets 50-200; margin 0. Utility: Σ_t value·GPUs in GPUs of the reference (slowest) type, in each user's own valuation.\n\n", gavelMarkets)
		fmt.Println("| price | jobs per user | demand limits | markets with a trade | trades per market | gain after/before: mean | min | max | gap (LP − trading)/LP: mean | min | max | at the LP optimum (1e-7) |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	}
	for _, sc := range []struct {
		lo, hi      int
		noDemand    bool
		sellerPrice bool
	}{{2, 10, false, false}, {2, 10, true, false}, {10, 20, false, false},
		{2, 10, false, true}, {2, 10, true, true}, {10, 20, false, true}} {
		old := fairshare.SetSellerPrice(sc.sellerPrice)
		gavelMarketRow(t, models, tput, sc.lo, sc.hi, sc.noDemand, sc.sellerPrice)
		fairshare.SetSellerPrice(old)
	}
	if testing.Verbose() {
		fmt.Println("\nChecked in every market: each type's total conserved, no user below its no-trade utility, none above its demand (where limited), total utility never lower, trading at most the LP optimum.")
	}
	incentives(t, tput)
}

const gavelMarkets = 200

func gavelMarketRow(t *testing.T, models []string, tput map[string]map[string]float64, lo, hi int, noDemand, sellerPrice bool) {
	capacity := map[string]float64{"v100": 8, "p100": 8, "k80": 16}
	rng := rand.New(rand.NewSource(15))
	var gain, gap stats
	traded, nTrades, atOpt := 0, 0, 0
	for k := 0; k < gavelMarkets; k++ {
		var users []fairshare.User
		jobs := map[string][]map[string]float64{}
		demand := map[string]float64{}
		for u := 0; u < 4+rng.Intn(5); u++ {
			name := fmt.Sprintf("u%d", u)
			mine := []string{models[rng.Intn(len(models))], models[rng.Intn(len(models))]}
			fu := fairshare.User{Name: name, Tickets: float64(50 + rng.Intn(151))}
			for j := 0; j < lo+rng.Intn(hi-lo+1); j++ {
				m := mine[rng.Intn(1+rng.Intn(2))]
				fu.Jobs = append(fu.Jobs, fairshare.Job{GPUs: 1, Types: gavelTypes})
				jobs[name] = append(jobs[name], tput[m])
				demand[name]++
			}
			users = append(users, fu)
		}
		shares := fairshare.Compute(capacity, users)
		value := fairshare.Valuations(jobs)
		if noDemand {
			demand = nil
		}
		after, trades := fairshare.TradeShares(shares, value, demand, 0)
		// Conservation.
		for _, ty := range gavelTypes {
			b, a := 0.0, 0.0
			for u := range shares {
				b += shares[u][ty]
				a += after[u][ty]
			}
			if math.Abs(a-b) > 1e-9 {
				t.Fatalf("market %d: %s %v -> %v GPUs", k, ty, b, a)
			}
		}
		// No user below its no-trade utility, nor above its demand.
		for u := range shares {
			ub, ua := fairshare.Utility(shares, value, u), fairshare.Utility(after, value, u)
			if ua < ub-1e-9*math.Max(1, ub) {
				t.Fatalf("market %d: %s's utility %v -> %v", k, u, ub, ua)
			}
			if d, ok := demand[u]; ok && after.Total(u) > math.Max(d, shares.Total(u))+1e-9 {
				t.Fatalf("market %d: %s holds %v GPUs for %v of demand", k, u, after.Total(u), d)
			}
		}
		before, total := fairshare.TotalUtility(shares, value), fairshare.TotalUtility(after, value)
		if total < before-1e-9 {
			t.Fatalf("market %d: total utility %v -> %v", k, before, total)
		}
		_, best, err := fairlp.BestIR(shares, value, demand)
		if err != nil {
			t.Fatalf("market %d: %v", k, err)
		}
		if total > best*(1+1e-7) {
			t.Fatalf("market %d: trading %v above the LP optimum %v", k, total, best)
		}
		g := (best - total) / best
		if g < 1e-7 {
			atOpt++
		}
		gain.add(total/before, k)
		gap.add(g, k)
		if len(trades) > 0 {
			traded++
		}
		nTrades += len(trades)
	}
	if testing.Verbose() {
		limits := "yes"
		if noDemand {
			limits = "none"
		}
		rule := "second price"
		if sellerPrice {
			rule = "seller's speedup (ablation)"
		}
		fmt.Printf("| %s | %d-%d | %s | %d | %.2f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %d |\n", rule, lo, hi, limits, traded, float64(nTrades)/gavelMarkets,
			gain.sum/gavelMarkets, gain.min, gain.max, gap.sum/gavelMarkets, gap.min, gap.max, atOpt)
	}
}

// incentives: the two-user market of cmd/rondo's test — alice trains
// ResNet-50 (batch size 64), bob Transformer (batch size 16), six 1-GPU
// jobs each, equal tickets, 4 v100 + 4 k80 — with one user misreporting
// its speedup (its v100 valuation scaled) and the other truthful;
// utilities in each user's true valuation.
func incentives(t *testing.T, tput map[string]map[string]float64) {
	two := []string{"k80", "v100"}
	only := func(m map[string]float64) map[string]float64 {
		return map[string]float64{"k80": m["k80"], "v100": m["v100"]}
	}
	jobs := map[string][]map[string]float64{}
	var users []fairshare.User
	demand := map[string]float64{}
	for _, u := range []struct{ name, model string }{{"alice", "ResNet-50 (batch size 64)"}, {"bob", "Transformer (batch size 16)"}} {
		fu := fairshare.User{Name: u.name, Tickets: 100}
		for j := 0; j < 6; j++ {
			fu.Jobs = append(fu.Jobs, fairshare.Job{GPUs: 1, Types: two})
			jobs[u.name] = append(jobs[u.name], only(tput[u.model]))
		}
		demand[u.name] = 6
		users = append(users, fu)
	}
	shares := fairshare.Compute(map[string]float64{"v100": 4, "k80": 4}, users)
	truth := fairshare.Valuations(jobs)
	speed := func(u string) float64 { return truth[u]["v100"] / truth[u]["k80"] }
	run := func(liar string, factor float64) (float64, float64, float64) {
		rep := fairshare.Value{}
		for u, m := range truth {
			rep[u] = map[string]float64{"k80": m["k80"], "v100": m["v100"]}
		}
		rep[liar]["v100"] *= factor
		after, trades := fairshare.TradeShares(shares, rep, demand, 0)
		price, amount := 0.0, 0.0
		if len(trades) > 0 {
			price, amount = trades[0].Price, trades[0].Amount
		}
		return fairshare.Utility(after, truth, liar), price, amount
	}
	noTrade := func(u string) float64 { return fairshare.Utility(shares, truth, u) }
	if testing.Verbose() {
		fmt.Printf("\nIncentives, two users on 4 v100 + 4 k80, six 1-GPU jobs each, equal tickets: alice (ResNet-50, batch size 64) speedup %.3f, bob (Transformer, batch size 16) speedup %.3f. Utility in k80-GPUs of the user's true valuation; no-trade utility alice %.3f, bob %.3f.\n\n",
			speed("alice"), speed("bob"), noTrade("alice"), noTrade("bob"))
		fmt.Println("| who misreports | reported speedup / true | price | amount (v100) | its utility | gain vs truthful |")
		fmt.Println("|---|---|---|---|---|---|")
	}
	sellerTruth, _, _ := run("bob", 1)
	if math.Abs(sellerTruth-noTrade("bob")) > 1e-9 {
		t.Fatalf("truthful seller gains %v in a two-user market; the price is its own speedup", sellerTruth-noTrade("bob"))
	}
	bestLie := 0.0
	for _, f := range []float64{1, 1.1, 1.25, 1.5, 2, 3, 3.5} {
		u, p, a := run("bob", f)
		gain := u/sellerTruth - 1
		bestLie = math.Max(bestLie, gain)
		if u < noTrade("bob")-1e-9 {
			t.Fatalf("seller below its no-trade utility when over-reporting %v", f)
		}
		if testing.Verbose() {
			fmt.Printf("| bob (seller) | %.2f | %.3f | %.3f | %.3f | %+.1f%% |\n", f, p, a, u, 100*gain)
		}
	}
	if bestLie <= 0 {
		t.Fatalf("the seller gained nothing by over-reporting; the docs say it can")
	}
	buyerTruth, _, _ := run("alice", 1)
	for _, f := range []float64{0.25, 0.3, 0.5, 0.9, 1, 1.1, 1.5, 2} {
		u, p, a := run("alice", f)
		if u > buyerTruth+1e-9 {
			t.Fatalf("buyer gains by reporting %v of its speedup", f)
		}
		if testing.Verbose() {
			fmt.Printf("| alice (buyer) | %.2f | %.3f | %.3f | %.3f | %+.1f%% |\n", f, p, a, u, 100*(u/buyerTruth-1))
		}
	}
	if testing.Verbose() {
		fmt.Printf("\nSeller's best gain from over-reporting above: %+.1f%% of its truthful utility.\n", 100*bestLie)
	}
}

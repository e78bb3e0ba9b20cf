package fairshare

import (
	"math"
	"sort"
)

// Trade is one exchange between two users: the seller gives Amount GPUs of
// the Fast type and receives Price·Amount GPUs of the Slow type from the
// buyer. Price is in slow GPUs per fast GPU.
type Trade struct {
	Buyer  string  `json:"buyer"`
	Seller string  `json:"seller"`
	Fast   string  `json:"fast"`
	Slow   string  `json:"slow"`
	Price  float64 `json:"price"`
	Amount float64 `json:"amount"`
}

// Value is each user's valuation of one GPU of each type (the mean over
// its jobs of the job's throughput there over its throughput on a common
// reference type): the speedup of user u for fast over slow is
// Value[u][fast] / Value[u][slow].
type Value map[string]map[string]float64

// minTrade is the smallest amount (fast GPUs) worth a trade.
const minTrade = 1e-9

// sellerPrice, set only by tests (export_test.go), replaces the second
// price by the seller's own speedup: the ablation in
// docs/gandiva-fair-trading.md.
var sellerPrice bool

// Utility is user u's total value of its shares in its own valuation:
// Σ_t value[u][t]·shares[u][t].
func Utility(shares Shares, value Value, user string) float64 {
	s := 0.0
	for _, t := range sortedKeys(shares[user]) { // a fixed order: the same sum every run
		s += value[user][t] * shares[user][t]
	}
	return s
}

// TotalUtility is Σ_u Utility(u).
func TotalUtility(shares Shares, value Value) float64 {
	s := 0.0
	for _, u := range sortedKeys(shares) {
		s += Utility(shares, value, u)
	}
	return s
}

// TradeShares trades the fair shares between generations (Gandiva-fair
// §3.4) and returns the new shares (shares is not modified) and the trades
// in the order made.
//
// Types are ranked by their mean valuation over the users of value (the
// fast type of a pair is the one ranked higher; ties by name), and every
// pair of types is traded in turn, fastest pairs first. Within a pair
// (fast, slow) each user's speedup is s_u = value[u][fast]/value[u][slow]
// (+Inf when it values only fast; users valuing neither are left out). The
// buyer is the user with the highest speedup who holds slow share, the
// seller the user with the lowest speedup who holds fast share; they trade
// while s_buyer > s_seller·(1+margin) (a negative margin counts as 0). If
// the best-ranked couple cannot trade a positive amount (above 1e-9 fast
// GPUs), the next couple is tried — buyers in falling speedup, for each
// the sellers in rising speedup; the pair of types is done when none can.
//
// The price (slow GPUs per fast GPU) is second-price: the highest speedup
// among the users other than the buyer who hold slow share, the seller's
// own speedup always counted (the next-highest bid), clamped to
// [s_seller, s_buyer]. With two users it is the seller's speedup. The
// amount is as large as possible: at most the seller's fast share and the
// buyer's slow share / price, and such that neither party's total GPUs
// (the seller gains (price−1)·amount, the buyer (1−price)·amount) rise
// above its demand (or above its current total, if that is already more);
// users missing from demand have no limit.
//
// Since price lies in [s_seller, s_buyer], neither party's utility
// Σ_t value[u][t]·share[u][t] falls, others are unchanged, and each
// type's total is conserved. Every trade raises Σ_u s_u·fast_u by
// amount·(s_buyer−s_seller) > 0, which bounds the trades; a cap on trades
// per pair guarantees termination against rounding.
func TradeShares(shares Shares, value Value, demand map[string]float64, margin float64) (Shares, []Trade) {
	out := shares.Clone()
	if margin < 0 || math.IsNaN(margin) {
		margin = 0
	}
	users := make([]string, 0, len(out))
	typeSet := map[string]bool{}
	for u, m := range out {
		users = append(users, u)
		for t := range m {
			typeSet[t] = true
		}
	}
	sort.Strings(users)
	for _, m := range value {
		for t := range m {
			typeSet[t] = true
		}
	}
	types := make([]string, 0, len(typeSet))
	mean := map[string]float64{}
	for t := range typeSet {
		types = append(types, t)
		if len(value) > 0 {
			s := 0.0
			for _, u := range sortedKeys(value) {
				s += value[u][t]
			}
			mean[t] = s / float64(len(value))
		}
	}
	sort.Slice(types, func(a, b int) bool {
		if mean[types[a]] != mean[types[b]] {
			return mean[types[a]] > mean[types[b]]
		}
		return types[a] < types[b]
	})
	var trades []Trade
	for i := range types {
		for j := i + 1; j < len(types); j++ {
			trades = tradePair(out, value, demand, margin, users, types[i], types[j], trades)
		}
	}
	return out, trades
}

// tradePair runs the market for one pair of types on out (in place).
func tradePair(out Shares, value Value, demand map[string]float64, margin float64, users []string, fast, slow string, trades []Trade) []Trade {
	speed := map[string]float64{}
	var market []string
	for _, u := range users {
		vf, vs := value[u][fast], value[u][slow]
		if vf <= 0 && vs <= 0 {
			continue
		}
		if vs <= 0 {
			speed[u] = math.Inf(1)
		} else {
			speed[u] = vf / vs
		}
		market = append(market, u)
	}
	if len(market) < 2 {
		return trades
	}
	// Buyers in falling speedup, sellers in rising; ties by name.
	byDesc := append([]string(nil), market...)
	sort.SliceStable(byDesc, func(a, b int) bool { return speed[byDesc[a]] > speed[byDesc[b]] })
	byAsc := append([]string(nil), market...)
	sort.SliceStable(byAsc, func(a, b int) bool { return speed[byAsc[a]] < speed[byAsc[b]] })
	room := func(u string) float64 { // GPUs u may still gain
		d, ok := demand[u]
		if !ok {
			return math.Inf(1)
		}
		return math.Max(0, d-out.Total(u))
	}
	maxTrades := 1000 + 10*len(market)*len(market)
	for n := 0; n < maxTrades; n++ {
		traded := false
	search:
		for _, b := range byDesc {
			if out[b][slow] <= minTrade {
				continue
			}
			for _, s := range byAsc {
				if s == b {
					continue
				}
				if !(speed[b] > speed[s]*(1+margin)) {
					break // sellers further on are faster still
				}
				if out[s][fast] <= minTrade {
					continue
				}
				price := speed[s]
				for _, o := range market {
					if o != b && o != s && out[o][slow] > minTrade && speed[o] > price {
						price = speed[o]
					}
				}
				price = math.Min(price, speed[b])
				if sellerPrice {
					price = speed[s]
				}
				if math.IsInf(price, 0) || math.IsNaN(price) {
					continue
				}
				amount := math.Min(out[s][fast], out[b][slow]/math.Max(price, 1e-300))
				if price > 1 {
					amount = math.Min(amount, room(s)/(price-1))
				} else if price < 1 {
					amount = math.Min(amount, room(b)/(1-price))
				}
				if !(amount > minTrade) {
					continue
				}
				// Snap remainders of rounding size so that a share used up
				// is exactly 0 (and dropped), never a 1e-16 crumb.
				if out[s][fast]-amount < 1e-12 {
					amount = out[s][fast]
				}
				pay := price * amount
				if out[b][slow]-pay < 1e-12 {
					pay = out[b][slow]
				}
				out[s][fast] -= amount
				out[b][fast] += amount
				out[b][slow] -= pay
				out[s][slow] += pay
				for _, u := range []string{s, b} {
					for _, t := range []string{fast, slow} {
						if out[u][t] <= 0 {
							delete(out[u], t)
						}
					}
				}
				trades = append(trades, Trade{Buyer: b, Seller: s, Fast: fast, Slow: slow, Price: price, Amount: amount})
				traded = true
				break search
			}
		}
		if !traded {
			break
		}
	}
	return trades
}

package fairshare

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

// TradeShares trades the fair shares between generations (Gandiva-fair
// §3.4). TODO(#15): the real market; today it trades nothing.
func TradeShares(shares Shares, value Value, demand map[string]float64, margin float64) (Shares, []Trade) {
	return shares.Clone(), nil
}

package fairshare

// SetSellerPrice switches TradeShares to pricing at the seller's own
// speedup (true) or back to the second price, for the ablation row of
// TestTradingOnGavelTable; it returns the previous setting.
func SetSellerPrice(on bool) bool {
	old := sellerPrice
	sellerPrice = on
	return old
}

package policies

import "sort"

// sortStable sorts indices with less, keeping input order among ties so
// results never depend on anything but the input.
func sortStable(idx []int, less func(a, b int) bool) {
	sort.SliceStable(idx, func(x, y int) bool { return less(idx[x], idx[y]) })
}

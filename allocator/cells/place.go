package cells

import "slices"

// placeGang chooses leaves for a gang in forest f: each member inside one
// node, the whole gang inside the smallest cell that holds it (lowest level
// first, then lower rank, then best fit, then address), else spread over
// several top cells. usable says whether a leaf may be taken; rank orders
// cells (lower first). It returns leaf positions per member in request
// order, or nil.
func placeGang(f *forest, usable func(int) bool, rank func(int) int, members []int) [][]int {
	total := 0
	for _, m := range members {
		total += m
	}
	freeIn := func(c int) int {
		n := 0
		for l := f.cells[c].lo; l < f.cells[c].hi; l++ {
			if usable(l) {
				n++
			}
		}
		return n
	}
	type cand struct{ c, rank, free int }
	for lv := 1; lv <= f.maxLevel; lv++ {
		var cands []cand
		for c := range f.cells {
			if f.cells[c].level != lv {
				continue
			}
			if n := freeIn(c); n >= total {
				cands = append(cands, cand{c, rank(c), n})
			}
		}
		slices.SortFunc(cands, func(x, y cand) int {
			if x.rank != y.rank {
				return x.rank - y.rank
			}
			if x.free != y.free {
				return x.free - y.free
			}
			return x.c - y.c
		})
		for _, cd := range cands {
			if res := pack(f, []int{cd.c}, usable, rank, members); res != nil {
				return res
			}
		}
	}
	return pack(f, f.tops, usable, rank, members)
}

// pack places members, largest first, each on the smallest node-or-lower
// cell under roots with enough usable leaves (ties: rank, best fit,
// address), taking that cell's first usable leaves.
func pack(f *forest, roots []int, usable func(int) bool, rank func(int) int, members []int) [][]int {
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return members[y] - members[x] })
	taken := map[int]bool{}
	ok := func(l int) bool { return !taken[l] && usable(l) }
	res := make([][]int, len(members))
	for _, i := range order {
		need := members[i]
		best, bestKey := -1, [3]int{}
		for _, r := range roots {
			for c := r; c < f.cells[r].end; c++ {
				ci := f.cells[c]
				if ci.level > ci.nodeLevel || ci.hi-ci.lo < need {
					continue
				}
				n := 0
				for l := ci.lo; l < ci.hi; l++ {
					if ok(l) {
						n++
					}
				}
				if n < need {
					continue
				}
				key := [3]int{ci.level, rank(c), n}
				if best < 0 || less3(key, bestKey) {
					best, bestKey = c, key
				}
			}
		}
		if best < 0 {
			return nil
		}
		for l := f.cells[best].lo; l < f.cells[best].hi && len(res[i]) < need; l++ {
			if ok(l) {
				res[i] = append(res[i], l)
				taken[l] = true
			}
		}
	}
	return res
}

func less3(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

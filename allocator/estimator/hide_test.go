package estimator

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// HidePairs: half the feasible pairs are hidden and estimated, both orders
// consistently; the policy's view of a visible pair is the table's; the
// completion beats the naive baseline (row means), as in the leave-one-out
// study.
func TestHidePairs(t *testing.T) {
	tb := throughputs.Default()
	h, err := HidePairs(tb, 0.5, 1, DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hidden %d pairs (%d values): MAE %.3f MRE %.1f%%; naive MAE %.3f MRE %.1f%%", h.Pairs, h.Entries, h.MAE, 100*h.MRE, h.NaiveMAE, 100*h.NaiveMRE)
	if h.Pairs < 300 || h.MAE >= h.NaiveMAE || h.MRE >= h.NaiveMRE {
		t.Fatalf("hidden %d pairs; completion MAE %.3f / MRE %.3f vs naive %.3f / %.3f", h.Pairs, h.MAE, h.MRE, h.NaiveMAE, h.NaiveMRE)
	}
	visible, hidden := 0, 0
	for _, typ := range tb.Types() {
		keys := tb.Keys(typ)
		for _, a := range keys {
			for _, b := range keys {
				if a.ScaleFactor != 1 || b.ScaleFactor != 1 {
					continue
				}
				truth, ok := tb.Pair(a, b, typ)
				got, gok := h.Pair(tb, a, b, typ)
				if _, isHidden := h.Est[[2]throughputs.Key{a, b}][typ]; isHidden {
					hidden++
					rev := h.Est[[2]throughputs.Key{b, a}][typ]
					if got[0] != rev[1] || got[1] != rev[0] || got[0] < 0 {
						t.Fatalf("%v/%v on %s: %v vs reversed %v", a, b, typ, got, rev)
					}
					continue
				}
				visible++
				if ok != gok || got != truth {
					t.Fatalf("visible pair %v/%v on %s: %v, table %v", a, b, typ, got, truth)
				}
			}
		}
	}
	if hidden == 0 || visible == 0 {
		t.Fatalf("hidden %d, visible %d", hidden, visible)
	}
}

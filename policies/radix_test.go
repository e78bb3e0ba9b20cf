package policies

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// radixSort's comparison sort for few keys orders them as the radix sort
// does: by bits, ties by slot (keys come in slot order).
func TestRadixSortSmallMatchesRadix(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 2, 17, 500, radixMin - 1, radixMin, radixMin + 100} {
		keys := make([]radixKey, n)
		for i := range keys {
			v := math.Floor(rng.Float64()*50) / 7 // many ties
			if rng.Intn(5) == 0 {
				v = rng.ExpFloat64() * 1e6
			}
			keys[i] = radixKey{math.Float64bits(v), int32(i)}
		}
		want := radixSortBits(append([]radixKey(nil), keys...))
		got := radixSort(append([]radixKey(nil), keys...))
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: the two sorts differ", n)
		}
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			if a.bits > b.bits || (a.bits == b.bits && a.slot > b.slot) {
				t.Fatalf("n=%d: not sorted at %d", n, i)
			}
		}
	}
}

package trace

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refPow10 is 10^x by the same method at twice the precision and with
// 80 terms: pow10's early stop must not change a single result.
func refPow10(x float64) float64 {
	const prec = 2 * powPrec
	l, _, _ := big.ParseFloat(ln10, 10, prec, big.ToNearestEven)
	z := new(big.Float).SetPrec(prec).SetFloat64(x)
	z.Mul(z, l)
	z.SetMantExp(z, -16)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for k := int64(1); k <= 80; k++ {
		term.Mul(term, z)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(k))
		sum.Add(sum, term)
	}
	for range 16 {
		sum.Mul(sum, sum)
	}
	v, _ := sum.Float64()
	return v
}

func TestPow10CorrectlyRounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, 1, -1, 2, 0.5, 300, -300, 299.99, 1e-12, -1e-12}
	for range 3000 {
		xs = append(xs, r.Float64()*600-300)
	}
	for range 3000 {
		xs = append(xs, 1+r.Float64()*4) // the trace's exponents
	}
	for _, x := range xs {
		if got, want := pow10(x), refPow10(x); got != want {
			t.Fatalf("pow10(%v) = %v, want %v", x, got, want)
		}
	}
	// Exact powers stay exact.
	for k := -22; k <= 22; k++ {
		if got := pow10(float64(k)); got != math.Pow10(k) {
			t.Errorf("pow10(%d) = %v, want %v", k, got, math.Pow10(k))
		}
	}
}

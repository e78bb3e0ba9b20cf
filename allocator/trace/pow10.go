package trace

import (
	"math"
	"math/big"
)

// ln10 to 115 significant digits.
const ln10 = "2.302585092994045684017991454684364207601101488628772976033327900967572609677352480235997205089598298341967784042286"

const powPrec = 256

var ln10Big, _, _ = big.ParseFloat(ln10, 10, powPrec, big.ToNearestEven)

// pow10 is 10^x correctly rounded to float64, as the C library's pow (which
// CPython's 10 ** x calls) returns it; Go's math.Pow(10, x) is off by an ulp
// for about 40% of the exponents the generator draws, which would make the
// traces differ from the reference in the last bit. Computed as
// exp(x·ln 10) in 256-bit arithmetic: argument halved 16 times, Taylor
// series, then squared back.
func pow10(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 300 {
		return math.Pow(10, x)
	}
	z := new(big.Float).SetPrec(powPrec).SetFloat64(x)
	z.Mul(z, ln10Big)
	const halvings = 16
	z.SetMantExp(z, -halvings)
	// exp(z) = Σ z^k/k!, |z| < 0.011. The series stops once a term is
	// below 2^-(powPrec+16) of the sum (it adds nothing at 256 bits, where
	// the squarings' rounding is already 2^16 times larger): at most 27
	// terms for |x| ≤ 300, about 17 for the trace's exponents. 40 were
	// computed before, with the same results.
	sum := new(big.Float).SetPrec(powPrec).SetInt64(1)
	term := new(big.Float).SetPrec(powPrec).SetInt64(1)
	kf := new(big.Float).SetPrec(powPrec)
	for k := int64(1); k <= 40; k++ {
		term.Mul(term, z)
		term.Quo(term, kf.SetInt64(k))
		sum.Add(sum, term)
		if term.Sign() == 0 || term.MantExp(nil) < sum.MantExp(nil)-powPrec-16 {
			break
		}
	}
	for range halvings {
		sum.Mul(sum, sum)
	}
	v, _ := sum.Float64()
	return v
}

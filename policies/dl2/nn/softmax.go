package nn

import (
	"fmt"
	"math"
)

// MaskedSoftmax sets out to the softmax of logits over the entries where
// mask is true; the others get probability 0. It subtracts the largest
// allowed logit first, so huge logits are fine. If no entry is allowed,
// out is all zeros. If the largest allowed logit is +Inf, the +Inf
// entries share the probability equally; if every allowed logit is -Inf,
// the allowed entries share it equally. out may be logits.
func MaskedSoftmax(logits []float64, mask []bool, out []float64) {
	n := len(logits)
	if len(mask) != n || len(out) != n {
		panic(fmt.Sprintf("nn: MaskedSoftmax: %d logits, %d mask entries, %d outputs", n, len(mask), len(out)))
	}
	mx := math.Inf(-1)
	found := false
	for i, z := range logits {
		if mask[i] && (!found || z > mx) {
			mx, found = z, true
		}
	}
	if !found {
		clear(out)
		return
	}
	if math.IsInf(mx, 0) {
		// Uniform over the allowed entries equal to mx.
		k := 0
		for i, z := range logits {
			if mask[i] && z == mx {
				k++
			}
		}
		p := 1 / float64(k)
		for i, z := range logits {
			if mask[i] && z == mx {
				out[i] = p
			} else {
				out[i] = 0
			}
		}
		return
	}
	var s float64
	for i, z := range logits {
		if mask[i] {
			e := math.Exp(z - mx)
			out[i] = e
			s += e
		} else {
			out[i] = 0
		}
	}
	inv := 1 / s
	for i := range out {
		if mask[i] {
			out[i] *= inv
		}
	}
}

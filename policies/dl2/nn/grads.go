package nn

import (
	"fmt"
	"math"
)

// Grads has one value per weight and bias of an MLP, in the same shapes
// (W[l] is Sizes[l+1] x Sizes[l], row-major; B[l] has Sizes[l+1]).
type Grads struct{ W, B [][]float64 }

// NewGrads returns zero gradients shaped like m.
func NewGrads(m *MLP) *Grads {
	L := len(m.Sizes) - 1
	g := &Grads{W: make([][]float64, L), B: make([][]float64, L)}
	for l := 0; l < L; l++ {
		g.W[l] = make([]float64, m.Sizes[l+1]*m.Sizes[l])
		g.B[l] = make([]float64, m.Sizes[l+1])
	}
	return g
}

// each calls f on every array of g: W[0], B[0], W[1], B[1], ...
func (g *Grads) each(f func(v []float64)) {
	for l := range g.W {
		f(g.W[l])
		f(g.B[l])
	}
}

// Zero sets every value to 0.
func (g *Grads) Zero() { g.each(func(v []float64) { clear(v) }) }

// Scale multiplies every value by f.
func (g *Grads) Scale(f float64) {
	g.each(func(v []float64) {
		for i := range v {
			v[i] *= f
		}
	})
}

// AddScaled sets g += f*o (o shaped like g).
func (g *Grads) AddScaled(o *Grads, f float64) {
	if len(o.W) != len(g.W) {
		panic(fmt.Sprintf("nn: AddScaled: %d layers and %d", len(g.W), len(o.W)))
	}
	for l := range g.W {
		if len(o.W[l]) != len(g.W[l]) || len(o.B[l]) != len(g.B[l]) {
			panic(fmt.Sprintf("nn: AddScaled: layer %d shapes differ", l))
		}
		axpy(f, o.W[l], g.W[l])
		axpy(f, o.B[l], g.B[l])
	}
}

// Norm is the global L2 norm over all values.
func (g *Grads) Norm() float64 {
	var s float64
	g.each(func(v []float64) {
		for _, x := range v {
			s += x * x
		}
	})
	return math.Sqrt(s)
}

// ClipNorm scales g so that its global L2 norm is at most maxNorm (if
// maxNorm > 0 and the norm is larger) and returns the norm before
// clipping.
func (g *Grads) ClipNorm(maxNorm float64) float64 {
	n := g.Norm()
	if maxNorm > 0 && n > maxNorm {
		g.Scale(maxNorm / n)
	}
	return n
}

// Backward accumulates into g the gradient, with respect to every weight
// and bias, of sum_k dOut[k]*out[k] for the pass recorded in t by Forward
// (out is that pass's output). For a loss ℓ(out), pass dOut = ∂ℓ/∂out.
// It allocates nothing, leaves the recorded pass in t unchanged (Backward
// may be called again on it) and only reads m, whose weights must be those
// of the pass. It panics if t holds no pass or one made by ForwardPre.
func (m *MLP) Backward(t *Tape, dOut []float64, g *Grads) {
	m.backward(t, dOut, g, nil)
}

// BackwardInput is Backward that also sets dIn (len Sizes[0]) to the
// gradient of sum_k dOut[k]*out[k] with respect to the pass's input, for
// networks that feed this one (DL2's weight-shared per-job network). It
// allocates nothing.
func (m *MLP) BackwardInput(t *Tape, dOut []float64, g *Grads, dIn []float64) {
	if len(dIn) != m.Sizes[0] {
		panic(fmt.Sprintf("nn: BackwardInput: dIn has %d values, want %d", len(dIn), m.Sizes[0]))
	}
	m.backward(t, dOut, g, dIn)
}

func (m *MLP) backward(t *Tape, dOut []float64, g *Grads, dIn []float64) {
	L := len(m.Sizes) - 1
	if !t.recorded || !sameSizes(t.sizes, m.Sizes) {
		panic("nn: Backward: the tape holds no pass of this network")
	}
	if !t.hasInput {
		panic("nn: Backward: the tape's pass was made by ForwardPre, which does not record the input; use Forward")
	}
	if len(dOut) != m.Sizes[L] {
		panic(fmt.Sprintf("nn: Backward: dOut has %d values, want %d", len(dOut), m.Sizes[L]))
	}
	if len(g.W) != L || len(g.B) != L {
		panic(fmt.Sprintf("nn: Backward: gradients have %d layers, want %d", len(g.W), L))
	}
	// delta is ∂/∂(pre-activation of layer l); for the linear output
	// layer that is dOut itself.
	delta := dOut
	next, spare := t.d0, t.d1
	for l := L - 1; l >= 0; l-- {
		in := t.buf[l]
		if len(g.W[l]) != len(m.W[l]) || len(g.B[l]) != len(delta) {
			panic(fmt.Sprintf("nn: Backward: gradient layer %d is shaped wrong", l))
		}
		axpy(1, delta, g.B[l])
		ger(g.W[l], delta, in)
		if l == 0 {
			if dIn != nil {
				matTVec(m.W[0], delta, dIn)
			}
			break
		}
		d := next[:len(in)]
		matTVec(m.W[l], delta, d)
		for i, a := range in {
			if !(a > 0) { // ReLU: pass where the activation was positive
				d[i] = 0
			}
		}
		delta = d
		next, spare = spare, next
	}
}

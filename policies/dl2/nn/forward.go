package nn

import (
	"fmt"
	"unsafe"
)

// Tape holds the activations of one forward pass, for Backward, and the
// scratch space Backward needs. A Tape is reusable: after its first pass
// for an MLP of given sizes, passes and Backward allocate nothing. A Tape
// fits itself to the sizes of the MLP it is used with (reallocating if
// they differ), so one Tape may serve networks of equal sizes, but only
// one goroutine at a time.
type Tape struct {
	sizes []int
	// buf[0] is the pass's input (when known); buf[l] for 1 <= l < L is
	// the output of hidden layer l-1 after ReLU; buf[L] is the network's
	// output.
	buf [][]float64
	// Scratch for Backward, each of the largest width.
	d0, d1 []float64
	// hasInput: buf[0] holds the input of the recorded pass (Forward);
	// false after ForwardPre, which never sees the input.
	hasInput bool
	recorded bool
}

// NewTape returns a Tape fitted to m's sizes.
func NewTape(m *MLP) *Tape {
	t := &Tape{}
	t.fit(m)
	return t
}

func (t *Tape) fit(m *MLP) {
	if sameSizes(t.sizes, m.Sizes) {
		return
	}
	t.sizes = append(t.sizes[:0], m.Sizes...)
	t.buf = make([][]float64, len(m.Sizes))
	widest := 0
	for l, s := range m.Sizes {
		t.buf[l] = make([]float64, s)
		widest = max(widest, s)
	}
	t.d0 = make([]float64, widest)
	t.d1 = make([]float64, widest)
	t.recorded = false
}

// Output is the output of the last recorded pass (nil if none).
func (t *Tape) Output() []float64 {
	if !t.recorded {
		return nil
	}
	return t.buf[len(t.buf)-1]
}

// Forward computes m(x) and records the pass in t for Backward. The
// returned slice is owned by t and overwritten by t's next pass. t must be
// non-nil (see NewTape). Forward is exactly Pre followed by ForwardPre.
func (m *MLP) Forward(x []float64, t *Tape) []float64 {
	if len(x) != m.Sizes[0] {
		panic(fmt.Sprintf("nn: Forward: input has %d values, want %d", len(x), m.Sizes[0]))
	}
	t.fit(m)
	copy(t.buf[0], x)
	m.Pre(x, t.buf[1])
	out := m.finish(t)
	t.hasInput = true
	return out
}

// Pre sets pre to the first layer's pre-activation, W[0] x + B[0]
// (len(pre) == Sizes[1]). With AddInput and ForwardPre it makes many
// passes whose inputs differ from x in a few coordinates cheap:
//
//	m.Pre(x, pre)            // once: Sizes[0]*Sizes[1] multiply-adds
//	m.AddInput(pre, i, d)    // x[i] += d: Sizes[1] multiply-adds
//	out := m.ForwardPre(pre, t)
func (m *MLP) Pre(x []float64, pre []float64) {
	in, h := m.Sizes[0], m.Sizes[1]
	if len(x) != in || len(pre) != h {
		panic(fmt.Sprintf("nn: Pre: input has %d values and pre %d, want %d and %d", len(x), len(pre), in, h))
	}
	affine(m.W[0], m.B[0], x, pre)
}

// AddInput updates a first-layer pre-activation for a change of input
// coordinate i by delta: pre += delta * W[0][:, i]. It reads a transposed
// copy of W[0] (columns contiguous) that is rebuilt on first use after the
// weights change; see Changed for when that is noticed. Safe for
// concurrent use on one MLP (with distinct pre).
func (m *MLP) AddInput(pre []float64, i int, delta float64) {
	h := m.Sizes[1]
	if len(pre) != h || i < 0 || i >= m.Sizes[0] {
		panic(fmt.Sprintf("nn: AddInput: pre has %d values (want %d), coordinate %d of %d", len(pre), h, i, m.Sizes[0]))
	}
	if delta == 0 {
		return
	}
	wt := m.transposedW0()
	axpy(delta, wt.data[i*h:(i+1)*h], pre)
}

// transposedW0 returns the current transposed copy of W[0], building it if
// it is missing or stale.
func (m *MLP) transposedW0() *transposed {
	src := unsafe.SliceData(m.W[0])
	if wt := m.w0t.Load(); wt != nil && wt.version == m.version && wt.src == src {
		return wt
	}
	in, h := m.Sizes[0], m.Sizes[1]
	data := make([]float64, in*h)
	w := m.W[0]
	for r := 0; r < h; r++ {
		row := w[r*in : (r+1)*in]
		for c, v := range row {
			data[c*h+r] = v
		}
	}
	wt := &transposed{version: m.version, src: src, rows: h, data: data}
	m.w0t.Store(wt)
	return wt
}

// ForwardPre finishes a forward pass from the first layer's pre-activation
// (see Pre): the same result as Forward on the corresponding input, up to
// the rounding of the AddInput updates. pre is not modified; the result
// is owned by t. Backward cannot follow ForwardPre, which never sees the
// input (W[0]'s gradient needs it); run Forward for passes to train on.
func (m *MLP) ForwardPre(pre []float64, t *Tape) []float64 {
	if len(pre) != m.Sizes[1] {
		panic(fmt.Sprintf("nn: ForwardPre: pre has %d values, want %d", len(pre), m.Sizes[1]))
	}
	t.fit(m)
	copy(t.buf[1], pre)
	out := m.finish(t)
	t.hasInput = false
	return out
}

// finish runs layers 1.. on t.buf[1], which holds layer 0's
// pre-activation.
func (m *MLP) finish(t *Tape) []float64 {
	L := len(m.Sizes) - 1
	for l := 1; l < L; l++ {
		relu(t.buf[l])
		affine(m.W[l], m.B[l], t.buf[l], t.buf[l+1])
	}
	t.recorded = true
	return t.buf[L]
}

// relu clamps negative values to 0 in place (NaN stays NaN, so a broken
// network stays visibly broken).
func relu(v []float64) {
	for i, x := range v {
		if x < 0 {
			v[i] = 0
		}
	}
}

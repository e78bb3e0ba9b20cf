// Package nn holds small multilayer perceptrons in pure Go for DL2's policy
// and value networks: ReLU hidden layers, a linear output layer, a forward
// pass that records what Backward needs on a reusable Tape, an incremental
// first layer for many passes whose inputs differ in a few coordinates
// (Pre, AddInput, ForwardPre), gradients (Grads), Adam, and a masked
// softmax. Nothing here knows about jobs or GPUs.
//
// An MLP may be read by many goroutines at once (Forward, Pre, AddInput,
// ForwardPre, Backward, each with its own Tape and Grads); changing its
// weights (Adam.Step, UnmarshalJSON, direct writes) must not overlap with
// those.
package nn

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// MLP is a multilayer perceptron: ReLU hidden layers, linear output layer.
//
// Layer l maps a vector of Sizes[l] to one of Sizes[l+1]:
// y = W[l] x + B[l], followed by ReLU unless l is the last layer.
//
// Use an MLP through a pointer (it carries a cache that must not be copied).
type MLP struct {
	Sizes []int       `json:"sizes"` // layer widths, input first, output last (len >= 2)
	W     [][]float64 `json:"w"`     // W[l] is Sizes[l+1] x Sizes[l], row-major
	B     [][]float64 `json:"b"`     // B[l] has Sizes[l+1]

	// version counts changes of the weights made through this package
	// (Adam.Step, UnmarshalJSON) or announced by Changed. AddInput uses
	// the transposed copy of W[0] in w0t only while its version and
	// W[0]'s backing array match; otherwise it rebuilds it.
	version uint64
	w0t     atomic.Pointer[transposed]
}

// transposed is W[0] stored column by column: column i (the weights of
// input coordinate i) is data[i*rows : (i+1)*rows].
type transposed struct {
	version uint64
	src     *float64 // &W[0][0] when built
	rows    int
	data    []float64
}

// New returns an MLP with the given layer widths (input first, output
// last; at least two, each at least 1). Hidden (ReLU) layers get He-normal
// weights, N(0, 2/fan_in); the linear output layer gets the same draw
// scaled by 0.01, so that a softmax over the outputs starts near uniform.
// Biases start at 0. A nil rng means a fixed seed.
func New(sizes []int, rng *rand.Rand) *MLP {
	if len(sizes) < 2 {
		panic(fmt.Sprintf("nn.New: need at least 2 layer sizes, got %v", sizes))
	}
	for _, s := range sizes {
		if s < 1 {
			panic(fmt.Sprintf("nn.New: layer sizes must be >= 1, got %v", sizes))
		}
	}
	if rng == nil {
		rng = rand.New(rand.NewPCG(1, 2))
	}
	L := len(sizes) - 1
	m := &MLP{
		Sizes: append([]int(nil), sizes...),
		W:     make([][]float64, L),
		B:     make([][]float64, L),
	}
	for l := 0; l < L; l++ {
		in, out := sizes[l], sizes[l+1]
		std := math.Sqrt(2 / float64(in))
		if l == L-1 {
			std *= 0.01
		}
		w := make([]float64, out*in)
		for k := range w {
			w[k] = rng.NormFloat64() * std
		}
		m.W[l] = w
		m.B[l] = make([]float64, out)
	}
	return m
}

// Layers is the number of weight layers, len(Sizes)-1.
func (m *MLP) Layers() int { return len(m.Sizes) - 1 }

// In is the input width, Sizes[0].
func (m *MLP) In() int { return m.Sizes[0] }

// Out is the output width, Sizes[len(Sizes)-1].
func (m *MLP) Out() int { return m.Sizes[len(m.Sizes)-1] }

// Clone returns a deep copy (its AddInput cache starts empty).
func (m *MLP) Clone() *MLP {
	c := &MLP{
		Sizes: append([]int(nil), m.Sizes...),
		W:     make([][]float64, len(m.W)),
		B:     make([][]float64, len(m.B)),
	}
	for l := range m.W {
		c.W[l] = append([]float64(nil), m.W[l]...)
	}
	for l := range m.B {
		c.B[l] = append([]float64(nil), m.B[l]...)
	}
	return c
}

// CopyFrom overwrites m's weights and biases with src's (same sizes
// required) without allocating, e.g. to refresh a worker's copy of the
// policy each iteration. It counts as a change (see Changed).
func (m *MLP) CopyFrom(src *MLP) {
	if !sameSizes(m.Sizes, src.Sizes) {
		panic(fmt.Sprintf("nn: CopyFrom: sizes %v, source has %v", m.Sizes, src.Sizes))
	}
	for l := range m.W {
		copy(m.W[l], src.W[l])
		copy(m.B[l], src.B[l])
	}
	m.Changed()
}

// Changed tells m that its weights were modified other than by Adam.Step,
// CopyFrom or UnmarshalJSON (which call it themselves), e.g. by writing
// into W directly. It invalidates the transposed copy of W[0] that
// AddInput uses; forgetting it after an in-place write to W[0] makes
// AddInput use the old first-layer weights. (Forward, Pre, ForwardPre and
// Backward always read W directly and need no call.)
func (m *MLP) Changed() { m.version++ }

// Validate checks that the shapes are consistent and that every weight and
// bias is finite.
func (m *MLP) Validate() error {
	if len(m.Sizes) < 2 {
		return fmt.Errorf("nn: need at least 2 layer sizes, got %d", len(m.Sizes))
	}
	for l, s := range m.Sizes {
		if s < 1 {
			return fmt.Errorf("nn: layer %d has size %d", l, s)
		}
	}
	L := len(m.Sizes) - 1
	if len(m.W) != L || len(m.B) != L {
		return fmt.Errorf("nn: %d layers for sizes %v but %d weight and %d bias arrays", L, m.Sizes, len(m.W), len(m.B))
	}
	for l := 0; l < L; l++ {
		in, out := m.Sizes[l], m.Sizes[l+1]
		if len(m.W[l]) != out*in {
			return fmt.Errorf("nn: W[%d] has %d values, want %d x %d", l, len(m.W[l]), out, in)
		}
		if len(m.B[l]) != out {
			return fmt.Errorf("nn: B[%d] has %d values, want %d", l, len(m.B[l]), out)
		}
		for k, v := range m.W[l] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("nn: W[%d][%d] (row %d, column %d) is %v", l, k, k/in, k%in, v)
			}
		}
		for k, v := range m.B[l] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("nn: B[%d][%d] is %v", l, k, v)
			}
		}
	}
	return nil
}

// Checksum is the hex SHA-256 of len(Sizes) and the sizes (as 64-bit
// little-endian integers) followed by the IEEE-754 bits (64-bit little
// endian) of W[0], B[0], W[1], B[1], ... in order. Equal checksums mean
// bit-identical networks.
func (m *MLP) Checksum() string {
	h := sha256.New()
	var buf [8]byte
	put := func(u uint64) {
		binary.LittleEndian.PutUint64(buf[:], u)
		h.Write(buf[:])
	}
	put(uint64(len(m.Sizes)))
	for _, s := range m.Sizes {
		put(uint64(int64(s)))
	}
	for l := range m.W {
		for _, v := range m.W[l] {
			put(math.Float64bits(v))
		}
		if l < len(m.B) {
			for _, v := range m.B[l] {
				put(math.Float64bits(v))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NumParams is the number of weights and biases.
func (m *MLP) NumParams() int {
	n := 0
	for l := 0; l+1 < len(m.Sizes); l++ {
		n += m.Sizes[l+1]*m.Sizes[l] + m.Sizes[l+1]
	}
	return n
}

// mlpJSON has MLP's exported fields and none of its methods.
type mlpJSON struct {
	Sizes []int       `json:"sizes"`
	W     [][]float64 `json:"w"`
	B     [][]float64 `json:"b"`
}

// MarshalJSON writes {"sizes":…,"w":…,"b":…}. encoding/json writes each
// float64 in the shortest form that parses back to the same bits, so a
// round trip is exact (same Checksum). NaN and ±Inf cannot be written.
func (m *MLP) MarshalJSON() ([]byte, error) {
	return json.Marshal(mlpJSON{Sizes: m.Sizes, W: m.W, B: m.B})
}

// UnmarshalJSON reads what MarshalJSON writes and validates it (shapes;
// values are finite by construction of JSON). It counts as a change (see
// Changed). On error m is left as it was.
func (m *MLP) UnmarshalJSON(data []byte) error {
	var j mlpJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	tmp := MLP{Sizes: j.Sizes, W: j.W, B: j.B}
	if err := tmp.Validate(); err != nil {
		return err
	}
	m.Sizes, m.W, m.B = j.Sizes, j.W, j.B
	m.Changed()
	return nil
}

func sameSizes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

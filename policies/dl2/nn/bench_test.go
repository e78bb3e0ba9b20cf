package nn

import (
	"math/rand/v2"
	"testing"
)

// DL2 at window J=40: 40 jobs x 13 features in, 3*40+1 actions out.
var dl2Sizes = []int{520, 64, 64, 121}

func dl2Net() (*MLP, []float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	return New(dl2Sizes, rng), randVec(rng, dl2Sizes[0])
}

func BenchmarkForward(b *testing.B) {
	m, x := dl2Net()
	t := NewTape(m)
	for b.Loop() {
		m.Forward(x, t)
	}
}

func BenchmarkPre(b *testing.B) {
	m, x := dl2Net()
	pre := make([]float64, dl2Sizes[1])
	for b.Loop() {
		m.Pre(x, pre)
	}
}

// BenchmarkIncremental is one candidate evaluation of DL2's search: three
// input coordinates change (one job's features), then the rest of the
// pass.
func BenchmarkIncremental(b *testing.B) {
	m, x := dl2Net()
	t := NewTape(m)
	pre := make([]float64, dl2Sizes[1])
	m.Pre(x, pre)
	m.transposedW0() // build AddInput's cache outside the timing
	j, sign := 0, 1.0
	for b.Loop() {
		base := 13 * j
		m.AddInput(pre, base, sign*0.5)
		m.AddInput(pre, base+1, sign*1)
		m.AddInput(pre, base+7, -sign*0.25)
		m.ForwardPre(pre, t)
		if j++; j == 40 {
			j = 0
			sign = -sign
		}
	}
}

func BenchmarkBackward(b *testing.B) {
	m, x := dl2Net()
	t, g := NewTape(m), NewGrads(m)
	dOut := randVec(rand.New(rand.NewPCG(3, 4)), dl2Sizes[3])
	m.Forward(x, t)
	for b.Loop() {
		m.Backward(t, dOut, g)
	}
}

// BenchmarkForwardBackward is one training sample: a pass and its
// gradient.
func BenchmarkForwardBackward(b *testing.B) {
	m, x := dl2Net()
	t, g := NewTape(m), NewGrads(m)
	dOut := randVec(rand.New(rand.NewPCG(3, 4)), dl2Sizes[3])
	for b.Loop() {
		m.Forward(x, t)
		m.Backward(t, dOut, g)
	}
}

func BenchmarkAdamStep(b *testing.B) {
	m, _ := dl2Net()
	g := NewGrads(m)
	a := NewAdam(m, 1e-4)
	for b.Loop() {
		a.Step(m, g)
	}
}

func BenchmarkMaskedSoftmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := dl2Sizes[3]
	logits, out, mask := randVec(rng, n), make([]float64, n), make([]bool, n)
	for i := range mask {
		mask[i] = rng.IntN(2) == 0
	}
	for b.Loop() {
		MaskedSoftmax(logits, mask, out)
	}
}

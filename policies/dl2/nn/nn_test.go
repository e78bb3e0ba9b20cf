package nn

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func relErr(a, b float64) float64 {
	return math.Abs(a-b) / math.Max(1e-8, math.Max(math.Abs(a), math.Abs(b)))
}

// testNet is New with a 100x larger output layer and random biases,
// so that tests do not run at the 0.01-scaled output weights and zero
// biases only.
func testNet(sizes []int, seed uint64) *MLP {
	rng := rand.New(rand.NewPCG(seed, 99))
	m := New(sizes, rng)
	L := m.Layers()
	for i := range m.W[L-1] {
		m.W[L-1][i] *= 100
	}
	for l := range m.B {
		for i := range m.B[l] {
			m.B[l][i] = 0.1 * rng.NormFloat64()
		}
	}
	return m
}

func TestGradientCheck(t *testing.T) {
	sizes := []int{7, 5, 4, 3}
	for trial := 0; trial < 5; trial++ {
		rng := rand.New(rand.NewPCG(uint64(trial), 1))
		m := testNet(sizes, uint64(trial))
		x, dOut := randVec(rng, sizes[0]), randVec(rng, sizes[len(sizes)-1])
		tape := NewTape(m)
		f := func() float64 {
			out := m.Forward(x, tape)
			s := 0.0
			for k := range out {
				s += dOut[k] * out[k]
			}
			return s
		}
		f()
		g := NewGrads(m)
		m.Backward(tape, dOut, g)
		const h = 1e-6
		check := func(name string, p, gp []float64) {
			for i := range p {
				old := p[i]
				p[i] = old + h
				fp := f()
				p[i] = old - h
				fm := f()
				p[i] = old
				num := (fp - fm) / (2 * h)
				if e := relErr(num, gp[i]); e > 1e-5 && math.Abs(num-gp[i]) > 1e-9 {
					t.Errorf("trial %d: %s[%d]: backward %.10g, numeric %.10g (rel err %.2g)", trial, name, i, gp[i], num, e)
				}
			}
		}
		for l := range m.W {
			check("W"+itoa(l), m.W[l], g.W[l])
			check("B"+itoa(l), m.B[l], g.B[l])
		}
		// Backward accumulates.
		g2 := NewGrads(m)
		f()
		m.Backward(tape, dOut, g2)
		m.Backward(tape, dOut, g2)
		g.Scale(2)
		for l := range g.W {
			approx(t, "accumulate W", g.W[l], g2.W[l], 1e-12)
			approx(t, "accumulate B", g.B[l], g2.B[l], 1e-12)
		}
	}
}

// TestBackwardInput: BackwardInput's input gradient matches central
// differences, and its weight gradients are Backward's.
func TestBackwardInput(t *testing.T) {
	sizes := []int{6, 5, 4, 2}
	for trial := 0; trial < 5; trial++ {
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		m := testNet(sizes, uint64(trial)+10)
		x, dOut := randVec(rng, sizes[0]), randVec(rng, sizes[len(sizes)-1])
		tape := NewTape(m)
		f := func() float64 {
			out := m.Forward(x, tape)
			s := 0.0
			for k := range out {
				s += dOut[k] * out[k]
			}
			return s
		}
		f()
		g, g2 := NewGrads(m), NewGrads(m)
		dIn := make([]float64, sizes[0])
		m.BackwardInput(tape, dOut, g, dIn)
		m.Backward(tape, dOut, g2)
		for l := range g.W {
			approx(t, "BackwardInput W", g.W[l], g2.W[l], 0)
			approx(t, "BackwardInput B", g.B[l], g2.B[l], 0)
		}
		const h = 1e-6
		for i := range x {
			old := x[i]
			x[i] = old + h
			fp := f()
			x[i] = old - h
			fm := f()
			x[i] = old
			num := (fp - fm) / (2 * h)
			if e := relErr(num, dIn[i]); e > 1e-5 && math.Abs(num-dIn[i]) > 1e-9 {
				t.Errorf("trial %d: dIn[%d]: backward %.10g, numeric %.10g (rel err %.2g)", trial, i, dIn[i], num, e)
			}
		}
	}
}

func TestIncremental(t *testing.T) {
	sizes := []int{30, 16, 12, 9}
	m := testNet(sizes, 7)
	rng := rand.New(rand.NewPCG(2, 3))
	x := randVec(rng, sizes[0])
	t1, t2 := NewTape(m), NewTape(m)
	pre := make([]float64, sizes[1])
	m.Pre(x, pre)
	approx(t, "ForwardPre(Pre(x))", m.Forward(x, t1), m.ForwardPre(pre, t2), 0) // bit-identical
	for step := 0; step < 50; step++ {
		i := rng.IntN(sizes[0])
		d := rng.NormFloat64()
		if step%7 == 0 {
			d = 0
		}
		x[i] += d
		m.AddInput(pre, i, d)
		approx(t, "AddInput", m.Forward(x, t1), m.ForwardPre(pre, t2), 1e-9)
	}
	// A weight change through Adam refreshes AddInput's transposed W[0].
	g := NewGrads(m)
	m.Forward(x, t1)
	m.Backward(t1, randVec(rng, sizes[3]), g)
	NewAdam(m, 0.1).Step(m, g)
	m.Pre(x, pre)
	x[3] += 0.5
	m.AddInput(pre, 3, 0.5)
	approx(t, "AddInput after Step", m.Forward(x, t1), m.ForwardPre(pre, t2), 1e-9)
	// So does Changed after a direct write.
	m.W[0][0*sizes[0]+3] += 1
	m.Changed()
	m.Pre(x, pre)
	x[3] -= 0.25
	m.AddInput(pre, 3, -0.25)
	approx(t, "AddInput after Changed", m.Forward(x, t1), m.ForwardPre(pre, t2), 1e-9)
	// And replacing W[0] altogether needs no Changed.
	m.W[0] = append([]float64(nil), m.W[0]...)
	m.W[0][1*sizes[0]+3] -= 2
	m.Pre(x, pre)
	x[3] += 1
	m.AddInput(pre, 3, 1)
	approx(t, "AddInput after new W[0]", m.Forward(x, t1), m.ForwardPre(pre, t2), 1e-9)
	// Backward refuses a ForwardPre pass.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Backward after ForwardPre did not panic")
			}
		}()
		m.Backward(t2, make([]float64, sizes[3]), g)
	}()
}

func TestTwoLayerNet(t *testing.T) {
	// No hidden layer: the network is affine, Pre is the output.
	m := testNet([]int{4, 3}, 1)
	x := []float64{1, -2, 3, 0.5}
	tape := NewTape(m)
	out := append([]float64(nil), m.Forward(x, tape)...)
	pre := make([]float64, 3)
	m.Pre(x, pre)
	approx(t, "affine net", out, pre, 0)
	for r := 0; r < 3; r++ {
		want := m.B[0][r]
		for c := 0; c < 4; c++ {
			want += m.W[0][r*4+c] * x[c]
		}
		if math.Abs(out[r]-want) > 1e-12 {
			t.Fatalf("out[%d] = %v, want %v", r, out[r], want)
		}
	}
}

func TestMaskedSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for trial := 0; trial < 100; trial++ {
		n := 1 + rng.IntN(20)
		logits, mask, out := randVec(rng, n), make([]bool, n), make([]float64, n)
		scale := []float64{1, 1e3, 1e300}[trial%3]
		for i := range logits {
			logits[i] *= scale
			mask[i] = rng.IntN(3) > 0
		}
		MaskedSoftmax(logits, mask, out)
		s, anyOn := 0.0, false
		for i, p := range out {
			if math.IsNaN(p) || p < 0 || p > 1 {
				t.Fatalf("p[%d] = %v (logits %v)", i, p, logits)
			}
			if !mask[i] && p != 0 {
				t.Fatalf("masked entry %d got %v", i, p)
			}
			s += p
			anyOn = anyOn || mask[i]
		}
		if anyOn && math.Abs(s-1) > 1e-12 {
			t.Fatalf("sum %v", s)
		}
		if !anyOn && s != 0 {
			t.Fatalf("no entry allowed, sum %v", s)
		}
	}
	out := make([]float64, 4)
	MaskedSoftmax([]float64{1e308, -1e308, 1e308, 5}, []bool{true, true, false, true}, out)
	approx(t, "huge", out, []float64{1, 0, 0, 0}, 0)
	MaskedSoftmax([]float64{1000, 1000, 2000, 1000}, []bool{true, true, false, true}, out)
	approx(t, "ties", out, []float64{1. / 3, 1. / 3, 0, 1. / 3}, 1e-15)
	MaskedSoftmax([]float64{math.Inf(1), 3, math.Inf(1), 0}, []bool{true, true, true, false}, out)
	approx(t, "+Inf", out, []float64{0.5, 0, 0.5, 0}, 0)
	MaskedSoftmax([]float64{math.Inf(-1), math.Inf(-1), 7, 0}, []bool{true, true, false, false}, out)
	approx(t, "-Inf", out, []float64{0.5, 0.5, 0, 0}, 0)
	MaskedSoftmax([]float64{1, 2, 3, 4}, []bool{false, false, false, false}, out)
	approx(t, "none", out, []float64{0, 0, 0, 0}, 0)
	// In place, and agrees with the plain formula.
	l := []float64{0.5, -1, 2, 0}
	MaskedSoftmax(l, []bool{true, true, true, true}, l)
	z := math.Exp(0.5) + math.Exp(-1) + math.Exp(2) + 1
	approx(t, "in place", l, []float64{math.Exp(0.5) / z, math.Exp(-1) / z, math.Exp(2) / z, 1 / z}, 1e-15)
}

// TestAdamFitsBlobs trains softmax classification of 4 Gaussian blobs in
// 2-D with cross-entropy; the mean loss must fall below 0.1.
func TestAdamFitsBlobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	centers := [][2]float64{{2, 2}, {-2, 2}, {-2, -2}, {2, -2}}
	const n = 200
	xs, ys := make([][]float64, n), make([]int, n)
	for i := range xs {
		c := i % 4
		xs[i] = []float64{centers[c][0] + 0.5*rng.NormFloat64(), centers[c][1] + 0.5*rng.NormFloat64()}
		ys[i] = c
	}
	m := New([]int{2, 16, 16, 4}, rand.New(rand.NewPCG(1, 1)))
	adam := NewAdam(m, 0.01)
	tape, g := NewTape(m), NewGrads(m)
	p, d := make([]float64, 4), make([]float64, 4)
	mask := []bool{true, true, true, true}
	loss := func() float64 {
		s := 0.0
		for i := range xs {
			MaskedSoftmax(m.Forward(xs[i], tape), mask, p)
			s -= math.Log(p[ys[i]])
		}
		return s / n
	}
	first := loss()
	var last float64
	for step := 1; step <= 300; step++ {
		g.Zero()
		for i := range xs {
			MaskedSoftmax(m.Forward(xs[i], tape), mask, p)
			for k := range d {
				d[k] = p[k] / n // ∂(mean CE)/∂logits = (p - onehot)/n
			}
			d[ys[i]] -= 1.0 / n
			m.Backward(tape, d, g)
		}
		g.ClipNorm(10)
		adam.Step(m, g)
		if step%50 == 0 {
			if last = loss(); last < 0.1 {
				t.Logf("cross-entropy %.3f -> %.4f in %d steps", first, last, step)
				return
			}
		}
	}
	t.Fatalf("cross-entropy %.3f -> %.4f after 300 steps", first, last)
}

func TestJSONRoundTrip(t *testing.T) {
	m := testNet([]int{7, 5, 4, 3}, 5)
	m.W[0][0] = 1.0 / 3
	m.W[0][1] = 5e-324
	m.W[0][2] = -1.7976931348623157e308
	m.B[1][0] = math.Copysign(0, -1)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"sizes":[7,5,4,3],"w":[[`) {
		t.Fatalf("unexpected JSON: %.60s", data)
	}
	var back MLP
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Checksum() != m.Checksum() {
		t.Fatal("checksum changed in the JSON round trip")
	}
	// Also as a field of another value, by pointer and by value.
	type ckpt struct {
		Policy *MLP
		Value  MLP
		Opt    *Adam
	}
	opt := NewAdam(m, 1e-3)
	g := NewGrads(m)
	g.B[0][0] = 1
	opt.Step(m, g)
	data, err = json.Marshal(ckpt{Policy: m, Value: *m.Clone(), Opt: opt})
	if err != nil {
		t.Fatal(err)
	}
	var c ckpt
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if c.Policy.Checksum() != m.Checksum() || c.Value.Checksum() != m.Checksum() {
		t.Fatal("checksum changed in the JSON round trip of a checkpoint")
	}
	if c.Opt.T != 1 || c.Opt.M.B[0][0] != opt.M.B[0][0] || c.Opt.V.B[0][0] != opt.V.B[0][0] {
		t.Fatal("Adam state changed in the JSON round trip")
	}
	// Wrong shapes are refused, and the receiver is left alone.
	keep := back.Checksum()
	for _, bad := range []string{
		`{"sizes":[2,1],"w":[[1,2,3]],"b":[[0]]}`,
		`{"sizes":[2,1],"w":[[1,2]],"b":[[0,0]]}`,
		`{"sizes":[2],"w":[],"b":[]}`,
		`{"sizes":[2,1,1],"w":[[1,2]],"b":[[0]]}`,
		`{"sizes":[2,0],"w":[[]],"b":[[]]}`,
		`{"sizes":[2,1],"w":[[1,"x"]],"b":[[0]]}`,
	} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if back.Checksum() != keep {
		t.Error("a failed UnmarshalJSON changed the network")
	}
}

func TestValidate(t *testing.T) {
	m := New([]int{7, 5, 4, 3}, nil)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	c.W[1][3] = math.NaN()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "W[1][3]") {
		t.Errorf("NaN weight: %v", err)
	}
	c = m.Clone()
	c.B[2][0] = math.Inf(1)
	if err := c.Validate(); err == nil {
		t.Error("Inf bias: no error")
	}
	c = m.Clone()
	c.W[1] = c.W[1][:len(c.W[1])-1]
	if err := c.Validate(); err == nil {
		t.Error("short W[1]: no error")
	}
	c = m.Clone()
	c.B = c.B[:2]
	if err := c.Validate(); err == nil {
		t.Error("missing B[2]: no error")
	}
	c = m.Clone()
	c.Sizes[1] = 6
	if err := c.Validate(); err == nil {
		t.Error("wrong size: no error")
	}
}

func TestCloneIsDeep(t *testing.T) {
	m := New([]int{7, 5, 4, 3}, rand.New(rand.NewPCG(1, 2)))
	sum := m.Checksum()
	c := m.Clone()
	if c.Checksum() != sum {
		t.Fatal("clone differs")
	}
	c.W[0][0] += 1
	c.B[1][0] += 1
	c.Sizes[0] = 99
	if m.Checksum() != sum {
		t.Fatal("changing the clone changed the original")
	}
	// The AddInput cache is not shared either.
	x := make([]float64, 7)
	pre, preC := make([]float64, 5), make([]float64, 5)
	c.Sizes[0] = 7
	m.Pre(x, pre)
	c.Pre(x, preC)
	m.AddInput(pre, 0, 1)
	c.AddInput(preC, 0, 1)
	want := make([]float64, 5)
	x[0] = 1
	c.Pre(x, want)
	approx(t, "clone AddInput", preC, want, 1e-12)
	// CopyFrom brings it back, cache included.
	c.CopyFrom(m)
	if c.Checksum() != sum {
		t.Fatal("CopyFrom")
	}
	c.Pre(make([]float64, 7), preC)
	c.AddInput(preC, 0, 1)
	approx(t, "CopyFrom AddInput", preC, pre, 1e-12)
}

func TestNewAndParams(t *testing.T) {
	sizes := []int{520, 64, 64, 121}
	m := New(sizes, rand.New(rand.NewPCG(1, 2)))
	if got, want := m.NumParams(), 520*64+64+64*64+64+64*121+121; got != want {
		t.Fatalf("NumParams %d, want %d", got, want)
	}
	std := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s / float64(len(v)))
	}
	if s, want := std(m.W[0]), math.Sqrt(2.0/520); math.Abs(s/want-1) > 0.05 {
		t.Errorf("W[0] std %v, want %v", s, want)
	}
	if s, want := std(m.W[2]), 0.01*math.Sqrt(2.0/64); math.Abs(s/want-1) > 0.05 {
		t.Errorf("W[2] std %v, want %v", s, want)
	}
	if New(sizes, rand.New(rand.NewPCG(1, 2))).Checksum() != m.Checksum() {
		t.Error("New is not deterministic for a seed")
	}
	// Near-uniform softmax at the start.
	rng := rand.New(rand.NewPCG(3, 3))
	x := randVec(rng, 520)
	p := make([]float64, 121)
	mask := make([]bool, 121)
	for i := range mask {
		mask[i] = true
	}
	MaskedSoftmax(m.Forward(x, NewTape(m)), mask, p)
	for i, v := range p {
		if math.Abs(v*121-1) > 0.2 {
			t.Fatalf("initial p[%d] = %v, far from 1/121", i, v)
		}
	}
}

func TestGradsOps(t *testing.T) {
	m := New([]int{3, 2, 2}, nil)
	g, o := NewGrads(m), NewGrads(m)
	g.W[0][0], g.B[1][1] = 3, 4
	o.W[0][0], o.B[0][0] = 1, 2
	g.AddScaled(o, 2) // W0[0] = 5, B0[0] = 4, B1[1] = 4
	if g.W[0][0] != 5 || g.B[0][0] != 4 || g.B[1][1] != 4 {
		t.Fatalf("AddScaled: %v %v", g.W, g.B)
	}
	if n := g.ClipNorm(0); math.Abs(n-math.Sqrt(57)) > 1e-12 || g.W[0][0] != 5 {
		t.Fatalf("ClipNorm(0) = %v", n)
	}
	if n := g.ClipNorm(1); math.Abs(n-math.Sqrt(57)) > 1e-12 || math.Abs(g.Norm()-1) > 1e-12 {
		t.Fatalf("ClipNorm(1) = %v, norm after %v", n, g.Norm())
	}
	g.ClipNorm(5) // under the limit: unchanged
	if math.Abs(g.Norm()-1) > 1e-12 {
		t.Fatal("ClipNorm above the norm changed g")
	}
	g.Scale(0)
	if g.Norm() != 0 {
		t.Fatal("Scale(0)")
	}
	g.W[1][1] = 1
	g.Zero()
	if g.Norm() != 0 {
		t.Fatal("Zero")
	}
}

func TestNoAllocs(t *testing.T) {
	m := New([]int{20, 8, 8, 5}, nil)
	tape, g := NewTape(m), NewGrads(m)
	x, dOut, pre := make([]float64, 20), make([]float64, 5), make([]float64, 8)
	m.Pre(x, pre)
	m.AddInput(pre, 0, 1) // builds the transposed W[0]
	n := testing.AllocsPerRun(20, func() {
		m.Forward(x, tape)
		m.Backward(tape, dOut, g)
		m.Pre(x, pre)
		m.AddInput(pre, 3, 0.5)
		m.ForwardPre(pre, tape)
	})
	if n != 0 {
		t.Fatalf("%v allocations per pass", n)
	}
}

// TestConcurrentReaders runs passes on one MLP from several goroutines,
// each with its own Tape, Grads and pre, starting with the AddInput cache
// unbuilt (go test -race checks the sharing).
func TestConcurrentReaders(t *testing.T) {
	m := testNet([]int{30, 16, 12, 9}, 3)
	x := randVec(rand.New(rand.NewPCG(8, 8)), 30)
	want := append([]float64(nil), m.Forward(x, NewTape(m))...)
	errs := make(chan string, 4)
	for w := 0; w < 4; w++ {
		go func() {
			tape, g := NewTape(m), NewGrads(m)
			pre := make([]float64, 16)
			m.Pre(x, pre)
			for i := 0; i < 30; i++ {
				m.AddInput(pre, i, 1)
				m.AddInput(pre, i, -1)
			}
			got := m.ForwardPre(pre, tape)
			for k := range got {
				if math.Abs(got[k]-want[k]) > 1e-9 {
					errs <- "ForwardPre differs"
					return
				}
			}
			m.Forward(x, tape)
			m.Backward(tape, want, g)
			errs <- ""
		}()
	}
	for w := 0; w < 4; w++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

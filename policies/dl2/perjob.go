package dl2

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/rondo-sched/rondo/policies/dl2/nn"
)

// perJob is the weight-shared per-job network (ArchPerJob): the same
// weights see every job of the window, whatever its position.
//
// Job i's row f_i (F = Layout.Features(), Encode's features) is encoded
// as h_i = ReLU(E f_i + e) (Enc, width H). A position holds a job when
// its row is not all zero: Encode writes zeros for an empty position and
// a present job (running or waiting) always has remaining epochs > 0, so
// a nonzero remaining feature (and its one-hot). The context is
// c = [mean of h_i over the n present jobs; n/J] (width H+1; the count
// because a mean alone loses how many jobs there are, which the value
// and the stop need; c = 0, n/J = 0 for an empty window).
//
// The policy (Head, Ctx) gives job i's three logits (+worker, +ps, +both)
// as z_i = W3 ReLU(W2a h_i + W2b c + b2) + b3 (Head: an MLP [2H+1, H2, 3]
// on [h_i; c], W2 = [W2a | W2b]) and the stop logit as Ctx(c) (an MLP
// [H+1, H2, 1]); empty positions get logits 0 (their actions are never
// feasible). The value network (Head nil) has its own encoder and Ctx(c)
// is the value.
type perJob struct {
	Enc  *nn.MLP `json:"enc"`            // [F, H], one layer (ReLU applied here)
	Head *nn.MLP `json:"head,omitempty"` // the policy's per-job head [2H+1, H2, 3]
	Ctx  *nn.MLP `json:"ctx"`            // [H+1, ..., 1]: the stop logit or the value
}

// newPerJob makes a perJob network for f features per job: encoder width
// h, head and context MLP hidden width h2; policy: with the head.
func newPerJob(f, h, h2 int, policy bool, rng *rand.Rand) *perJob {
	p := &perJob{Enc: nn.New([]int{f, h}, rng)}
	// nn.New scales an output layer by 0.01; the encoder is a hidden
	// layer here (He-normal).
	for i := range p.Enc.W[0] {
		p.Enc.W[0][i] *= 100
	}
	p.Enc.Changed()
	if policy {
		p.Head = nn.New([]int{2*h + 1, h2, int(numKinds)}, rng)
	}
	p.Ctx = nn.New([]int{h + 1, h2, 1}, rng)
	return p
}

func (p *perJob) arch() string { return ArchPerJob }

func (p *perJob) parts() []*nn.MLP {
	if p.Head != nil {
		return []*nn.MLP{p.Enc, p.Head, p.Ctx}
	}
	return []*nn.MLP{p.Enc, p.Ctx}
}

func (p *perJob) clone() net {
	c := &perJob{Enc: p.Enc.Clone(), Ctx: p.Ctx.Clone()}
	if p.Head != nil {
		c.Head = p.Head.Clone()
	}
	return c
}

// Checksum is the SHA-256 of "perjob" and the parts' checksums.
func (p *perJob) Checksum() string {
	h := sha256.New()
	fmt.Fprint(h, ArchPerJob)
	for _, m := range p.parts() {
		fmt.Fprintf(h, "/%s", m.Checksum())
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (p *perJob) check(l Layout, out int) error {
	es, cs := p.Enc.Sizes, p.Ctx.Sizes
	if len(es) != 2 || es[0] != l.Features() {
		return fmt.Errorf("encoder %v is not one layer of %d features", es, l.Features())
	}
	H := es[1]
	if cs[0] != H+1 || cs[len(cs)-1] != 1 {
		return fmt.Errorf("context network %v does not take %d inputs to 1", cs, H+1)
	}
	switch {
	case out == 1 && p.Head != nil:
		return fmt.Errorf("a value network with a per-job head")
	case out == 1:
		return nil
	case p.Head == nil:
		return fmt.Errorf("a policy network without its per-job head")
	case out != l.Actions():
		return fmt.Errorf("%d outputs, the layout has %d actions", out, l.Actions())
	}
	if hs := p.Head.Sizes; len(hs) != 3 || hs[0] != 2*H+1 || hs[2] != int(numKinds) {
		return fmt.Errorf("head %v is not [%d, hidden, %d]", hs, 2*H+1, numKinds)
	}
	return nil
}

// dims are F, H and (the policy's) H2.
func (p *perJob) dims() (F, H, H2 int) {
	F, H = p.Enc.Sizes[0], p.Enc.Sizes[1]
	if p.Head != nil {
		H2 = p.Head.Sizes[1]
	}
	return
}

// pjTape is one pass: the present jobs' rows and activations.
type pjTape struct {
	J   int
	idx []int     // window positions holding a job
	x   []float64 // their rows, n×F
	h   []float64 // n×H, after ReLU
	c   []float64 // H+1
	cv  []float64 // H2: W2b c + b2
	g   []float64 // n×H2, after ReLU
	z   []float64 // n×3
	out []float64
	ctx *nn.Tape
	// Backward's scratch.
	dz, dg, dh, dcv, dc, dc2 []float64
}

func (p *perJob) newTape() netTape { return &pjTape{ctx: nn.NewTape(p.Ctx)} }

func (t *pjTape) fit(p *perJob, J int) {
	F, H, H2 := p.dims()
	if t.J == J && len(t.c) == H+1 && len(t.x) == J*F && len(t.g) == J*H2 {
		return
	}
	t.J = J
	t.idx = make([]int, 0, J)
	t.x, t.h, t.dh = make([]float64, J*F), make([]float64, J*H), make([]float64, J*H)
	t.c, t.dc, t.dc2 = make([]float64, H+1), make([]float64, H+1), make([]float64, H+1)
	t.cv, t.dcv = make([]float64, H2), make([]float64, H2)
	t.g, t.dg = make([]float64, J*H2), make([]float64, J*H2)
	t.z, t.dz = make([]float64, 3*J), make([]float64, 3*J)
	if p.Head != nil {
		t.out = make([]float64, 3*J+1)
	} else {
		t.out = make([]float64, 1)
	}
}

func nonzero(row []float64) bool {
	for _, v := range row {
		if v != 0 {
			return true
		}
	}
	return false
}

func reluVec(v []float64) {
	for i, x := range v {
		if x < 0 {
			v[i] = 0
		}
	}
}

// mat is a row-major matrix view: rows × cols with the given stride.
func mat(rows, cols, stride int, data []float64) blas64.General {
	return blas64.General{Rows: rows, Cols: cols, Stride: stride, Data: data}
}

func vec(v []float64) blas64.Vector { return blas64.Vector{N: len(v), Data: v, Inc: 1} }

// w2a and w2b are the head's first layer split into the columns of h_i
// and of c (H2 × H and H2 × (H+1), stride 2H+1).
func w2a(w []float64, H, H2 int) blas64.General { return mat(H2, H, 2*H+1, w) }
func w2b(w []float64, H, H2 int) blas64.General { return mat(H2, H+1, 2*H+1, w[H:]) }

// encode fills t's present rows, h and c from x.
func (p *perJob) encode(x []float64, t *pjTape) int {
	F, H, _ := p.dims()
	if len(x)%F != 0 {
		panic(fmt.Sprintf("dl2: perjob: input of %d values is not rows of %d features", len(x), F))
	}
	J := len(x) / F
	t.fit(p, J)
	t.idx = t.idx[:0]
	for i := 0; i < J; i++ {
		if row := x[i*F : (i+1)*F]; nonzero(row) {
			copy(t.x[len(t.idx)*F:], row)
			t.idx = append(t.idx, i)
		}
	}
	n := len(t.idx)
	clear(t.c)
	if n == 0 {
		return 0
	}
	h := t.h[:n*H]
	for r := 0; r < n; r++ {
		copy(h[r*H:(r+1)*H], p.Enc.B[0])
	}
	blas64.Gemm(blas.NoTrans, blas.Trans, 1, mat(n, F, F, t.x), mat(H, F, F, p.Enc.W[0]), 1, mat(n, H, H, h))
	reluVec(h)
	for r := 0; r < n; r++ {
		blas64.Axpy(1, vec(h[r*H:(r+1)*H]), vec(t.c[:H]))
	}
	inv := 1 / float64(n)
	for k := 0; k < H; k++ {
		t.c[k] *= inv
	}
	t.c[H] = float64(n) / float64(J)
	return n
}

func (p *perJob) Forward(x []float64, tp netTape) []float64 {
	t := tp.(*pjTape)
	n := p.encode(x, t)
	if p.Head == nil {
		t.out[0] = p.Ctx.Forward(t.c, t.ctx)[0]
		return t.out
	}
	_, H, H2 := p.dims()
	clear(t.out)
	if n > 0 {
		W2, W3 := p.Head.W[0], p.Head.W[1]
		copy(t.cv, p.Head.B[0])
		blas64.Gemv(blas.NoTrans, 1, w2b(W2, H, H2), vec(t.c), 1, vec(t.cv))
		g := t.g[:n*H2]
		for r := 0; r < n; r++ {
			copy(g[r*H2:(r+1)*H2], t.cv)
		}
		blas64.Gemm(blas.NoTrans, blas.Trans, 1, mat(n, H, H, t.h), w2a(W2, H, H2), 1, mat(n, H2, H2, g))
		reluVec(g)
		z := t.z[:3*n]
		for r := 0; r < n; r++ {
			copy(z[3*r:3*r+3], p.Head.B[1])
		}
		blas64.Gemm(blas.NoTrans, blas.Trans, 1, mat(n, H2, H2, g), mat(3, H2, H2, W3), 1, mat(n, 3, 3, z))
		for r, i := range t.idx {
			copy(t.out[3*i:3*i+3], z[3*r:3*r+3])
		}
	}
	t.out[3*t.J] = p.Ctx.Forward(t.c, t.ctx)[0]
	return t.out
}

func (p *perJob) Backward(tp netTape, dOut []float64, g netGrads) {
	t := tp.(*pjTape)
	if len(dOut) != len(t.out) {
		panic(fmt.Sprintf("dl2: perjob: Backward: dOut has %d values, want %d", len(dOut), len(t.out)))
	}
	F, H, H2 := p.dims()
	n := len(t.idx)
	gEnc, gCtx := g[0], g[len(g)-1]
	dc := t.dc
	if p.Head == nil {
		p.Ctx.BackwardInput(t.ctx, dOut, gCtx, dc)
	} else {
		p.Ctx.BackwardInput(t.ctx, dOut[3*t.J:], gCtx, dc)
	}
	if n == 0 {
		return
	}
	dh := t.dh[:n*H]
	clear(dh)
	if p.Head != nil {
		gHead := g[1]
		W2, W3 := p.Head.W[0], p.Head.W[1]
		dz := t.dz[:3*n]
		for r, i := range t.idx {
			copy(dz[3*r:3*r+3], dOut[3*i:3*i+3])
		}
		gg := t.g[:n*H2]
		// b3, W3.
		for r := 0; r < n; r++ {
			for k := 0; k < 3; k++ {
				gHead.B[1][k] += dz[3*r+k]
			}
		}
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, mat(n, 3, 3, dz), mat(n, H2, H2, gg), 1, mat(3, H2, H2, gHead.W[1]))
		// Through W3 and the ReLU.
		dg := t.dg[:n*H2]
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, mat(n, 3, 3, dz), mat(3, H2, H2, W3), 0, mat(n, H2, H2, dg))
		for k, a := range gg {
			if !(a > 0) {
				dg[k] = 0
			}
		}
		// b2, W2a, W2b; the context's share.
		clear(t.dcv)
		for r := 0; r < n; r++ {
			blas64.Axpy(1, vec(dg[r*H2:(r+1)*H2]), vec(t.dcv))
		}
		blas64.Axpy(1, vec(t.dcv), vec(gHead.B[0]))
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, mat(n, H2, H2, dg), mat(n, H, H, t.h), 1, w2a(gHead.W[0], H, H2))
		blas64.Ger(1, vec(t.dcv), vec(t.c), w2b(gHead.W[0], H, H2))
		blas64.Gemv(blas.Trans, 1, w2b(W2, H, H2), vec(t.dcv), 1, vec(dc))
		// h_i's own share.
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, mat(n, H2, H2, dg), w2a(W2, H, H2), 0, mat(n, H, H, dh))
	}
	// The mean spreads dc over the present jobs.
	inv := 1 / float64(n)
	for r := 0; r < n; r++ {
		blas64.Axpy(inv, vec(dc[:H]), vec(dh[r*H:(r+1)*H]))
	}
	for k, a := range t.h[:n*H] {
		if !(a > 0) {
			dh[k] = 0
		}
	}
	for r := 0; r < n; r++ {
		blas64.Axpy(1, vec(dh[r*H:(r+1)*H]), vec(gEnc.B[0]))
	}
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, mat(n, H, H, dh), mat(n, F, F, t.x), 1, mat(H, F, F, gEnc.W[0]))
}

// pjInc is the policy's incremental inference: an action on job i
// changes only h_i, so the context's sum, h_i, W2a h_i (kept per job),
// W2b c + b2 and the stop logit are updated, then each job's head
// finishes from its kept W2a h_j: about H2·(H+F) + H2·(H+1) + 4·H2·J
// multiply-adds per action instead of a whole pass.
type pjInc struct {
	p           *perJob
	J, F, H, H2 int
	present     []bool
	h, a        []float64 // J×H: h_j; J×H2: W2a h_j
	sum         []float64 // Σ h_j over the present jobs
	n           int
	c, cv       []float64
	stop        float64
	out         []float64
	ctx         *nn.Tape
}

func (p *perJob) newInc(l Layout) inc {
	F, H, H2 := p.dims()
	J := l.Window
	return &pjInc{p: p, J: J, F: F, H: H, H2: H2, present: make([]bool, J),
		h: make([]float64, J*H), a: make([]float64, J*H2), sum: make([]float64, H),
		c: make([]float64, H+1), cv: make([]float64, H2), out: make([]float64, l.Actions()), ctx: nn.NewTape(p.Ctx)}
}

func (c *pjInc) begin(x []float64) {
	clear(c.sum)
	c.n = 0
	for i := 0; i < c.J; i++ {
		c.present[i] = false
		c.row(i, x)
	}
	c.refresh()
}

// row encodes job i from x and adds it to the sum.
func (c *pjInc) row(i int, x []float64) {
	r := x[i*c.F : (i+1)*c.F]
	if !nonzero(r) {
		c.present[i] = false
		return
	}
	c.present[i] = true
	c.n++
	H, H2 := c.H, c.H2
	h := c.h[i*H : (i+1)*H]
	copy(h, c.p.Enc.B[0])
	blas64.Gemv(blas.NoTrans, 1, mat(H, c.F, c.F, c.p.Enc.W[0]), vec(r), 1, vec(h))
	reluVec(h)
	blas64.Axpy(1, vec(h), vec(c.sum))
	blas64.Gemv(blas.NoTrans, 1, w2a(c.p.Head.W[0], H, H2), vec(h), 0, vec(c.a[i*H2:(i+1)*H2]))
}

func (c *pjInc) update(i int, x []float64) {
	if c.present[i] {
		blas64.Axpy(-1, vec(c.h[i*c.H:(i+1)*c.H]), vec(c.sum))
		c.n--
	}
	c.row(i, x)
	c.refresh()
}

// refresh recomputes c, W2b c + b2 and the stop logit.
func (c *pjInc) refresh() {
	H := c.H
	clear(c.c)
	if c.n > 0 {
		inv := 1 / float64(c.n)
		for k, v := range c.sum {
			c.c[k] = v * inv
		}
		c.c[H] = float64(c.n) / float64(c.J)
	}
	copy(c.cv, c.p.Head.B[0])
	blas64.Gemv(blas.NoTrans, 1, w2b(c.p.Head.W[0], H, c.H2), vec(c.c), 1, vec(c.cv))
	c.stop = c.p.Ctx.Forward(c.c, c.ctx)[0]
}

func (c *pjInc) logits() []float64 {
	H2 := c.H2
	w3, b3 := c.p.Head.W[1], c.p.Head.B[1]
	w0, w1, w2 := w3[:H2], w3[H2:2*H2], w3[2*H2:3*H2]
	cv := c.cv[:H2]
	for j := 0; j < c.J; j++ {
		o := c.out[3*j : 3*j+3]
		if !c.present[j] {
			o[0], o[1], o[2] = 0, 0, 0
			continue
		}
		a := c.a[j*H2 : (j+1)*H2]
		z0, z1, z2 := b3[0], b3[1], b3[2]
		for k, v := range a {
			if v += cv[k]; v > 0 {
				z0 += w0[k] * v
				z1 += w1[k] * v
				z2 += w2[k] * v
			}
		}
		o[0], o[1], o[2] = z0, z1, z2
	}
	c.out[3*c.J] = c.stop
	return c.out
}

package dl2

import (
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/policies/dl2/nn"
)

// Architectures of a model's networks (Model.Arch).
const (
	// ArchMLP is DL2's: an MLP over the whole flattened window, separate
	// weights per job position.
	ArchMLP = "mlp"
	// ArchPerJob shares its weights across job positions: a per-job
	// encoder, a mean-pooled context, a per-job action head (perjob.go).
	ArchPerJob = "perjob"
)

// Archs are the known architectures.
var Archs = []string{ArchMLP, ArchPerJob}

// net is one of a model's two networks over the flattened state x
// (Layout.Inputs() values, job-major): the policy gives Layout.Actions()
// logits in Layout.Action's order, the value network 1 output. Its
// weights are a list of MLPs (parts), so that gradients, Adam, copies and
// checks are shared; how the parts make the output is the architecture's.
type net interface {
	// arch is the architecture (ArchMLP, ArchPerJob).
	arch() string
	// parts are the weights, in a fixed order.
	parts() []*nn.MLP
	// newTape is scratch for Forward and Backward (one goroutine).
	newTape() netTape
	// Forward computes the output for x and records the pass in t; the
	// result is owned by t.
	Forward(x []float64, t netTape) []float64
	// Backward accumulates into g (newGrads) the gradient of
	// sum_k dOut[k]*out[k] for the pass recorded in t.
	Backward(t netTape, dOut []float64, g netGrads)
	// newInc is the policy's incremental inference for layout l (the
	// policy network only).
	newInc(l Layout) inc
	// check checks the dimensions against the layout and the output
	// width (the parts are validated apart).
	check(l Layout, out int) error
	// Checksum identifies the weights bit for bit.
	Checksum() string
	clone() net
}

// netTape is a network's scratch for one pass.
type netTape any

// inc is the policy network's inference over a sequence of states that
// differ in one job's row each: begin(x) from a window's state; after
// window position i's row of x changed (an action on it), update(i, x);
// logits() the policy's output for the current x (owned by the inc).
type inc interface {
	begin(x []float64)
	update(i int, x []float64)
	logits() []float64
}

// netGrads are a network's gradients, one nn.Grads per part.
type netGrads []*nn.Grads

func newGrads(n net) netGrads {
	var g netGrads
	for _, p := range n.parts() {
		g = append(g, nn.NewGrads(p))
	}
	return g
}

func (g netGrads) Zero() {
	for _, p := range g {
		p.Zero()
	}
}

func (g netGrads) Scale(f float64) {
	for _, p := range g {
		p.Scale(f)
	}
}

// ClipNorm scales g to a global L2 norm of at most maxNorm over all the
// parts (the sums in nn.Grads.Norm's order: one part clips exactly as
// nn.Grads.ClipNorm does) and returns the norm before.
func (g netGrads) ClipNorm(maxNorm float64) float64 {
	var s float64
	for _, p := range g {
		for l := range p.W {
			for _, v := range p.W[l] {
				s += v * v
			}
			for _, v := range p.B[l] {
				s += v * v
			}
		}
	}
	n := math.Sqrt(s)
	if maxNorm > 0 && n > maxNorm {
		g.Scale(maxNorm / n)
	}
	return n
}

// netAdam is Adam over a network's parts.
type netAdam []*nn.Adam

func newAdam(n net, lr float64) netAdam {
	var a netAdam
	for _, p := range n.parts() {
		a = append(a, nn.NewAdam(p, lr))
	}
	return a
}

// step takes one descent step of n along g.
func (a netAdam) step(n net, g netGrads) {
	for i, p := range n.parts() {
		a[i].Step(p, g[i])
	}
}

// copyNet overwrites dst's weights with src's (same architecture and sizes).
func copyNet(dst, src net) {
	d, s := dst.parts(), src.parts()
	if len(d) != len(s) {
		panic(fmt.Sprintf("dl2: copying a network of %d parts into one of %d", len(s), len(d)))
	}
	for i := range d {
		d[i].CopyFrom(s[i])
	}
}

// validateNet validates every part (finite weights, consistent shapes)
// and the dimensions.
func validateNet(n net, l Layout, out int) error {
	for _, p := range n.parts() {
		if p == nil {
			return fmt.Errorf("missing part")
		}
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return n.check(l, out)
}

// mlpNet is DL2's network: one MLP over the whole window. It writes and
// reads the MLP's JSON, as model files always had it.
type mlpNet struct{ *nn.MLP }

func (n *mlpNet) arch() string     { return ArchMLP }
func (n *mlpNet) parts() []*nn.MLP { return []*nn.MLP{n.MLP} }
func (n *mlpNet) newTape() netTape { return nn.NewTape(n.MLP) }
func (n *mlpNet) clone() net       { return &mlpNet{n.MLP.Clone()} }

func (n *mlpNet) Forward(x []float64, t netTape) []float64 {
	return n.MLP.Forward(x, t.(*nn.Tape))
}

func (n *mlpNet) Backward(t netTape, dOut []float64, g netGrads) {
	n.MLP.Backward(t.(*nn.Tape), dOut, g[0])
}

func (n *mlpNet) check(l Layout, out int) error {
	if s := n.Sizes; s[0] != l.Inputs() || s[len(s)-1] != out {
		return fmt.Errorf("%v does not match %d inputs, %d outputs", s, l.Inputs(), out)
	}
	return nil
}

// newInc: the first layer's pre-activation is kept and updated for the
// coordinates of the changed row that differ (three per action: share,
// workers, PSs), the other layers run in full.
func (n *mlpNet) newInc(l Layout) inc {
	return &mlpInc{m: n.MLP, f: l.Features(), x: make([]float64, n.Sizes[0]), pre: make([]float64, n.Sizes[1]), tape: nn.NewTape(n.MLP)}
}

type mlpInc struct {
	m      *nn.MLP
	f      int       // features per job
	x, pre []float64 // the input the pre-activation is of
	tape   *nn.Tape
}

func (c *mlpInc) begin(x []float64) {
	copy(c.x, x)
	c.m.Pre(c.x, c.pre)
}

func (c *mlpInc) update(i int, x []float64) {
	for k := i * c.f; k < (i+1)*c.f; k++ {
		if d := x[k] - c.x[k]; d != 0 {
			c.m.AddInput(c.pre, k, d)
			c.x[k] = x[k]
		}
	}
}

func (c *mlpInc) logits() []float64 { return c.m.ForwardPre(c.pre, c.tape) }

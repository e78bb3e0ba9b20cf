package nn

import (
	"fmt"
	"math"
)

// Adam is the Adam optimiser (Kingma & Ba) in the usual bias-corrected
// form: for each parameter p with gradient g,
//
//	m = β1 m + (1-β1) g,  v = β2 v + (1-β2) g²
//	p -= LR/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + Eps)
//
// Zero Beta1, Beta2, Eps mean 0.9, 0.999 and 1e-8. The state (M, V, T)
// is exported so that it can be saved with encoding/json alongside the
// network; M and V are allocated on the first Step if nil.
type Adam struct {
	LR, Beta1, Beta2, Eps float64
	M, V                  *Grads // first and second moment estimates
	T                     int    // steps taken
}

// NewAdam returns Adam with learning rate lr, default β1, β2, ε, and zero
// moments shaped like m.
func NewAdam(m *MLP, lr float64) *Adam {
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, M: NewGrads(m), V: NewGrads(m)}
}

// Step takes one gradient DESCENT step on m along g (to ascend an
// objective, pass its negated gradient). It marks m changed (see
// MLP.Changed). g is not modified.
func (a *Adam) Step(m *MLP, g *Grads) {
	b1, b2, eps := a.Beta1, a.Beta2, a.Eps
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-8
	}
	if a.M == nil {
		a.M = NewGrads(m)
	}
	if a.V == nil {
		a.V = NewGrads(m)
	}
	L := len(m.Sizes) - 1
	if len(g.W) != L || len(a.M.W) != L || len(a.V.W) != L {
		panic(fmt.Sprintf("nn: Adam.Step: network has %d layers, gradients %d, moments %d and %d", L, len(g.W), len(a.M.W), len(a.V.W)))
	}
	a.T++
	// As PyTorch computes it: p -= (LR/c1) · m / (sqrt(v)/sqrt(c2) + Eps).
	c1 := 1 - math.Pow(b1, float64(a.T))
	c2 := 1 - math.Pow(b2, float64(a.T))
	size, rc2 := a.LR/c1, 1/math.Sqrt(c2)
	for l := 0; l < L; l++ {
		adamStep(m.W[l], g.W[l], a.M.W[l], a.V.W[l], b1, b2, eps, size, rc2)
		adamStep(m.B[l], g.B[l], a.M.B[l], a.V.B[l], b1, b2, eps, size, rc2)
	}
	m.Changed()
}

func adamStep(p, g, mm, vv []float64, b1, b2, eps, size, rc2 float64) {
	if len(g) != len(p) || len(mm) != len(p) || len(vv) != len(p) {
		panic("nn: Adam.Step: gradient or moment shaped unlike the network")
	}
	g, mm, vv = g[:len(p)], mm[:len(p)], vv[:len(p)]
	for i := range p {
		gi := g[i]
		mi := b1*mm[i] + (1-b1)*gi
		vi := b2*vv[i] + (1-b2)*gi*gi
		mm[i], vv[i] = mi, vi
		p[i] -= size * mi / (math.Sqrt(vi)*rc2 + eps)
	}
}

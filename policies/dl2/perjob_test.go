package dl2

import (
	"bytes"
	"math"
	"math/rand"
	rand2 "math/rand/v2"
	"strings"
	"testing"
)

// perJobTestNet is a small perjob network with larger output weights and
// random biases, so that the check does not run near zero outputs.
func perJobTestNet(l Layout, policy bool, seed uint64) *perJob {
	rng := rand2.New(rand2.NewPCG(seed, 7))
	p := newPerJob(l.Features(), 6, 5, policy, rng)
	for _, m := range p.parts() {
		last := m.Layers() - 1
		if m != p.Enc {
			for i := range m.W[last] {
				m.W[last][i] *= 30
			}
		}
		for l := range m.B {
			for i := range m.B[l] {
				m.B[l][i] = 0.1 * rng.NormFloat64()
			}
		}
		m.Changed()
	}
	return p
}

// perJobTestInput is a window with empty positions (all-zero rows)
// among present jobs.
func perJobTestInput(l Layout, r *rand.Rand, present int) []float64 {
	x := make([]float64, l.Inputs())
	F := l.Features()
	for _, i := range r.Perm(l.Window)[:present] {
		row := x[i*F : (i+1)*F]
		row[r.Intn(l.Types)] = 1
		for k := l.Types; k < F; k++ {
			row[k] = r.Float64()
		}
	}
	return x
}

// TestPerJobGradientCheck: Backward's gradients of the perjob policy and
// value networks equal central differences, for windows full, partly
// empty and empty.
func TestPerJobGradientCheck(t *testing.T) {
	l := Layout{Window: 5, Types: 3}
	for trial := 0; trial < 8; trial++ {
		r := rand.New(rand.NewSource(int64(trial)))
		for _, policy := range []bool{true, false} {
			p := perJobTestNet(l, policy, uint64(trial))
			out := 1
			if policy {
				out = l.Actions()
			}
			if err := validateNet(p, l, out); err != nil {
				t.Fatal(err)
			}
			x := perJobTestInput(l, r, []int{5, 3, 1, 0, 4, 2, 5, 3}[trial])
			dOut := make([]float64, out)
			for k := range dOut {
				dOut[k] = r.NormFloat64()
			}
			tape := p.newTape()
			f := func() float64 {
				o := p.Forward(x, tape)
				s := 0.0
				for k := range o {
					s += dOut[k] * o[k]
				}
				return s
			}
			f()
			g := newGrads(p)
			p.Backward(tape, dOut, g)
			const h = 1e-6
			nonzeroGrads := 0
			for pi, m := range p.parts() {
				check := func(name string, v, gv []float64) {
					for i := range v {
						old := v[i]
						v[i] = old + h
						fp := f()
						v[i] = old - h
						fm := f()
						v[i] = old
						num := (fp - fm) / (2 * h)
						if gv[i] != 0 {
							nonzeroGrads++
						}
						e := math.Abs(num-gv[i]) / math.Max(1e-8, math.Max(math.Abs(num), math.Abs(gv[i])))
						if e > 1e-5 && math.Abs(num-gv[i]) > 1e-8 {
							t.Errorf("trial %d policy %v part %d %s[%d]: backward %.10g, numeric %.10g", trial, policy, pi, name, i, gv[i], num)
						}
					}
				}
				for k := range m.W {
					check("W", m.W[k], g[pi].W[k])
					check("B", m.B[k], g[pi].B[k])
				}
			}
			if nonzeroGrads == 0 {
				t.Errorf("trial %d: every gradient is zero", trial)
			}
		}
	}
}

// TestPerJobSharesWeights: the perjob policy's logits move with the job:
// permuting the window's positions permutes the jobs' logits and keeps
// the stop logit (up to rounding).
func TestPerJobSharesWeights(t *testing.T) {
	l := Layout{Window: 6, Types: 3}
	p := perJobTestNet(l, true, 3)
	r := rand.New(rand.NewSource(3))
	x := perJobTestInput(l, r, 4)
	perm := r.Perm(l.Window)
	F := l.Features()
	y := make([]float64, len(x))
	for i, j := range perm {
		copy(y[j*F:(j+1)*F], x[i*F:(i+1)*F])
	}
	a := append([]float64(nil), p.Forward(x, p.newTape())...)
	b := p.Forward(y, p.newTape())
	for i, j := range perm {
		for k := 0; k < 3; k++ {
			if math.Abs(a[3*i+k]-b[3*j+k]) > 1e-12 {
				t.Fatalf("job at %d → %d: logit %d %g vs %g", i, j, k, a[3*i+k], b[3*j+k])
			}
		}
	}
	if s := l.StopAction(); math.Abs(a[s]-b[s]) > 1e-12 {
		t.Fatalf("stop %g vs %g", a[s], b[s])
	}
}

// TestPerJobModelFile: a perjob model writes, reads back with the same
// checksum and decisions, and a file edited to another shape or arch is
// refused; the MLP model file keeps its old form (its checksum unchanged
// by Arch).
func TestPerJobModelFile(t *testing.T) {
	m, err := NewArchModel(ArchPerJob, 8, Table1().Names(), 2, []int{16, 12}, 4)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadModel("perjob.json", bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if back.Arch != ArchPerJob || back.Checksum != m.Checksum || back.sum() != m.sum() {
		t.Fatalf("read back as %q, checksum %s vs %s", back.Arch, back.sum(), m.sum())
	}
	r := rand.New(rand.NewSource(4))
	p1, p2 := NewPolicy(m, t.Logf), NewPolicy(back, t.Logf)
	for i := 0; i < 100; i++ {
		servers, jobs := randomSlotJobs(r)
		s1, s2 := NewSlot(servers, jobs, nil), NewSlot(servers, jobs, nil)
		p1.Decide(s1)
		p2.Decide(s2)
		for j := range s1.Alloc {
			if s1.Alloc[j].Workers != s2.Alloc[j].Workers || s1.Alloc[j].PS != s2.Alloc[j].PS {
				t.Fatalf("state %d: the model read back decides otherwise", i)
			}
		}
		if p1.Fallbacks+p2.Fallbacks > 0 {
			t.Fatal("fell back to DRF")
		}
	}
	src := buf.String()
	for name, bad := range map[string]string{
		"mlp arch":      strings.Replace(src, `"arch":"perjob"`, `"arch":"mlp"`, 1),
		"unknown arch":  strings.Replace(src, `"arch":"perjob"`, `"arch":"gnn"`, 1),
		"no arch":       strings.Replace(src, `"arch":"perjob",`, ``, 1),
		"edited weight": strings.Replace(src, `"w":[[`, `"w":[[1e-3,`, 1),
		"wider window":  strings.Replace(src, `"window":8`, `"window":9`, 1),
	} {
		if bad == src {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, err := ReadModel(name, strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// A value network with a head, a policy without: refused.
	odd := m.Clone()
	odd.Policy.(*perJob).Head = nil
	odd.Checksum = odd.sum()
	if err := odd.Validate(); err == nil {
		t.Error("a policy without its head validated")
	}
	// An MLP model's checksum does not cover Arch (files from before it
	// existed validate) and Arch "" reads as "mlp".
	mlp := NewModel(4, Table1().Names(), 2, []int{8}, 3)
	old := mlp.sum()
	mlp.Arch = ""
	if mlp.sum() != old {
		t.Fatal("an MLP model's checksum depends on Arch")
	}
	buf.Reset()
	if err := mlp.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"arch"`) {
		t.Fatal(`an MLP model without Arch wrote "arch"`)
	}
	if _, err := ReadModel("old.json", &buf); err != nil {
		t.Fatal(err)
	}
}

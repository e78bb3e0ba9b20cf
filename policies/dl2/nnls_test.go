package dl2

import (
	"math"
	"math/rand"
	"testing"
)

func TestNNLSKnown(t *testing.T) {
	cases := []struct {
		name string
		A    [][]float64
		b    []float64
		want []float64
	}{
		// The unconstrained solution (2, -1) is cut at x2 = 0:
		// min (x1-2)² + 1 + (x1-1)² gives x1 = 1.5.
		{"bound active", [][]float64{{1, 0}, {0, 1}, {1, 1}}, []float64{2, -1, 1}, []float64{1.5, 0}},
		// Nonnegative unconstrained solution: NNLS is plain least squares.
		{"interior", [][]float64{{1, 0}, {0, 1}, {1, 1}}, []float64{1, 2, 3}, []float64{1, 2}},
		// Everything negative: x = 0.
		{"all zero", [][]float64{{1, 0}, {0, 1}}, []float64{-1, -2}, []float64{0, 0}},
		// Lawson and Hanson's style example with two dependent columns:
		// columns 1 and 3 equal; the fit needs only one of them.
		{"dependent", [][]float64{{1, 1, 1}, {2, 0, 2}, {3, 1, 3}}, []float64{2, 2, 4}, nil},
		// A classic 4x3 case (checked by hand): b = A·(1, 0, 2) exactly.
		{"exact", [][]float64{{1, 2, 0}, {0, 1, 1}, {3, 0, 1}, {1, 1, 1}}, []float64{1, 2, 5, 3}, []float64{1, 0, 2}},
	}
	for _, c := range cases {
		x := NNLS(c.A, c.b)
		checkKKT(t, c.name, c.A, c.b, x)
		for j := range c.want {
			if math.Abs(x[j]-c.want[j]) > 1e-9 {
				t.Errorf("%s: x = %v, want %v", c.name, x, c.want)
				break
			}
		}
	}
}

// checkKKT checks x >= 0 and the optimality conditions: the gradient
// Aᵀ(b - Ax) is <= 0 where x = 0 and 0 where x > 0.
func checkKKT(t *testing.T, name string, A [][]float64, b, x []float64) {
	t.Helper()
	n := len(x)
	r := make([]float64, len(b))
	for i := range A {
		r[i] = b[i]
		for j := 0; j < n; j++ {
			r[i] -= A[i][j] * x[j]
		}
	}
	for j := 0; j < n; j++ {
		var w float64
		for i := range A {
			w += A[i][j] * r[i]
		}
		if x[j] < 0 {
			t.Errorf("%s: x[%d] = %g < 0", name, j, x[j])
		}
		if w > 1e-7 || (x[j] > 0 && math.Abs(w) > 1e-7) {
			t.Errorf("%s: gradient[%d] = %g with x = %v", name, j, w, x)
		}
	}
}

func TestNNLSRandomKKT(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for k := 0; k < 300; k++ {
		m, n := 1+rng.Intn(12), 1+rng.Intn(6)
		A := make([][]float64, m)
		b := make([]float64, m)
		for i := range A {
			A[i] = make([]float64, n)
			for j := range A[i] {
				A[i][j] = rng.NormFloat64()
			}
			b[i] = rng.NormFloat64() * 3
		}
		if k%5 == 0 && n > 1 { // a repeated column
			for i := range A {
				A[i][n-1] = A[i][0]
			}
		}
		checkKKT(t, "random", A, b, NNLS(A, b))
	}
}

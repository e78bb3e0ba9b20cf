package nn

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func TestKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{64, 520}, {64, 64}, {121, 64}, {3, 7}, {1, 1}, {5, 3}} {
		r, c := sh[0], sh[1]
		w, b, x, d := randVec(rng, r*c), randVec(rng, r), randVec(rng, c), randVec(rng, r)
		y1, y2 := make([]float64, r), make([]float64, r)
		affine(w, b, x, y1)
		affineGo(w, b, x, y2)
		approx(t, "affine", y1, y2, 1e-12)
		z1, z2 := make([]float64, c), make([]float64, c)
		matTVec(w, d, z1)
		matTVecGo(w, d, z2)
		approx(t, "matTVec", z1, z2, 1e-12)
		g1, g2 := append([]float64(nil), w...), append([]float64(nil), w...)
		ger(g1, d, x)
		gerGo(g2, d, x)
		approx(t, "ger", g1, g2, 1e-12)
		a1, a2 := append([]float64(nil), b...), append([]float64(nil), b...)
		axpy(0.7, d, a1)
		axpyGo(0.7, d, a2)
		approx(t, "axpy", a1, a2, 1e-12)
	}
}

func approx(t *testing.T, what string, a, b []float64, tol float64) {
	t.Helper()
	for i := range a {
		if d := a[i] - b[i]; d > tol || d < -tol {
			t.Fatalf("%s: [%d] %v vs %v", what, i, a[i], b[i])
		}
	}
}

func benchShapes(b *testing.B, name string, f func(w, bias, x, y, d []float64)) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{64, 520}, {64, 64}, {121, 64}} {
		r, c := sh[0], sh[1]
		w, bias, x, d := randVec(rng, r*c), randVec(rng, r), randVec(rng, c), randVec(rng, r)
		y := make([]float64, r)
		b.Run(name+"/"+itoa(r)+"x"+itoa(c), func(b *testing.B) {
			for b.Loop() {
				f(w, bias, x, y, d)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func BenchmarkKernels(b *testing.B) {
	benchShapes(b, "affine-gonum", func(w, bias, x, y, d []float64) { affine(w, bias, x, y) })
	benchShapes(b, "affine-go", func(w, bias, x, y, d []float64) { affineGo(w, bias, x, y) })
	benchShapes(b, "matTVec-gonum", func(w, bias, x, y, d []float64) { matTVec(w, d, x) })
	benchShapes(b, "matTVec-go", func(w, bias, x, y, d []float64) { matTVecGo(w, d, x) })
	benchShapes(b, "ger-gonum", func(w, bias, x, y, d []float64) { ger(w, d, x) })
	benchShapes(b, "ger-go", func(w, bias, x, y, d []float64) { gerGo(w, d, x) })
	rng := rand.New(rand.NewPCG(7, 8))
	x, y := randVec(rng, 64), randVec(rng, 64)
	b.Run("axpy-gonum/64", func(b *testing.B) {
		for b.Loop() {
			axpy(1e-9, x, y)
		}
	})
	b.Run("axpy-go/64", func(b *testing.B) {
		for b.Loop() {
			axpyGo(1e-9, x, y)
		}
	})
}

// Plain-Go reference forms of the kernels in kernels.go.

func affineGo(w, b, x, y []float64) {
	n := len(x)
	for r := range y {
		y[r] = b[r] + dot(w[r*n:(r+1)*n], x)
	}
}

func dot(a, x []float64) float64 {
	a = a[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += a[i] * x[i]
		s1 += a[i+1] * x[i+1]
		s2 += a[i+2] * x[i+2]
		s3 += a[i+3] * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += a[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func matTVecGo(w, d, y []float64) {
	n := len(y)
	clear(y)
	for r, dr := range d {
		if dr != 0 {
			axpyGo(dr, w[r*n:(r+1)*n], y)
		}
	}
}

func gerGo(w, d, x []float64) {
	n := len(x)
	for r, dr := range d {
		if dr != 0 {
			axpyGo(dr, x, w[r*n:(r+1)*n])
		}
	}
}

func axpyGo(a float64, x, y []float64) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

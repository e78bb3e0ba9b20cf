package nn

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// The dense kernels, on gonum's blas64 (its amd64 assembly). Plain-Go
// forms (four accumulators, kernels_test.go) were about 3x slower at
// DL2's sizes; BenchmarkKernels compares them (see README).

// affine sets y = W x + b, W row-major len(y) x len(x).
func affine(w, b, x, y []float64) {
	copy(y, b)
	blas64.Gemv(blas.NoTrans, 1,
		blas64.General{Rows: len(y), Cols: len(x), Data: w, Stride: len(x)},
		blas64.Vector{N: len(x), Data: x, Inc: 1},
		1, blas64.Vector{N: len(y), Data: y, Inc: 1})
}

// matTVec sets y = Wᵀ d, W row-major len(d) x len(y).
func matTVec(w, d, y []float64) {
	blas64.Gemv(blas.Trans, 1,
		blas64.General{Rows: len(d), Cols: len(y), Data: w, Stride: len(y)},
		blas64.Vector{N: len(d), Data: d, Inc: 1},
		0, blas64.Vector{N: len(y), Data: y, Inc: 1})
}

// ger adds d xᵀ to W (row-major len(d) x len(x)).
func ger(w, d, x []float64) {
	blas64.Ger(1,
		blas64.Vector{N: len(d), Data: d, Inc: 1},
		blas64.Vector{N: len(x), Data: x, Inc: 1},
		blas64.General{Rows: len(d), Cols: len(x), Data: w, Stride: len(x)})
}

// axpy sets y += a x.
func axpy(a float64, x, y []float64) {
	blas64.Axpy(a, blas64.Vector{N: len(x), Data: x, Inc: 1}, blas64.Vector{N: len(y), Data: y, Inc: 1})
}

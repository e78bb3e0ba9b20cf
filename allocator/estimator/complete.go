package estimator

import (
	"errors"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// Options configure matrix completion.
type Options struct {
	// Rank of the interaction term u_i·v_j (0: biases only).
	Rank int
	// Lambda is the ridge penalty on factors and biases.
	Lambda float64
	// Iters is the number of alternating sweeps.
	Iters int
	// NoBias drops the mean and the row and column biases (x_ij ≈ u_i·v_j).
	NoBias bool
	// Seed seeds the factors' initial values.
	Seed uint64
}

// DefaultOptions are the options the error table in docs/estimator.md uses.
var DefaultOptions = Options{Rank: 2, Lambda: 0.1, Iters: 100, Seed: 1}

// Complete fills the unobserved entries of x (observed where mask[i][j])
// with the model
//
//	x_ij ≈ mu + b_i + c_j + u_i·v_j   (u_i, v_j of length Rank)
//
// fitted by alternating ridge regressions on the observed entries, mu being
// their mean (with NoBias: x_ij ≈ u_i·v_j). It returns the full fitted matrix (observed entries included,
// as fitted). Deterministic for a given Seed.
func Complete(x *mat.Dense, mask [][]bool, opt Options) (*mat.Dense, error) {
	m, n := x.Dims()
	if len(mask) != m {
		return nil, errors.New("estimator: mask rows differ from matrix rows")
	}
	for _, r := range mask {
		if len(r) != n {
			return nil, errors.New("estimator: mask columns differ from matrix columns")
		}
	}
	if opt.Rank < 0 {
		return nil, errors.New("estimator: negative rank")
	}
	if opt.Iters <= 0 {
		opt.Iters = DefaultOptions.Iters
	}
	r := opt.Rank
	bias := !opt.NoBias

	var sum float64
	var cnt int
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if mask[i][j] {
				sum += x.At(i, j)
				cnt++
			}
		}
	}
	if cnt == 0 {
		return nil, errors.New("estimator: nothing observed")
	}
	mu := sum / float64(cnt)
	if !bias {
		mu = 0 // plain low-rank model
	}

	xs := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			xs[i*n+j] = x.At(i, j)
		}
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	U := make([][]float64, m)
	V := make([][]float64, n)
	for i := range U {
		U[i] = make([]float64, r)
		for k := range U[i] {
			U[i][k] = 0.1 * rng.NormFloat64()
		}
	}
	for j := range V {
		V[j] = make([]float64, r)
		for k := range V[j] {
			V[j][k] = 0.1 * rng.NormFloat64()
		}
	}
	b := make([]float64, m)
	c := make([]float64, n)

	p := r
	if bias {
		p++
	}
	A := mat.NewSymDense(max(p, 1), nil)
	y := mat.NewVecDense(max(p, 1), nil)
	sol := mat.NewVecDense(max(p, 1), nil)
	var ch mat.Cholesky
	feat := make([]float64, p)

	// solve fits one row's (or column's) factors and bias given the other
	// side: features f_k = other factors (+1 for the bias), target t.
	acc := make([]float64, p*p)
	rhs := make([]float64, p)
	solve := func(each func(fn func(f []float64, t float64)), out []float64, outBias *float64) {
		if p == 0 {
			return
		}
		clear(acc)
		clear(rhs)
		each(func(f []float64, t float64) {
			for a := 0; a < p; a++ {
				fa := f[a]
				row := acc[a*p:]
				for bb := a; bb < p; bb++ {
					row[bb] += fa * f[bb]
				}
				rhs[a] += fa * t
			}
		})
		for a := 0; a < p; a++ {
			for bb := a; bb < p; bb++ {
				v := acc[a*p+bb]
				if a == bb {
					v += opt.Lambda + 1e-9
				}
				A.SetSym(a, bb, v)
			}
			y.SetVec(a, rhs[a])
		}
		if !ch.Factorize(A) {
			return
		}
		if err := ch.SolveVecTo(sol, y); err != nil {
			return
		}
		for k := 0; k < r; k++ {
			out[k] = sol.AtVec(k)
		}
		if bias {
			*outBias = sol.AtVec(r)
		}
	}

	for it := 0; it < opt.Iters; it++ {
		for i := 0; i < m; i++ {
			xr := xs[i*n : (i+1)*n]
			solve(func(fn func([]float64, float64)) {
				for j := 0; j < n; j++ {
					if !mask[i][j] {
						continue
					}
					copy(feat, V[j])
					if bias {
						feat[r] = 1
					}
					fn(feat, xr[j]-mu-c[j])
				}
			}, U[i], &b[i])
		}
		for j := 0; j < n; j++ {
			solve(func(fn func([]float64, float64)) {
				for i := 0; i < m; i++ {
					if !mask[i][j] {
						continue
					}
					copy(feat, U[i])
					if bias {
						feat[r] = 1
					}
					fn(feat, xs[i*n+j]-mu-b[i])
				}
			}, V[j], &c[j])
		}
	}

	out := mat.NewDense(m, n, nil)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			v := mu + b[i] + c[j]
			for k := 0; k < r; k++ {
				v += U[i][k] * V[j][k]
			}
			if math.IsNaN(v) {
				v = mu
			}
			out.Set(i, j, v)
		}
	}
	return out, nil
}

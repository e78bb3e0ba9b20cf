package dl2

import "math"

// NNLS solves min ||A·x - b||₂ subject to x >= 0 (Lawson and Hanson,
// "Solving Least Squares Problems", 1974, ch. 23). A is m rows of n
// columns (row-major, every row of length n). Columns are brought into
// the passive set one at a time, by the largest gradient; a column
// whose unconstrained solution would not be positive (dependent on the
// passive ones) is skipped until the next outer step.
func NNLS(A [][]float64, b []float64) []float64 {
	m := len(A)
	if m == 0 {
		return nil
	}
	n := len(A[0])
	x := make([]float64, n)
	passive := make([]bool, n)
	// Tolerance on the gradient, relative to the problem's scale.
	var scale, bn float64
	for i := range A {
		for j := range A[i] {
			scale = max(scale, math.Abs(A[i][j]))
		}
		bn = max(bn, math.Abs(b[i]))
	}
	tol := 1e-11 * float64(m) * scale * bn

	grad := func() []float64 { // Aᵀ(b - A·x)
		r := make([]float64, m)
		for i := range A {
			r[i] = b[i]
			for j := range x {
				r[i] -= A[i][j] * x[j]
			}
		}
		w := make([]float64, n)
		for j := range w {
			for i := range A {
				w[j] += A[i][j] * r[i]
			}
		}
		return w
	}

	for iter := 0; iter < 3*n+10; iter++ {
		w := grad()
		skip := make([]bool, n)
		var z []float64
		for {
			t := -1
			for j := range w {
				if !passive[j] && !skip[j] && w[j] > tol && (t < 0 || w[j] > w[t]) {
					t = j
				}
			}
			if t < 0 {
				return x
			}
			passive[t] = true
			z = lsqOn(A, b, passive)
			if z[t] > 0 {
				break
			}
			passive[t] = false
			skip[t] = true
		}
		// Inner loop: step back until every passive variable is positive.
		for inner := 0; inner < 3*n+10; inner++ {
			alpha, hit := math.Inf(1), -1
			for j := range z {
				if passive[j] && z[j] <= 0 {
					if a := x[j] / (x[j] - z[j]); a < alpha {
						alpha, hit = a, j
					}
				}
			}
			if hit < 0 {
				break
			}
			for j := range x {
				if passive[j] {
					x[j] += alpha * (z[j] - x[j])
					if j == hit || x[j] <= 0 {
						x[j], passive[j] = 0, false
					}
				}
			}
			z = lsqOn(A, b, passive)
		}
		for j := range x {
			if passive[j] {
				x[j] = max(z[j], 0)
			} else {
				x[j] = 0
			}
		}
	}
	return x
}

// lsqOn solves the unconstrained least squares on the columns in cols
// (others 0) by Householder QR; a column (numerically) dependent on the
// earlier ones gets 0.
func lsqOn(A [][]float64, b []float64, cols []bool) []float64 {
	m, n := len(A), len(cols)
	var idx []int
	for j, ok := range cols {
		if ok {
			idx = append(idx, j)
		}
	}
	k := len(idx)
	// R: m×k copy of the chosen columns, y: copy of b.
	R := make([][]float64, m)
	for i := range R {
		R[i] = make([]float64, k)
		for c, j := range idx {
			R[i][c] = A[i][j]
		}
	}
	y := append([]float64(nil), b...)
	var colNorm float64
	for c := 0; c < k; c++ {
		var s float64
		for i := 0; i < m; i++ {
			s += R[i][c] * R[i][c]
		}
		colNorm = max(colNorm, math.Sqrt(s))
	}
	dep := make([]bool, k)
	row := 0 // next pivot row
	piv := make([]int, k)
	for c := 0; c < k; c++ {
		piv[c] = -1
		if row >= m {
			dep[c] = true
			continue
		}
		var s float64
		for i := row; i < m; i++ {
			s += R[i][c] * R[i][c]
		}
		norm := math.Sqrt(s)
		if norm <= 1e-12*max(colNorm, 1e-300) {
			dep[c] = true
			continue
		}
		alpha := -norm
		if R[row][c] < 0 {
			alpha = norm
		}
		// v = x - alpha·e1, H = I - 2vvᵀ/vᵀv.
		v := make([]float64, m-row)
		for i := row; i < m; i++ {
			v[i-row] = R[i][c]
		}
		v[0] -= alpha
		var vv float64
		for _, e := range v {
			vv += e * e
		}
		if vv > 0 {
			for cc := c; cc < k; cc++ {
				var d float64
				for i := row; i < m; i++ {
					d += v[i-row] * R[i][cc]
				}
				d = 2 * d / vv
				for i := row; i < m; i++ {
					R[i][cc] -= d * v[i-row]
				}
			}
			var d float64
			for i := row; i < m; i++ {
				d += v[i-row] * y[i]
			}
			d = 2 * d / vv
			for i := row; i < m; i++ {
				y[i] -= d * v[i-row]
			}
		}
		piv[c] = row
		row++
	}
	// Back substitution over the independent columns.
	sol := make([]float64, k)
	for c := k - 1; c >= 0; c-- {
		if dep[c] {
			continue
		}
		r := piv[c]
		s := y[r]
		for cc := c + 1; cc < k; cc++ {
			if !dep[cc] {
				s -= R[r][cc] * sol[cc]
			}
		}
		sol[c] = s / R[r][c]
	}
	out := make([]float64, n)
	for c, j := range idx {
		out[j] = sol[c]
	}
	return out
}

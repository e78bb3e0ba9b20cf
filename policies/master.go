package policies

import (
	"errors"
	"math"
)

// errMasterStuck reports a master the dense simplex could not finish (it
// never should; the caller then falls back to Clp).
var errMasterStuck = errors.New("dense master: iteration limit")

// denseMaster solves the Dantzig–Wolfe master
//
//	maximize Σ_p μ_p·t_p  s.t.  Σ_p μ_p·use_pj ≤ cap_j (j < k),  Σ_p μ_p = 1,  μ ≥ 0
//
// with a dense primal simplex. The master has k+1 rows and a few dozen
// columns, so a tableau in Go is far cheaper than building a Clp model each
// pass, and exact enough that the decomposition is not limited by an LP
// solver's 1e-7 tolerances. Column 0 must be feasible: the start basis is
// {μ_0, slacks}. Bland's rule rules out cycling on these degenerate masters.
// It returns μ, the capacity prices λ = ∂value/∂cap (≥ 0) and the value.
func denseMaster(cols []column, capacity []float64) (mu, lambda []float64, value float64, err error) {
	k, p := len(capacity), len(cols)
	rows, width := k+1, p+k // columns: μ_0..μ_{p-1}, then slacks s_0..s_{k-1}
	// Scale each capacity row to rhs 1 (as for Clp): entries stay O(1).
	norm := make([]float64, k)
	for j := range norm {
		norm[j] = math.Max(capacity[j], 1e-12)
	}
	tab := make([][]float64, rows)
	rhs := make([]float64, rows)
	for i := range tab {
		tab[i] = make([]float64, width)
	}
	d := make([]float64, width) // reduced costs c_q − z_q (maximize: enter if > 0)
	basis := make([]int, rows)
	for j := 0; j < k; j++ {
		a0 := cols[0].use[j] / norm[j]
		for q := 1; q < p; q++ {
			tab[j][q] = cols[q].use[j]/norm[j] - a0
		}
		tab[j][p+j] = 1
		rhs[j] = math.Max(capacity[j]/norm[j]-a0, 0) // column 0 is feasible
		basis[j] = p + j
	}
	for q := 0; q < p; q++ {
		tab[k][q] = 1
		d[q] = cols[q].t - cols[0].t
	}
	rhs[k] = 1
	basis[k] = 0
	d[0] = 0
	value = cols[0].t
	const eps = 1e-12
	for iter := 0; iter < 50*(rows+width); iter++ {
		enter := -1
		for q := 0; q < width; q++ {
			if d[q] > eps*math.Max(1, math.Abs(value)) {
				enter = q // Bland: the first improving column
				break
			}
		}
		if enter < 0 {
			mu = make([]float64, p)
			for i, b := range basis {
				if b < p {
					mu[b] = math.Max(rhs[i], 0)
				}
			}
			lambda = make([]float64, k)
			for j := 0; j < k; j++ {
				lambda[j] = math.Max(0, -d[p+j]) / norm[j]
			}
			return mu, lambda, value, nil
		}
		leave, best := -1, math.Inf(1)
		for i := 0; i < rows; i++ {
			if a := tab[i][enter]; a > eps {
				r := rhs[i] / a
				if r < best-eps || (r <= best+eps && leave >= 0 && basis[i] < basis[leave]) {
					leave, best = i, r
				}
			}
		}
		if leave < 0 {
			return nil, nil, 0, errMasterStuck // unbounded: impossible with Σμ = 1
		}
		// Pivot on (leave, enter).
		piv := tab[leave][enter]
		for q := range tab[leave] {
			tab[leave][q] /= piv
		}
		rhs[leave] /= piv
		for i := 0; i < rows; i++ {
			if i == leave {
				continue
			}
			if f := tab[i][enter]; f != 0 {
				for q := range tab[i] {
					tab[i][q] -= f * tab[leave][q]
				}
				rhs[i] -= f * rhs[leave]
				if rhs[i] < 0 && rhs[i] > -1e-12 {
					rhs[i] = 0
				}
			}
		}
		if f := d[enter]; f != 0 {
			for q := range d {
				d[q] -= f * tab[leave][q]
			}
			value += f * rhs[leave]
		}
		basis[leave] = enter
	}
	return nil, nil, 0, errMasterStuck
}

//go:build !noclp

package lp

// #cgo pkg-config: clp
// #include <stdlib.h>
// #include "Clp_C_Interface.h"
//
// // rondo_set_basis copies a basis into a loaded model. Each nonbasic
// // column and row activity moves to the bound its status names (as
// // Clp_setColumnStatus does), and a status naming an infinite bound is
// // corrected to one the variable has, so the dual simplex starts from a
// // consistent point.
// static void rondo_set_basis(Clp_Simplex *m, unsigned char *st, int nc, int nr) {
// 	const double big = 1e30;
// 	for (int i = 0; i < nc + nr; i++) {
// 		double l, u, *v;
// 		if (i < nc) {
// 			l = Clp_columnLower(m)[i]; u = Clp_columnUpper(m)[i]; v = &Clp_primalColumnSolution(m)[i];
// 		} else {
// 			l = Clp_rowLower(m)[i-nc]; u = Clp_rowUpper(m)[i-nc]; v = &Clp_primalRowSolution(m)[i-nc];
// 		}
// 		unsigned char s = st[i];
// 		if (s == 5 && l != u) s = 3;
// 		if (s == 3 && l <= -big) s = u >= big ? 0 : 2;
// 		if (s == 2 && u >= big) s = l <= -big ? 0 : 3;
// 		st[i] = s;
// 		if (s == 3 || s == 5) *v = l;
// 		else if (s == 2) *v = u;
// 		else if (s == 0) *v = 0;
// 	}
// 	Clp_copyinStatus(m, st);
// }
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

func bound(v float64) C.double {
	switch {
	case math.IsInf(v, 1):
		return C.double(math.MaxFloat64)
	case math.IsInf(v, -1):
		return C.double(-math.MaxFloat64)
	}
	return C.double(v)
}

// Solve solves the model with Clp.
func (m *Model) Solve() (*Solution, error) {
	nc, nr := len(m.obj), len(m.rows)
	if nc == 0 {
		return &Solution{Duals: make([]float64, nr)}, nil
	}
	model, err := m.load()
	if err != nil {
		return nil, err
	}
	defer C.Clp_deleteModel(model)
	return solveFromScratch(model, nc, nr)
}

// load builds the model in a new Clp model, which the caller deletes.
func (m *Model) load() (unsafe.Pointer, error) {
	a, err := m.cArrays()
	if err != nil {
		return nil, err
	}
	defer a.free()
	model := C.Clp_newModel()
	C.Clp_setLogLevel(model, 0)
	C.Clp_loadProblem(model, C.int(a.nc), C.int(a.nr), a.start, a.index, a.value, a.colLo, a.colUp, a.obj, a.rowLo, a.rowUp)
	if m.maximize {
		C.Clp_setObjSense(model, -1)
	}
	return model, nil
}

// problem is a model's arrays in C memory, as Clp_loadProblem and
// Cbc_loadProblem take them: the matrix column-major (CSC), then column
// bounds, objective and row bounds. The solvers copy them while loading;
// free releases them. C memory keeps cgo's pointer rules simple.
type problem struct {
	nc, nr                                 int
	start, index                           *C.int
	value, colLo, colUp, obj, rowLo, rowUp *C.double
}

func (m *Model) cArrays() (*problem, error) {
	nc, nr := len(m.obj), len(m.rows)
	// Count entries per column.
	start := make([]C.int, nc+1)
	for _, r := range m.rows {
		for _, j := range r.idx {
			if j < 0 || j >= nc {
				return nil, fmt.Errorf("lp: row refers to variable %d of %d", j, nc)
			}
			start[j+1]++
		}
	}
	for j := 0; j < nc; j++ {
		start[j+1] += start[j]
	}
	nnz := int(start[nc])
	index, value := make([]C.int, max(nnz, 1)), make([]C.double, max(nnz, 1))
	fill := make([]C.int, nc)
	copy(fill, start[:nc])
	for i, r := range m.rows {
		for k, j := range r.idx {
			p := fill[j]
			index[p] = C.int(i)
			value[p] = C.double(r.val[k])
			fill[j]++
		}
	}
	colLo, colUp, obj := make([]C.double, max(nc, 1)), make([]C.double, max(nc, 1)), make([]C.double, max(nc, 1))
	for j := range m.obj {
		colLo[j], colUp[j], obj[j] = bound(m.lo[j]), bound(m.up[j]), C.double(m.obj[j])
	}
	rowLo, rowUp := make([]C.double, max(nr, 1)), make([]C.double, max(nr, 1))
	for i, r := range m.rows {
		rowLo[i], rowUp[i] = bound(r.lo), bound(r.up)
	}
	return &problem{nc: nc, nr: nr,
		start: cArrayInt(start), index: cArrayInt(index), value: cArrayDouble(value),
		colLo: cArrayDouble(colLo), colUp: cArrayDouble(colUp), obj: cArrayDouble(obj),
		rowLo: cArrayDouble(rowLo), rowUp: cArrayDouble(rowUp)}, nil
}

func (a *problem) free() {
	C.free(unsafe.Pointer(a.start))
	C.free(unsafe.Pointer(a.index))
	for _, p := range []*C.double{a.value, a.colLo, a.colUp, a.obj, a.rowLo, a.rowUp} {
		C.free(unsafe.Pointer(p))
	}
}

// solveFromScratch solves a loaded model without using any earlier basis.
func solveFromScratch(model unsafe.Pointer, nc, nr int) (*Solution, error) {
	// Clp is occasionally wrong on small degenerate models: a plain dual
	// simplex from scratch returned non-optimal points, and initialSolve's
	// presolve called a feasible model infeasible. Try initialSolve, then the
	// primal and the dual simplex from scratch, and only then believe a
	// failure.
	C.Clp_initialSolve(model)
	if C.Clp_status(model) != 0 {
		C.Clp_primal(model, 0)
	}
	if C.Clp_status(model) != 0 {
		C.Clp_dual(model, 0)
	}
	switch st := C.Clp_status(model); st {
	case 0:
	case 1:
		return nil, ErrInfeasible
	case 2:
		return nil, ErrUnbounded
	default:
		return nil, fmt.Errorf("lp: Clp stopped with status %d", int(st))
	}
	return solution(model, nc, nr), nil
}

// solution reads an optimal point from a solved model.
func solution(model unsafe.Pointer, nc, nr int) *Solution {
	sol := &Solution{X: make([]float64, nc), Duals: make([]float64, nr), Objective: float64(C.Clp_objectiveValue(model)),
		Iterations: int(C.Clp_numberIterations(model))}
	x := unsafe.Slice(C.Clp_getColSolution(model), nc)
	for j := range sol.X {
		sol.X[j] = float64(x[j])
	}
	if nr > 0 {
		d := unsafe.Slice(C.Clp_getRowPrice(model), nr)
		for i := range sol.Duals {
			sol.Duals[i] = float64(d[i])
		}
	}
	return sol
}

func cArrayDouble(v []C.double) *C.double {
	p := (*C.double)(C.malloc(C.size_t(len(v)) * C.size_t(unsafe.Sizeof(C.double(0)))))
	copy(unsafe.Slice(p, len(v)), v)
	return p
}

func cArrayInt(v []C.int) *C.int {
	p := (*C.int)(C.malloc(C.size_t(len(v)) * C.size_t(unsafe.Sizeof(C.int(0)))))
	copy(unsafe.Slice(p, len(v)), v)
	return p
}

// Live is a model kept loaded in Clp between solves, for column generation:
// columns are added to the solved model and the next solve starts from the
// last optimal basis (the new columns nonbasic at zero) with the primal
// simplex, instead of from scratch. Its first solve starts from a basis
// given by SetBasis, if any. Close releases it.
type Live struct {
	model  unsafe.Pointer
	nc, nr int
	solved bool
	// src reloads the model should the first solve, from a given basis,
	// not end optimal.
	src  *Model
	warm bool
}

// Load copies the model into Clp for incremental solves. The model must have
// at least one variable.
func (m *Model) Load() (*Live, error) {
	if len(m.obj) == 0 {
		return nil, fmt.Errorf("lp: Load of a model without variables")
	}
	model, err := m.load()
	if err != nil {
		return nil, err
	}
	return &Live{model: model, nc: len(m.obj), nr: len(m.rows), src: m}, nil
}

// SetBasis makes the first solve start from b with the dual simplex. Any
// statuses are accepted: Clp repairs a basis with too many or too few
// basic entries, or a singular one, while factorizing; a first solve that
// does not end optimal is redone from scratch on the reloaded model.
func (l *Live) SetBasis(b Basis) error {
	if l.solved {
		return fmt.Errorf("lp: SetBasis after a solve")
	}
	if len(b.Cols) != l.nc || len(b.Rows) != l.nr {
		return fmt.Errorf("lp: basis of %d columns and %d rows for a model of %d and %d", len(b.Cols), len(b.Rows), l.nc, l.nr)
	}
	for i, v := range b.Cols {
		if v > BasisFixed {
			return fmt.Errorf("lp: basis status %d of column %d", v, i)
		}
	}
	for i, v := range b.Rows {
		if v > BasisFixed {
			return fmt.Errorf("lp: basis status %d of row %d", v, i)
		}
	}
	st := (*C.uchar)(C.malloc(C.size_t(l.nc + l.nr)))
	defer C.free(unsafe.Pointer(st))
	all := unsafe.Slice((*uint8)(unsafe.Pointer(st)), l.nc+l.nr)
	copy(all, b.Cols)
	copy(all[l.nc:], b.Rows)
	C.rondo_set_basis(l.model, st, C.int(l.nc), C.int(l.nr))
	l.warm = true
	return nil
}

// Basis is the basis of the last solve (nil slices before one).
func (l *Live) Basis() Basis {
	if !l.solved {
		return Basis{}
	}
	st := unsafe.Slice((*uint8)(unsafe.Pointer(C.Clp_statusArray(l.model))), l.nc+l.nr)
	b := Basis{Cols: make([]uint8, l.nc), Rows: make([]uint8, l.nr)}
	for i, v := range st[:l.nc] {
		b.Cols[i] = v & 7 // the higher bits are Clp's own flags
	}
	for i, v := range st[l.nc:] {
		b.Rows[i] = v & 7
	}
	return b
}

// NumVars is the number of variables, added columns included.
func (l *Live) NumVars() int { return l.nc }

// Close releases the Clp model.
func (l *Live) Close() {
	if l.model != nil {
		C.Clp_deleteModel(l.model)
		l.model = nil
	}
}

// AddColumns appends variables; their indices follow the existing ones.
func (l *Live) AddColumns(cols []Column) error {
	if len(cols) == 0 {
		return nil
	}
	nnz := 0
	for _, c := range cols {
		if len(c.Rows) != len(c.Vals) {
			return fmt.Errorf("lp: AddColumns with mismatched slices")
		}
		for _, r := range c.Rows {
			if r < 0 || r >= l.nr {
				return fmt.Errorf("lp: column refers to row %d of %d", r, l.nr)
			}
		}
		nnz += len(c.Rows)
	}
	n := len(cols)
	lo, up, obj := make([]C.double, n), make([]C.double, n), make([]C.double, n)
	start := make([]C.int, n+1)
	rows := make([]C.int, max(nnz, 1))
	vals := make([]C.double, max(nnz, 1))
	p := 0
	for i, c := range cols {
		lo[i], up[i], obj[i] = bound(c.Lo), bound(c.Up), C.double(c.Obj)
		for k, r := range c.Rows {
			rows[p], vals[p] = C.int(r), C.double(c.Vals[k])
			p++
		}
		start[i+1] = C.int(p)
	}
	pLo, pUp, pObj := cArrayDouble(lo), cArrayDouble(up), cArrayDouble(obj)
	pStart, pRows, pVals := cArrayInt(start), cArrayInt(rows), cArrayDouble(vals)
	C.Clp_addColumns(l.model, C.int(n), pLo, pUp, pObj, pStart, pRows, pVals)
	for _, q := range []unsafe.Pointer{unsafe.Pointer(pLo), unsafe.Pointer(pUp), unsafe.Pointer(pObj),
		unsafe.Pointer(pStart), unsafe.Pointer(pRows), unsafe.Pointer(pVals)} {
		C.free(q)
	}
	l.nc += n
	return nil
}

// Solve solves the model: the first time as Model.Solve does (from the
// basis of SetBasis, with the dual simplex, if one was given), later from
// the last optimal basis with the primal simplex (added columns cannot make
// a primal feasible basis infeasible). Should a warm solve not end optimal,
// it solves from scratch before believing a failure.
func (l *Live) Solve() (*Solution, error) {
	if l.solved {
		C.Clp_primal(l.model, 0)
		if C.Clp_status(l.model) == 0 {
			return solution(l.model, l.nc, l.nr), nil
		}
		return solveFromScratch(l.model, l.nc, l.nr)
	}
	l.solved = true
	src := l.src
	l.src = nil
	if l.warm {
		C.Clp_dual(l.model, 0)
		if C.Clp_status(l.model) == 0 {
			return solution(l.model, l.nc, l.nr), nil
		}
		// Start again without the basis, on a fresh copy of the model.
		model, err := src.load()
		if err != nil {
			return nil, err
		}
		C.Clp_deleteModel(l.model)
		l.model = model
	}
	return solveFromScratch(l.model, l.nc, l.nr)
}

const available = true

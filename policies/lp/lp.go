//go:build !noclp

package lp

// #cgo pkg-config: clp
// #include <stdlib.h>
// #include "Clp_C_Interface.h"
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
	sol := &Solution{X: make([]float64, nc), Duals: make([]float64, nr), Objective: float64(C.Clp_objectiveValue(model))}
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
// simplex, instead of from scratch. Close releases it.
type Live struct {
	model  unsafe.Pointer
	nc, nr int
	solved bool
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
	return &Live{model: model, nc: len(m.obj), nr: len(m.rows)}, nil
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

// Solve solves the model: the first time as Model.Solve does, later from the
// last optimal basis with the primal simplex (added columns cannot make a
// primal feasible basis infeasible). Should the warm solve not end optimal,
// it solves from scratch before believing a failure.
func (l *Live) Solve() (*Solution, error) {
	if l.solved {
		C.Clp_primal(l.model, 0)
		if C.Clp_status(l.model) == 0 {
			return solution(l.model, l.nc, l.nr), nil
		}
	}
	l.solved = true
	return solveFromScratch(l.model, l.nc, l.nr)
}

const available = true

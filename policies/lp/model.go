// Package lp is a small linear-programming layer over COIN-OR Clp (cgo): build
// a model row by row, solve it with the dual simplex, read primal values and
// row duals. Policies use it where their structure gives no faster method.
// Mixed-integer models go to COIN-OR Cbc (SetInteger, SolveMIP in mip.go).
package lp

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Inf is an infinite bound.
var Inf = math.Inf(1)

// ErrInfeasible is returned when the model has no feasible point.
var ErrInfeasible = errors.New("lp: infeasible")

// ErrUnbounded is returned when the objective is unbounded.
var ErrUnbounded = errors.New("lp: unbounded")

type row struct {
	idx    []int
	val    []float64
	lo, up float64
}

// Model is a linear program: bounds and objective per variable, ranged rows.
type Model struct {
	obj, lo, up []float64
	rows        []row
	maximize    bool
	integer     []bool // SetInteger's marks, by variable; missing entries are false
}

// AddVar adds a variable with bounds [lo, up] and objective coefficient obj,
// returning its index.
func (m *Model) AddVar(lo, up, obj float64) int {
	m.lo = append(m.lo, lo)
	m.up = append(m.up, up)
	m.obj = append(m.obj, obj)
	return len(m.obj) - 1
}

// NumVars is the number of variables.
func (m *Model) NumVars() int { return len(m.obj) }

// NumRows is the number of rows.
func (m *Model) NumRows() int { return len(m.rows) }

// SetObj changes a variable's objective coefficient.
func (m *Model) SetObj(v int, c float64) { m.obj[v] = c }

// AddRow adds lo ≤ Σ val[i]·x[idx[i]] ≤ up and returns the row index. The
// slices are copied.
func (m *Model) AddRow(idx []int, val []float64, lo, up float64) int {
	if len(idx) != len(val) {
		panic("lp: AddRow with mismatched slices")
	}
	m.rows = append(m.rows, row{idx: append([]int(nil), idx...), val: append([]float64(nil), val...), lo: lo, up: up})
	return len(m.rows) - 1
}

// Maximize makes the objective a maximization (the default minimizes).
func (m *Model) Maximize() { m.maximize = true }

// Solution is an optimal point, or from SolveMIP the best integer point
// found.
type Solution struct {
	X         []float64
	Duals     []float64 // one per row, in the model's objective sense; nil from SolveMIP
	Objective float64

	// SolveMIP only. Suboptimal: the time limit stopped the search before
	// X was proven optimal (within the gap); X is the best integer solution
	// found. Bound: Cbc's best bound on the optimal objective (≥ Objective
	// when maximizing, ≤ when minimizing).
	Suboptimal bool
	Bound      float64

	// Iterations is the simplex iterations of the solve that produced X
	// (Clp; 0 from SolveMIP).
	Iterations int
}

// Basis statuses, Clp's: a column or a row's slack is basic, or nonbasic
// at its upper or lower bound, free (nonbasic, no finite bound), superbasic
// (nonbasic between its bounds) or fixed.
const (
	BasisFree uint8 = iota
	BasisBasic
	BasisAtUpper
	BasisAtLower
	BasisSuperBasic
	BasisFixed
)

// Basis is a simplex basis: one status per column and per row, in index
// order. Live.Basis reads the last optimal solve's; Live.SetBasis starts a
// newly loaded model's first solve from one (a similar model's, mapped onto
// this one's columns and rows by the caller) instead of from scratch.
type Basis struct{ Cols, Rows []uint8 }

// Column is a variable to add to a Live model: bounds, objective coefficient
// and its entries by row.
type Column struct {
	Lo, Up, Obj float64
	Rows        []int
	Vals        []float64
}

// ErrNoSolution is returned by SolveMIP when the time limit stopped the
// search before it found any integer solution (the model may or may not have
// one).
var ErrNoSolution = errors.New("lp: no integer solution within the time limit")

// SetInteger marks a variable integer for SolveMIP (a binary variable is an
// integer one with bounds [0, 1]). Solve ignores the marks: it solves the LP
// relaxation.
func (m *Model) SetInteger(v int) {
	if v < 0 || v >= len(m.obj) {
		panic(fmt.Sprintf("lp: SetInteger of variable %d of %d", v, len(m.obj)))
	}
	for len(m.integer) < len(m.obj) {
		m.integer = append(m.integer, false)
	}
	m.integer[v] = true
}

// IsInteger reports whether SetInteger marked variable v.
func (m *Model) IsInteger(v int) bool { return v < len(m.integer) && m.integer[v] }

// MIPOptions are SolveMIP's limits. The zero value searches to a proven
// optimum.
type MIPOptions struct {
	// TimeLimit bounds the call's wall-clock time from its start, time
	// spent waiting for other SolveMIP calls included (Cbc's solver runs
	// one call at a time); a call that waited past it still searches for
	// 1 ms. Cbc checks the clock between steps of its search, so a call can
	// run somewhat past the limit. 0: no limit.
	TimeLimit time.Duration
	// Gap stops the search once the best integer solution is within this
	// fraction of the best bound (Cbc's ratioGap: 0.01 accepts a solution
	// within 1% of optimal). 0: Cbc's default, which is to prove optimality
	// (up to its tolerances).
	Gap float64
}

// ErrNoClp is what solving returns in a binary built with -tags noclp
// (`make client`): the client commands need no solver, so that binary
// links neither COIN-OR Clp nor cgo.
var ErrNoClp = errors.New("built without COIN-OR Clp (-tags noclp): use the full rondo binary")

// Available reports whether this build can solve (false with -tags noclp).
func Available() bool { return available }

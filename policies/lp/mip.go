//go:build !noclp

package lp

// #cgo pkg-config: cbc
// #include <stdlib.h>
// #include "Cbc_C_Interface.h"
import "C"

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// cbcMu serializes Cbc's CbcMain0 and CbcMain1, which Cbc_newModel and
// Cbc_solve call: as Debian builds Cbc (without CBC_THREAD_SAFE), they read
// their arguments through process-wide variables (CbcOrClpRead_mode) and set
// others, so two at once can misread each other's parameters. The rest of a
// Cbc model's life (loading, reading the solution, deleting) runs unlocked.
var cbcMu sync.Mutex

// SolveMIP solves the model with the integer marks of SetInteger using
// COIN-OR Cbc (branch and cut), silently and without writing files. It
// returns the best integer solution found: X (integer variables rounded to
// the nearest integer), Objective (Σ obj·X, in the model's sense) and Bound;
// Duals stay nil. Unless the time limit stopped the search first (then
// Suboptimal is set), the solution is optimal within opts.Gap. Errors:
// ErrInfeasible when Cbc proves that no integer solution exists,
// ErrUnbounded when the LP relaxation is unbounded, ErrNoSolution when the
// time limit came before any integer solution.
//
// A model without integer variables is solved as an LP with Clp (as Solve
// does, duals left nil). SolveMIP does not modify the model, and concurrent
// calls are safe; each builds its own Cbc model, but Cbc's solver itself
// runs one call at a time (see MIPOptions.TimeLimit).
func (m *Model) SolveMIP(opts MIPOptions) (*Solution, error) {
	begin := time.Now()
	if opts.TimeLimit < 0 || !(opts.Gap >= 0) || math.IsInf(opts.Gap, 1) {
		return nil, fmt.Errorf("lp: SolveMIP with time limit %v and gap %v", opts.TimeLimit, opts.Gap)
	}
	nc := len(m.obj)
	integers := 0
	for _, b := range m.integer {
		if b {
			integers++
		}
	}
	if integers == 0 {
		s, err := m.Solve()
		if err != nil {
			return nil, err
		}
		s.Duals = nil
		s.Bound = s.Objective
		return s, nil
	}
	a, err := m.cArrays()
	if err != nil {
		return nil, err
	}
	defer a.free()

	cbcMu.Lock()
	model := C.Cbc_newModel()
	cbcMu.Unlock()
	defer C.Cbc_deleteModel(model)
	C.Cbc_loadProblem(model, C.int(a.nc), C.int(a.nr), a.start, a.index, a.value, a.colLo, a.colUp, a.obj, a.rowLo, a.rowUp)
	for j, b := range m.integer {
		if b {
			C.Cbc_setInteger(model, C.int(j))
		}
	}
	if m.maximize {
		C.Cbc_setObjSense(model, -1)
	}
	// Silent: "-log 0" also keeps CbcMain1 from printing its banner.
	C.Cbc_setLogLevel(model, 0)
	setParam(model, "log", "0")
	setParam(model, "slog", "0")
	if opts.Gap > 0 {
		setParam(model, "ratioGap", strconv.FormatFloat(opts.Gap, 'g', -1, 64))
	}

	cbcMu.Lock()
	if opts.TimeLimit > 0 {
		// Cbc measures from the start of its search: give it what is left
		// of the limit after waiting for the lock (and at least 1 ms, as
		// Cbc reads 0 as no limit).
		left := max(opts.TimeLimit-time.Since(begin), time.Millisecond)
		setParam(model, "timeMode", "elapsed")
		setParam(model, "seconds", strconv.FormatFloat(left.Seconds(), 'g', -1, 64))
	}
	C.Cbc_solve(model)
	cbcMu.Unlock()

	best := C.Cbc_bestSolution(model)
	// A search cut short by the time limit proves nothing: given only a
	// few milliseconds (the lock took the rest), Cbc can stop inside its
	// first relaxation and report it infeasible (status 0, secondary 1)
	// without setting its own seconds-limit flag.
	outOfTime := opts.TimeLimit > 0 &&
		(C.Cbc_isSecondsLimitReached(model) != 0 || time.Since(begin) >= opts.TimeLimit)
	switch {
	case C.Cbc_isContinuousUnbounded(model) != 0:
		return nil, ErrUnbounded
	case C.Cbc_isAbandoned(model) != 0:
		return nil, fmt.Errorf("lp: Cbc abandoned the search (numerical difficulties)")
	case best == nil && outOfTime:
		return nil, ErrNoSolution
	case best == nil && C.Cbc_isProvenInfeasible(model) != 0:
		return nil, ErrInfeasible
	case best == nil:
		return nil, fmt.Errorf("lp: Cbc stopped with status %d (secondary %d) and no solution",
			int(C.Cbc_status(model)), int(C.Cbc_secondaryStatus(model)))
	}
	sol := &Solution{X: make([]float64, nc), Bound: float64(C.Cbc_getBestPossibleObjValue(model))}
	x := unsafe.Slice(best, nc)
	for j := range sol.X {
		sol.X[j] = float64(x[j])
		if m.IsInteger(j) {
			sol.X[j] = math.Round(sol.X[j])
		}
		sol.Objective += m.obj[j] * sol.X[j]
	}
	sol.Suboptimal = C.Cbc_isProvenOptimal(model) == 0
	return sol, nil
}

// setParam passes "-name value" to Cbc's command-line solver.
func setParam(model unsafe.Pointer, name, value string) {
	n, v := C.CString(name), C.CString(value)
	C.Cbc_setParameter(model, n, v)
	C.free(unsafe.Pointer(n))
	C.free(unsafe.Pointer(v))
}

package policies

import (
	"fmt"
	"time"

	"github.com/rondo-sched/rondo/policies/names"
)

// solverFunc solves one policy on a validated instance.
type solverFunc func(in *instance, p *Problem) (*Allocation, error)

var registry = map[string]solverFunc{}

// define binds a solver to a name of the pure-Go name registry
// (policies/names), which hcl reads without linking this package.
func define(name string, f solverFunc) {
	if !names.IsCanonical(name) {
		panic("policies: " + name + " is not in policies/names")
	}
	if _, dup := registry[name]; dup {
		panic("policies: defined twice: " + name)
	}
	registry[name] = f
}

// Names lists every policy name (aliases excluded), sorted.
func Names() []string { return names.Names() }

// Canonical resolves an alias; it returns an error for an unknown name.
func Canonical(name string) (string, error) { return names.Canonical(name) }

// Solve validates the problem and runs the named policy.
func Solve(name string, p *Problem) (*Allocation, error) {
	a, _, err := SolveWithHint(name, p, nil)
	return a, err
}

// Hint is what one solve learned that warm-starts the next solve of the
// same policy on a similar problem — a round later, a few jobs arrived or
// left, GPUs changed. Opaque; today the capacity prices of the max-min
// decomposition (LAS), so a recompute starts near the optimum, and for space
// sharing the pair columns that had a share or were basic, which start the
// next restricted LP, and that LP's final basis, from which the next one's
// first solve starts.
type Hint struct {
	policy string
	prices [][]float64
	pairs  []pairCol
	basis  *namedBasis
}

// SolveWithHint is Solve with a warm start from h (nil: cold). It returns
// the hint for the next call. The answer meets the same certified
// tolerance as a cold solve; only the work to reach it changes.
func SolveWithHint(name string, p *Problem, h *Hint) (*Allocation, *Hint, error) {
	return solveWithHint(name, p, h, false)
}

// SolveCold is SolveWithHint whose linear programs start from scratch: the
// hint's capacity prices and pair columns are used, but no simplex basis is
// carried from the last solve. The optimum's value is the same; where a
// space-sharing program has several optima, the point reached is the one
// solves reached before bases were carried (engine.Config.ColdSolve,
// `rondo simulate --cold-solve`).
func SolveCold(name string, p *Problem, h *Hint) (*Allocation, *Hint, error) {
	return solveWithHint(name, p, h, true)
}

func solveWithHint(name string, p *Problem, h *Hint, cold bool) (*Allocation, *Hint, error) {
	canon, err := Canonical(name)
	if err != nil {
		return nil, nil, err
	}
	pairJobs, err := p.validate()
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	in := newIndexedInstance(p, pairJobs)
	in.coldLP = cold
	if h != nil && h.policy == canon {
		in.seedPrices = h.prices
		in.seedPairs = h.pairs
		in.seedBasis = h.basis
	}
	var a *Allocation
	if in.n() == 0 {
		a = newAllocation(canon, in)
	} else {
		a, err = registry[canon](in, p)
		if err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", canon, err)
		}
	}
	a.Policy = canon
	a.finish(in)
	a.SolveMS = float64(time.Since(start).Microseconds()) / 1000
	var next *Hint
	if in.learnedPrices != nil || in.learnedPairs != nil || in.learnedBasis != nil {
		next = &Hint{policy: canon, prices: in.learnedPrices, pairs: in.learnedPairs, basis: in.learnedBasis}
	}
	return a, next, nil
}

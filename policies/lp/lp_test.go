package lp

import (
	"errors"
	"math"
	"testing"
)

func TestSmallLP(t *testing.T) {
	// max 3x + 2y s.t. x + y ≤ 4, x + 3y ≤ 6, x ≤ 10 → x=4, y=0, obj 12.
	var m Model
	x := m.AddVar(0, 10, 3)
	y := m.AddVar(0, Inf, 2)
	m.AddRow([]int{x, y}, []float64{1, 1}, -Inf, 4)
	m.AddRow([]int{x, y}, []float64{1, 3}, -Inf, 6)
	m.Maximize()
	s, err := m.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.X[x]-4) > 1e-9 || math.Abs(s.X[y]) > 1e-9 || math.Abs(s.Objective-12) > 1e-9 {
		t.Fatalf("got x=%v y=%v obj=%v", s.X[x], s.X[y], s.Objective)
	}
	// The first row binds with dual 3 (its price in the objective).
	if math.Abs(math.Abs(s.Duals[0])-3) > 1e-9 {
		t.Fatalf("dual of row 0 = %v, want ±3", s.Duals[0])
	}
}

func TestInfeasible(t *testing.T) {
	var m Model
	x := m.AddVar(0, 1, 1)
	m.AddRow([]int{x}, []float64{1}, 2, Inf)
	if _, err := m.Solve(); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("want ErrInfeasible, got %v", err)
	}
}

func TestUnbounded(t *testing.T) {
	var m Model
	m.AddVar(0, Inf, 1)
	m.Maximize()
	if _, err := m.Solve(); !errors.Is(err, ErrUnbounded) {
		t.Fatalf("want ErrUnbounded, got %v", err)
	}
}

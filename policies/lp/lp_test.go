//go:build !noclp

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

// A live model re-solved after adding a column reaches the optimum of the
// model built with that column from the start.
func TestLiveAddColumns(t *testing.T) {
	// max 3x + 2y s.t. x + y ≤ 4, x + 3y ≤ 6, x ≤ 3: x=3, y=1/3, obj 11.
	var m Model
	x := m.AddVar(0, 3, 3)
	y := m.AddVar(0, Inf, 2)
	m.AddRow([]int{x, y}, []float64{1, 1}, -Inf, 4)
	m.AddRow([]int{x, y}, []float64{1, 3}, -Inf, 6)
	m.Maximize()
	live, err := m.Load()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	s, err := live.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.Objective-11) > 1e-9 {
		t.Fatalf("first solve: obj %v, want 11", s.Objective)
	}
	// z with objective 5 and row coefficients (1, 1) beats x and y: the
	// optimum moves (to z=4, obj 20); compare with a cold solve.
	if err := live.AddColumns([]Column{{Lo: 0, Up: Inf, Obj: 5, Rows: []int{0, 1}, Vals: []float64{1, 1}}}); err != nil {
		t.Fatal(err)
	}
	if live.NumVars() != 3 {
		t.Fatalf("NumVars %d, want 3", live.NumVars())
	}
	warm, err := live.Solve()
	if err != nil {
		t.Fatal(err)
	}
	z := m.AddVar(0, Inf, 5)
	m.rows[0].idx, m.rows[0].val = append(m.rows[0].idx, z), append(m.rows[0].val, 1)
	m.rows[1].idx, m.rows[1].val = append(m.rows[1].idx, z), append(m.rows[1].val, 1)
	cold, err := m.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(warm.Objective-cold.Objective) > 1e-9 || warm.Objective < 11+1e-6 {
		t.Fatalf("warm obj %v, cold %v (was 11 without the column)", warm.Objective, cold.Objective)
	}
	if len(warm.X) != 3 || math.Abs(warm.X[2]-cold.X[2]) > 1e-9 {
		t.Fatalf("warm x %v, cold x %v", warm.X, cold.X)
	}
	if err := live.AddColumns([]Column{{Rows: []int{7}, Vals: []float64{1}}}); err == nil {
		t.Fatal("a column on a missing row was accepted")
	}
}

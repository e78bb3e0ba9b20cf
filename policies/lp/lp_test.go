//go:build !noclp

package lp

import (
	"errors"
	"math"
	"math/rand"
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

// randomLP is max c·x over 0 ≤ x ≤ u with ≤ rows and ≥ rows (which ask
// for some activity); x = 0.05 everywhere is feasible: every row has an
// entry of at least 0.5, the ≥ rows ask for at most 0.01, the ≤ rows allow
// at least 2.
func randomLP(r *rand.Rand, nc, nr int) (*Model, [][]float64) {
	var m Model
	for j := 0; j < nc; j++ {
		m.AddVar(0, 1+9*r.Float64(), r.Float64())
	}
	a := make([][]float64, nr)
	for i := range a {
		a[i] = make([]float64, nc)
		var idx []int
		var val []float64
		must := r.Intn(nc)
		for j := range a[i] {
			if j == must {
				a[i][j] = 0.5 + 0.5*r.Float64()
				idx, val = append(idx, j), append(val, a[i][j])
			} else if r.Float64() < 0.4 {
				a[i][j] = r.Float64()
				idx, val = append(idx, j), append(val, a[i][j])
			}
		}
		if i%4 == 3 {
			m.AddRow(idx, val, 0.01*r.Float64(), Inf)
		} else {
			m.AddRow(idx, val, -Inf, 2+5*r.Float64())
		}
	}
	m.Maximize()
	return &m, a
}

// A live model whose first solve starts from a given basis reaches the
// cold optimum: from its own optimal basis (no iteration), from the basis
// of a model one row and one column smaller or larger (mapped as a caller
// would: entries gone dropped, new ones at their defaults), and from
// nonsense bases (every entry basic, every column at its upper bound),
// which Clp repairs or Solve redoes from scratch. Bad bases are refused.
func TestLiveSetBasis(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	solveLive := func(m *Model, b *Basis) (*Solution, Basis) {
		t.Helper()
		live, err := m.Load()
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if b != nil {
			if err := live.SetBasis(*b); err != nil {
				t.Fatal(err)
			}
		}
		s, err := live.Solve()
		if err != nil {
			t.Fatal(err)
		}
		return s, live.Basis()
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for trial := 0; trial < 200; trial++ {
		nc, nr := 5+r.Intn(30), 3+r.Intn(20)
		m, _ := randomLP(r, nc, nr)
		cold, err := m.Solve()
		if err != nil {
			t.Fatal(err)
		}
		s, b := solveLive(m, nil)
		if !near(s.Objective, cold.Objective) || len(b.Cols) != nc || len(b.Rows) != nr {
			t.Fatalf("trial %d: live %v, cold %v, basis %d/%d", trial, s.Objective, cold.Objective, len(b.Cols), len(b.Rows))
		}
		basic := 0
		for _, v := range append(append([]uint8{}, b.Cols...), b.Rows...) {
			if v == BasisBasic {
				basic++
			}
		}
		if basic != nr {
			t.Fatalf("trial %d: %d basic entries for %d rows", trial, basic, nr)
		}
		again, _ := solveLive(m, &b)
		if !near(again.Objective, cold.Objective) || again.Iterations != 0 {
			t.Fatalf("trial %d: from its own basis %v in %d iterations, cold %v", trial, again.Objective, again.Iterations, cold.Objective)
		}

		// A neighbour: the last row dropped, a column added, bounds moved.
		var n Model
		for j := 0; j < nc; j++ {
			n.AddVar(m.lo[j], m.up[j]*(0.8+0.4*r.Float64()), m.obj[j])
		}
		extra := n.AddVar(0, 3, r.Float64())
		for i := 0; i < nr-1; i++ {
			row := m.rows[i]
			idx := append(append([]int{}, row.idx...), extra)
			val := append(append([]float64{}, row.val...), r.Float64())
			n.AddRow(idx, val, row.lo, row.up)
		}
		n.Maximize()
		nCold, err := n.Solve()
		if err != nil {
			t.Fatal(err)
		}
		nb := Basis{Cols: append(append([]uint8{}, b.Cols...), BasisAtLower), Rows: append([]uint8{}, b.Rows[:nr-1]...)}
		warm, _ := solveLive(&n, &nb)
		if !near(warm.Objective, nCold.Objective) {
			t.Fatalf("trial %d: neighbour from the mapped basis %.12g, cold %.12g", trial, warm.Objective, nCold.Objective)
		}
		// The other way: the neighbour's basis onto the original.
		_, back := solveLive(&n, nil)
		ob := Basis{Cols: back.Cols[:nc], Rows: append(append([]uint8{}, back.Rows...), BasisBasic)}
		if w, _ := solveLive(m, &ob); !near(w.Objective, cold.Objective) {
			t.Fatalf("trial %d: from the neighbour's basis %.12g, cold %.12g", trial, w.Objective, cold.Objective)
		}
		for _, fill := range []uint8{BasisBasic, BasisAtUpper, BasisFree, BasisSuperBasic, BasisFixed} {
			junk := Basis{Cols: make([]uint8, nc), Rows: make([]uint8, nr)}
			for i := range junk.Cols {
				junk.Cols[i] = fill
			}
			for i := range junk.Rows {
				junk.Rows[i] = fill
			}
			if w, _ := solveLive(m, &junk); !near(w.Objective, cold.Objective) {
				t.Fatalf("trial %d: from a basis all %d: %.12g, cold %.12g", trial, fill, w.Objective, cold.Objective)
			}
		}
	}

	m, _ := randomLP(r, 4, 3)
	live, err := m.Load()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if b := live.Basis(); b.Cols != nil {
		t.Fatal("a basis before any solve")
	}
	for _, b := range []Basis{{Cols: make([]uint8, 3), Rows: make([]uint8, 3)}, {Cols: make([]uint8, 4), Rows: make([]uint8, 4)},
		{Cols: []uint8{1, 1, 1, 6}, Rows: make([]uint8, 3)}} {
		if err := live.SetBasis(b); err == nil {
			t.Fatalf("basis %v accepted", b)
		}
	}
	if _, err := live.Solve(); err != nil {
		t.Fatal(err)
	}
	if err := live.SetBasis(Basis{Cols: make([]uint8, 4), Rows: make([]uint8, 3)}); err == nil {
		t.Fatal("SetBasis after a solve accepted")
	}
}

// An infeasible model is reported infeasible from any starting basis.
func TestLiveSetBasisInfeasible(t *testing.T) {
	var m Model
	x := m.AddVar(0, 1, 1)
	y := m.AddVar(0, 1, 1)
	m.AddRow([]int{x, y}, []float64{1, 1}, 3, Inf)
	m.Maximize()
	live, err := m.Load()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.SetBasis(Basis{Cols: []uint8{BasisBasic, BasisAtUpper}, Rows: []uint8{BasisAtLower}}); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Solve(); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("want ErrInfeasible, got %v", err)
	}
}

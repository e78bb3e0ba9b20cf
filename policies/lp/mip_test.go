//go:build !noclp

package lp

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// knapsack: values 60, 100, 120, weights 10, 20, 30, capacity 50. The LP
// relaxation takes the first two and 2/3 of the third (240); the integer
// optimum takes the last two (220).
func knapsack() *Model {
	var m Model
	v, w := []float64{60, 100, 120}, []float64{10, 20, 30}
	idx := make([]int, len(v))
	for i := range v {
		idx[i] = m.AddVar(0, 1, v[i])
		m.SetInteger(idx[i])
	}
	m.AddRow(idx, w, -Inf, 50)
	m.Maximize()
	return &m
}

func TestMIPKnapsack(t *testing.T) {
	m := knapsack()
	lp, err := m.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(lp.Objective-240) > 1e-9 {
		t.Fatalf("LP relaxation: obj %v, want 240", lp.Objective)
	}
	s, err := m.SolveMIP(MIPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Objective != 220 || s.X[0] != 0 || s.X[1] != 1 || s.X[2] != 1 {
		t.Fatalf("got x=%v obj=%v, want x=[0 1 1] obj 220", s.X, s.Objective)
	}
	if s.Suboptimal || math.Abs(s.Bound-220) > 1e-6 || s.Duals != nil {
		t.Fatalf("suboptimal %v, bound %v, duals %v", s.Suboptimal, s.Bound, s.Duals)
	}
}

func TestMIPMinimize(t *testing.T) {
	// min 3x + 5y s.t. 2x + 4y ≥ 7, x, y ≥ 0 integer: (0, 2) costs 10, (2, 1)
	// 11, (4, 0) 12; the LP relaxation takes y = 7/4 (8.75).
	var m Model
	x := m.AddVar(0, Inf, 3)
	y := m.AddVar(0, Inf, 5)
	m.AddRow([]int{x, y}, []float64{2, 4}, 7, Inf)
	m.SetInteger(x)
	m.SetInteger(y)
	if lp, err := m.Solve(); err != nil || math.Abs(lp.Objective-8.75) > 1e-9 {
		t.Fatalf("LP relaxation: %+v, %v; want obj 8.75", lp, err)
	}
	s, err := m.SolveMIP(MIPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Objective != 10 || s.X[x] != 0 || s.X[y] != 2 || s.Suboptimal {
		t.Fatalf("got %+v, want x=0 y=2 obj 10", s)
	}
}

func TestMIPInfeasible(t *testing.T) {
	// 2x = 1: the relaxation has x = 1/2, no integer x fits.
	var m Model
	x := m.AddVar(0, 10, 1)
	m.AddRow([]int{x}, []float64{2}, 1, 1)
	m.SetInteger(x)
	if _, err := m.Solve(); err != nil {
		t.Fatalf("relaxation: %v", err)
	}
	if _, err := m.SolveMIP(MIPOptions{}); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("want ErrInfeasible, got %v", err)
	}
}

func TestMIPUnbounded(t *testing.T) {
	var m Model
	x := m.AddVar(0, Inf, 1)
	y := m.AddVar(0, Inf, 1)
	m.AddRow([]int{x, y}, []float64{1, -1}, -Inf, 3)
	m.SetInteger(x)
	m.Maximize()
	if _, err := m.SolveMIP(MIPOptions{}); !errors.Is(err, ErrUnbounded) {
		t.Fatalf("want ErrUnbounded, got %v", err)
	}
}

// Without integer marks SolveMIP solves the LP, without duals: x = 6.
func TestMIPNoIntegers(t *testing.T) {
	var m Model
	x := m.AddVar(0, 10, 3)
	y := m.AddVar(0, Inf, 2)
	m.AddRow([]int{x, y}, []float64{1, 3}, -Inf, 6)
	m.Maximize()
	s, err := m.SolveMIP(MIPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.Objective-18) > 1e-9 || s.Duals != nil || s.Suboptimal || math.Abs(s.Bound-18) > 1e-9 {
		t.Fatalf("got %+v, want obj 18, bound 18, no duals", s)
	}
}

func TestMIPBadArguments(t *testing.T) {
	m := knapsack()
	for _, o := range []MIPOptions{{TimeLimit: -time.Second}, {Gap: -0.1}, {Gap: math.NaN()}} {
		if _, err := m.SolveMIP(o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SetInteger of a missing variable did not panic")
		}
	}()
	m.SetInteger(3)
}

// assignment is an instance of: put each job on one server, within the
// servers' capacities, at the least total cost (or the most total value).
type assignment struct {
	weight   []float64   // by job
	capacity []float64   // by server
	cost     [][]float64 // by job, server
	maximize bool
}

func randomAssignment(r *rand.Rand, jobs, servers int, maximize bool) assignment {
	a := assignment{weight: make([]float64, jobs), capacity: make([]float64, servers), cost: make([][]float64, jobs), maximize: maximize}
	for j := range a.weight {
		a.weight[j] = float64(1 + r.Intn(5))
		a.cost[j] = make([]float64, servers)
		for s := range a.cost[j] {
			a.cost[j][s] = float64(r.Intn(21))
		}
	}
	for s := range a.capacity {
		a.capacity[s] = float64(4 + r.Intn(7))
	}
	return a
}

// model has binary x[j*servers+s]: job j on server s.
func (a assignment) model() *Model {
	var m Model
	jobs, servers := len(a.weight), len(a.capacity)
	for j := 0; j < jobs; j++ {
		for s := 0; s < servers; s++ {
			m.SetInteger(m.AddVar(0, 1, a.cost[j][s]))
		}
	}
	for j := 0; j < jobs; j++ {
		idx, val := make([]int, servers), make([]float64, servers)
		for s := range idx {
			idx[s], val[s] = j*servers+s, 1
		}
		m.AddRow(idx, val, 1, 1)
	}
	for s := 0; s < servers; s++ {
		idx, val := make([]int, jobs), make([]float64, jobs)
		for j := range idx {
			idx[j], val[j] = j*servers+s, a.weight[j]
		}
		m.AddRow(idx, val, -Inf, a.capacity[s])
	}
	if a.maximize {
		m.Maximize()
	}
	return &m
}

// bruteForce tries every assignment; ok is false when none fits.
func (a assignment) bruteForce() (best float64, ok bool) {
	jobs, servers := len(a.weight), len(a.capacity)
	on := make([]int, jobs)
	for {
		load := make([]float64, servers)
		c := 0.0
		for j, s := range on {
			load[s] += a.weight[j]
			c += a.cost[j][s]
		}
		fits := true
		for s := range load {
			fits = fits && load[s] <= a.capacity[s]
		}
		if fits && (!ok || (a.maximize && c > best) || (!a.maximize && c < best)) {
			best, ok = c, true
		}
		j := 0
		for j < jobs && on[j] == servers-1 {
			on[j] = 0
			j++
		}
		if j == jobs {
			return best, ok
		}
		on[j]++
	}
}

// check compares SolveMIP's answer with the brute force's and checks that X
// is an assignment within the capacities whose objective is Objective.
func (a assignment) check(s *Solution, err error, want float64, ok bool) error {
	if !ok {
		if !errors.Is(err, ErrInfeasible) {
			return errors.New("no assignment fits, SolveMIP did not say ErrInfeasible")
		}
		return nil
	}
	if err != nil {
		return err
	}
	if s.Objective != want || s.Suboptimal {
		return errors.New("objective differs from the brute force's")
	}
	jobs, servers := len(a.weight), len(a.capacity)
	load := make([]float64, servers)
	c := 0.0
	for j := 0; j < jobs; j++ {
		n := 0.0
		for k := 0; k < servers; k++ {
			x := s.X[j*servers+k]
			if x != 0 && x != 1 {
				return errors.New("x not binary")
			}
			n += x
			load[k] += a.weight[j] * x
			c += a.cost[j][k] * x
		}
		if n != 1 {
			return errors.New("a job not on exactly one server")
		}
	}
	for k := range load {
		if load[k] > a.capacity[k] {
			return errors.New("a server over capacity")
		}
	}
	if c != s.Objective {
		return errors.New("Objective is not the cost of X")
	}
	return nil
}

func assignments() []assignment {
	r := rand.New(rand.NewSource(42))
	var out []assignment
	for i := 0; i < 24; i++ {
		out = append(out, randomAssignment(r, 6, 3, i%2 == 1))
	}
	return out
}

func TestMIPAssignmentBruteForce(t *testing.T) {
	feasible := 0
	for i, a := range assignments() {
		want, ok := a.bruteForce()
		if ok {
			feasible++
		}
		s, err := a.model().SolveMIP(MIPOptions{})
		if e := a.check(s, err, want, ok); e != nil {
			t.Errorf("instance %d (maximize %v): %v; brute force %v (feasible %v), SolveMIP %+v, %v", i, a.maximize, e, want, ok, s, err)
		}
	}
	// The instances include both kinds.
	if feasible < 12 || feasible == len(assignments()) {
		t.Fatalf("%d of %d instances feasible", feasible, len(assignments()))
	}
}

// Concurrent calls, on shared models too, each give the brute force's answer.
func TestMIPConcurrent(t *testing.T) {
	as := assignments()
	models := make([]*Model, len(as))
	want := make([]float64, len(as))
	ok := make([]bool, len(as))
	for i, a := range as {
		models[i] = a.model()
		want[i], ok[i] = a.bruteForce()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(as))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := range as {
				i := (k + 3*g) % len(as)
				s, err := models[i].SolveMIP(MIPOptions{})
				if e := as[i].check(s, err, want[i], ok[i]); e != nil {
					errs <- fmt.Errorf("instance %d: %w", i, e)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// marketSplit is a Cornuéjols–Dawande market split instance: binary x with
// rows Σ a_ij x_j = ⌊Σ_j a_ij / 2⌋, a_ij in [0, 100). These are hard for
// branch and bound (minutes for Cbc at 5 rows and 40 variables). With slack
// the rows get continuous slacks s⁺ − s⁻ whose sum is minimized, so x = 0
// is feasible and only the optimum is hard.
func marketSplit(seed int64, rows, n int, slack bool) *Model {
	r := rand.New(rand.NewSource(seed))
	var m Model
	for j := 0; j < n; j++ {
		m.SetInteger(m.AddVar(0, 1, 0))
	}
	for i := 0; i < rows; i++ {
		idx, val := make([]int, n), make([]float64, n)
		sum := 0.0
		for j := range idx {
			idx[j], val[j] = j, float64(r.Intn(100))
			sum += val[j]
		}
		if slack {
			idx = append(idx, m.AddVar(0, Inf, 1), m.AddVar(0, Inf, 1))
			val = append(val, 1, -1)
		}
		b := math.Floor(sum / 2)
		m.AddRow(idx, val, b, b)
	}
	return &m
}

func TestMIPTimeLimit(t *testing.T) {
	const limit = 200 * time.Millisecond
	// Generous: Cbc checks the clock between steps of its search.
	const late = 1500 * time.Millisecond

	m := marketSplit(1, 5, 40, true)
	start := time.Now()
	s, err := m.SolveMIP(MIPOptions{TimeLimit: limit})
	if took := time.Since(start); took > limit+late {
		t.Errorf("with slack: took %v, limit %v", took, limit)
	}
	if err != nil {
		t.Fatalf("with slack: %v", err)
	}
	if !s.Suboptimal {
		t.Fatalf("with slack: solved to optimality within %v (obj %v); the test needs a harder instance", limit, s.Objective)
	}
	if s.Objective < s.Bound-1e-6 {
		t.Errorf("objective %v below the bound %v", s.Objective, s.Bound)
	}
	// X is feasible: binary x, and the slacks make up each row.
	for j := 0; j < 40; j++ {
		if s.X[j] != 0 && s.X[j] != 1 {
			t.Fatalf("x[%d] = %v", j, s.X[j])
		}
	}
	for i, r := range m.rows {
		act := 0.0
		for k, j := range r.idx {
			act += r.val[k] * s.X[j]
		}
		if math.Abs(act-r.lo) > 1e-6 {
			t.Errorf("row %d: activity %v, want %v", i, act, r.lo)
		}
	}

	m = marketSplit(1, 5, 40, false)
	start = time.Now()
	_, err = m.SolveMIP(MIPOptions{TimeLimit: limit})
	if took := time.Since(start); took > limit+late {
		t.Errorf("without slack: took %v, limit %v", took, limit)
	}
	if !errors.Is(err, ErrNoSolution) {
		t.Fatalf("without slack: want ErrNoSolution, got %v", err)
	}
}

// Concurrent time-limited calls wait for each other within their limits.
func TestMIPTimeLimitConcurrent(t *testing.T) {
	const limit = 200 * time.Millisecond
	const late = 1500 * time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := marketSplit(1, 5, 40, true)
			start := time.Now()
			_, err := m.SolveMIP(MIPOptions{TimeLimit: limit})
			if took := time.Since(start); took > limit+late {
				errs <- fmt.Errorf("took %v, limit %v", took, limit)
			}
			if err != nil && !errors.Is(err, ErrNoSolution) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestMIPGap(t *testing.T) {
	// A multidimensional knapsack: 10 rows, 100 binary items.
	r := rand.New(rand.NewSource(1))
	var m Model
	for j := 0; j < 100; j++ {
		m.SetInteger(m.AddVar(0, 1, float64(10+r.Intn(90))))
	}
	for i := 0; i < 10; i++ {
		idx, val := make([]int, 100), make([]float64, 100)
		sum := 0.0
		for j := range idx {
			idx[j], val[j] = j, float64(1+r.Intn(100))
			sum += val[j]
		}
		m.AddRow(idx, val, -Inf, sum/2)
	}
	m.Maximize()
	opt, err := m.SolveMIP(MIPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const gap = 0.01
	s, err := m.SolveMIP(MIPOptions{Gap: gap})
	if err != nil {
		t.Fatal(err)
	}
	if s.Suboptimal || s.Objective > opt.Objective || s.Bound < opt.Objective-1e-6 || s.Bound-s.Objective > gap*s.Bound+1e-6 {
		t.Fatalf("gap %v: obj %v, bound %v, suboptimal %v; optimum %v", gap, s.Objective, s.Bound, s.Suboptimal, opt.Objective)
	}
}

// Cbc prints nothing and writes no files: a child test process solves in
// an empty directory, which stays empty, and prints only PASS.
func TestMIPSilent(t *testing.T) {
	if os.Getenv("LP_MIP_SILENT_CHILD") == "1" {
		for _, o := range []MIPOptions{{}, {Gap: 0.01}} {
			if _, err := knapsack().SolveMIP(o); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := marketSplit(1, 5, 40, true).SolveMIP(MIPOptions{TimeLimit: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		var m Model
		x := m.AddVar(0, 10, 1)
		m.AddRow([]int{x}, []float64{2}, 1, 1)
		m.SetInteger(x)
		if _, err := m.SolveMIP(MIPOptions{}); !errors.Is(err, ErrInfeasible) {
			t.Fatal(err)
		}
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMIPSilent$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LP_MIP_SILENT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "PASS\n" {
		t.Fatalf("child: %v, output %q", err, out)
	}
	if files, err := os.ReadDir(dir); err != nil || len(files) != 0 {
		t.Fatalf("child wrote into its directory: %v %v", files, err)
	}
}

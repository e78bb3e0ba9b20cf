package policies

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"
)

// sessionOf is a session holding p's jobs, at tolerance tol (0: the
// default).
func sessionOf(t *testing.T, p *Problem, tol float64) *LASSession {
	t.Helper()
	s, err := NewLASSession(p.GPUTypes)
	if err != nil {
		t.Fatal(err)
	}
	if tol > 0 {
		if err := s.SetTolerance(tol); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range p.Jobs {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// checkSession compares the session's last solve with a cold Solve of the
// same jobs: objectives within the certified tolerance, the session's own
// certified gap within it, and the session's optimum (before fillLeftover)
// and its Allocation feasible.
func checkSession(t *testing.T, s *LASSession, res LASResult, tol float64, what string) {
	t.Helper()
	p := s.Problem()
	if len(p.Jobs) != s.Len() {
		t.Fatalf("%s: Problem has %d jobs, Len %d", what, len(p.Jobs), s.Len())
	}
	cold, err := Solve("max_min_fairness_perf", p)
	if err != nil {
		t.Fatalf("%s: cold: %v", what, err)
	}
	// A cold solve stops at relTol, the session at tol: each is within its
	// tolerance of the optimum (tiny slack for rounding in the bounds).
	scale := math.Max(res.Objective, cold.Objective)
	if d := math.Abs(res.Objective - cold.Objective); d > (tol+1e-12)*scale {
		t.Fatalf("%s: session objective %.12g, cold %.12g (rel diff %.3g)", what, res.Objective, cold.Objective, d/scale)
	}
	if res.Gap < 0 || res.Gap > (tol+1e-12)*math.Max(res.Objective, 1e-6) {
		t.Fatalf("%s: certified gap %g at objective %g", what, res.Gap, res.Objective)
	}
	if len(p.Jobs) == 0 {
		return
	}
	in := newInstance(p)
	mm := lasProblem(in, in.tput)
	r := rows(in.n(), in.k())
	for m, j := range p.Jobs {
		x, err := s.X(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		for q, v := range x {
			r[m][q] = v * in.sf[m]
		}
	}
	checkGPUTimeFeasible(t, mm, r, res.Objective)
	a, err := s.Allocation()
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, what, p, a)
	if a.Objective != res.Objective || len(a.JobIDs) != len(p.Jobs) {
		t.Fatalf("%s: Allocation objective %g (want %g), %d jobs", what, a.Objective, res.Objective, len(a.JobIDs))
	}
}

// Random arrivals and departures: after each, the session's re-solve
// agrees with a cold solve of the same job set, at both tolerances.
func TestLASSessionMatchesCold(t *testing.T) {
	for _, tol := range []float64{relTol, 1e-6} {
		for seed := int64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewSource(seed))
			n0 := 20 + rng.Intn(280)
			p := randomProblem(rng, n0, max(3, n0/8))
			s := sessionOf(t, p, tol)
			res, err := s.Solve()
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("tol %g seed %d start (n=%d)", tol, seed, n0)
			checkSession(t, s, res, tol, what)
			coldPasses := res.Passes
			warmPasses, solves := 0, 0
			ids := make([]string, 0, n0+60)
			for _, j := range p.Jobs {
				ids = append(ids, j.ID)
			}
			for ev := 0; ev < 60; ev++ {
				if len(ids) > 1 && rng.Intn(2) == 0 {
					i := rng.Intn(len(ids))
					if err := s.Remove(ids[i]); err != nil {
						t.Fatal(err)
					}
					ids = append(ids[:i], ids[i+1:]...)
				} else {
					j := randomProblem(rng, 1, 8).Jobs[0]
					j.ID = fmt.Sprintf("new%d", ev)
					if err := s.Add(j); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, j.ID)
				}
				if res, err = s.Solve(); err != nil {
					t.Fatal(err)
				}
				warmPasses += res.Passes
				solves++
				checkSession(t, s, res, tol, fmt.Sprintf("tol %g seed %d event %d (n=%d)", tol, seed, ev, s.Len()))
			}
			t.Logf("tol %g seed %d: n=%d, first solve %d passes, re-solves %.2f passes on average",
				tol, seed, n0, coldPasses, float64(warmPasses)/float64(solves))
		}
	}
}

// Several changes between solves, a job that pins the level (its weight
// puts the old columns' levels out of its reach: they are dropped and
// re-priced), emptying the session and starting again.
func TestLASSessionBatchesAndDroppedColumns(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	p := randomProblem(rng, 120, 15)
	s, err := NewLASSession(p.GPUTypes)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Solve(); err != nil || res != (LASResult{}) {
		t.Fatalf("empty session: %+v, %v", res, err)
	}
	for _, j := range p.Jobs {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Solve()
	if err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "start")
	// Five departures and five arrivals, then one solve.
	for i := 0; i < 5; i++ {
		if err := s.Remove(p.Jobs[3*i].ID); err != nil {
			t.Fatal(err)
		}
		j := randomProblem(rng, 1, 8).Jobs[0]
		j.ID = fmt.Sprintf("b%d", i)
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = s.Solve(); err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "batch")
	// A heavy job: its weight makes every column's level unreachable.
	heavy := randomProblem(rng, 1, 8).Jobs[0]
	heavy.ID, heavy.Weight = "heavy", 1e4
	if err := s.Add(heavy); err != nil {
		t.Fatal(err)
	}
	if len(s.cols) != 1 || len(s.seeds) == 0 {
		t.Fatalf("heavy job: %d columns kept, %d seeds", len(s.cols), len(s.seeds))
	}
	if res, err = s.Solve(); err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "heavy")
	if err := s.Remove("heavy"); err != nil {
		t.Fatal(err)
	}
	if res, err = s.Solve(); err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "heavy left")
	// Empty it, then start again (the scale stays the first solve's).
	for _, j := range s.Problem().Jobs {
		if err := s.Remove(j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = s.Solve(); err != nil || res != (LASResult{}) || s.Len() != 0 {
		t.Fatalf("emptied session: %+v, %v, %d jobs", res, err, s.Len())
	}
	if len(s.d.order) != 0 {
		t.Fatalf("emptied session still has %d breakpoints", len(s.d.order))
	}
	for _, j := range p.Jobs[:40] {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	if res, err = s.Solve(); err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "refilled")
}

// The sorted breakpoints a session maintains are exactly those a cold
// prepare sorts (same slots, same order).
func TestLASSessionBreakpointOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	p := randomProblem(rng, 200, 25)
	s := sessionOf(t, p, 0)
	if _, err := s.Solve(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if rng.Intn(2) == 0 {
			if err := s.Remove(p.Jobs[rng.Intn(len(p.Jobs))].ID); err != nil && !errors.Is(err, ErrUnknownJob) {
				t.Fatal(err)
			}
		} else {
			j := randomProblem(rng, 1, 8).Jobs[0]
			j.ID = fmt.Sprintf("o%d", i)
			if err := s.Add(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := append([]int32(nil), s.d.order...)
	d := *s.d
	d.order = nil
	d.prepare()
	if len(got) != len(d.order) {
		t.Fatalf("%d breakpoints kept, %d after a fresh sort", len(got), len(d.order))
	}
	for i := range got {
		if got[i] != d.order[i] {
			t.Fatalf("breakpoint %d: slot %d kept, %d after a fresh sort", i, got[i], d.order[i])
		}
	}
}

func TestLASSessionErrors(t *testing.T) {
	types := map[string]GPUType{"v100": {Count: 2}, "k80": {Count: 2}}
	if _, err := NewLASSession(map[string]GPUType{}); err == nil {
		t.Fatal("no GPU types: want an error")
	}
	s, err := NewLASSession(types)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("nope"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("removing an unknown job: %v", err)
	}
	a := Job{ID: "a", ScaleFactor: 1, Throughput: map[string]float64{"v100": 2, "k80": 1}}
	if err := s.Add(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.X("a"); err == nil {
		t.Fatal("X before a solve: want an error")
	}
	if _, err := s.Allocation(); err == nil {
		t.Fatal("Allocation before a solve: want an error")
	}
	if err := s.Add(a); err == nil {
		t.Fatal("duplicate id: want an error")
	}
	for _, bad := range []Job{
		{ID: "", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}},
		{ID: "sf0", Throughput: map[string]float64{"v100": 1}},
		{ID: "tpu", ScaleFactor: 1, Throughput: map[string]float64{"tpu": 1}},
		{ID: "zero", ScaleFactor: 1, Throughput: map[string]float64{"v100": 0}},
	} {
		if err := s.Add(bad); err == nil {
			t.Fatalf("job %+v: want an error", bad)
		}
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d after rejected adds, want 1", s.Len())
	}
	if err := s.SetTolerance(0); err == nil {
		t.Fatal("tolerance 0: want an error")
	}
	res, err := s.Solve()
	if err != nil {
		t.Fatal(err)
	}
	checkSession(t, s, res, relTol, "one job")
	if _, err := s.X("nope"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("X of an unknown job: %v", err)
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("a"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("removing a job twice: %v", err)
	}
}

// Re-solves after one arrival or departure are warm: a few pricing passes
// where the first (cold) solve takes tens. Pass counts are deterministic,
// so this checks the incremental path without timing it.
func TestLASSessionWarmPasses(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	p := randomProblem(rng, 2000, 250)
	s := sessionOf(t, p, 0)
	ids := make([]string, 0, len(p.Jobs)+20)
	for _, j := range p.Jobs {
		ids = append(ids, j.ID)
	}
	first, err := s.Solve()
	if err != nil {
		t.Fatal(err)
	}
	passes := 0
	const events = 40
	for ev := 0; ev < events; ev++ {
		if ev%2 == 0 {
			j := randomProblem(rng, 1, 8).Jobs[0]
			j.ID = fmt.Sprintf("w%d", ev)
			if err := s.Add(j); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		} else {
			q := rng.Intn(len(ids))
			if err := s.Remove(ids[q]); err != nil {
				t.Fatal(err)
			}
			ids = append(ids[:q], ids[q+1:]...)
		}
		res, err := s.Solve()
		if err != nil {
			t.Fatal(err)
		}
		passes += res.Passes
	}
	avg := float64(passes) / events
	t.Logf("first solve %d passes, re-solves %.2f on average", first.Passes, avg)
	if avg > 0.2*float64(first.Passes) {
		t.Fatalf("re-solves take %.2f passes on average, the first solve %d", avg, first.Passes)
	}
}

// The same calls give the same answers, bit for bit (no map order or
// clock reaches the math).
func TestLASSessionDeterministic(t *testing.T) {
	run := func() ([]LASResult, [][]float64) {
		rng := rand.New(rand.NewSource(8))
		p := randomProblem(rng, 150, 20)
		s := sessionOf(t, p, 0)
		var out []LASResult
		var xs [][]float64
		for ev := 0; ev < 20; ev++ {
			if ev%2 == 1 {
				if err := s.Remove(p.Jobs[ev].ID); err != nil {
					t.Fatal(err)
				}
			} else {
				j := randomProblem(rng, 1, 8).Jobs[0]
				j.ID = fmt.Sprintf("d%d", ev)
				if err := s.Add(j); err != nil {
					t.Fatal(err)
				}
			}
			res, err := s.Solve()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res)
			for _, j := range s.Problem().Jobs {
				x, err := s.X(j.ID)
				if err != nil {
					t.Fatal(err)
				}
				xs = append(xs, x)
			}
		}
		return out, xs
	}
	r1, x1 := run()
	r2, x2 := run()
	for i := range r1 {
		if r1[i] != r2[i] {
			t.Fatalf("solve %d: %+v then %+v", i, r1[i], r2[i])
		}
	}
	for i := range x1 {
		for j := range x1[i] {
			if x1[i][j] != x2[i][j] {
				t.Fatalf("row %d type %d: %v then %v", i, j, x1[i][j], x2[i][j])
			}
		}
	}
}

// AllocationFor is Allocation with the rows in the caller's job order: the
// same rows by job for the arrival order, its own order's for another, and
// it refuses a problem that is not the session's job set and cluster.
func TestLASSessionAllocationFor(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	p := randomProblem(rng, 40, 12)
	s := sessionOf(t, p, 0)
	if _, err := s.AllocationFor(p); err == nil {
		t.Fatal("AllocationFor before a solve: no error")
	}
	if _, err := s.Solve(); err != nil {
		t.Fatal(err)
	}
	want, err := s.Allocation()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AllocationFor(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("AllocationFor in arrival order differs from Allocation")
	}
	// Reversed: the rows follow, feasible, at the same objective.
	rev := &Problem{GPUTypes: p.GPUTypes}
	for i := len(p.Jobs) - 1; i >= 0; i-- {
		rev.Jobs = append(rev.Jobs, p.Jobs[i])
	}
	a, err := s.AllocationFor(rev)
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, "reversed", rev, a)
	if a.Objective != want.Objective {
		t.Fatalf("objective %v, want %v", a.Objective, want.Objective)
	}
	for i, j := range rev.Jobs {
		if a.JobIDs[i] != j.ID {
			t.Fatalf("row %d is %s, want %s", i, a.JobIDs[i], j.ID)
		}
	}
	bad := []*Problem{
		{GPUTypes: p.GPUTypes, Jobs: p.Jobs[1:]},
		{GPUTypes: p.GPUTypes, Jobs: append(append([]Job(nil), p.Jobs[1:]...), p.Jobs[2])},
		{GPUTypes: p.GPUTypes, Jobs: append(append([]Job(nil), p.Jobs[1:]...), Job{ID: "new", Throughput: map[string]float64{}})},
		{GPUTypes: map[string]GPUType{"x": {Count: 1}}, Jobs: p.Jobs},
	}
	for i, b := range bad {
		if _, err := s.AllocationFor(b); err == nil {
			t.Errorf("bad problem %d: no error", i)
		}
	}
}

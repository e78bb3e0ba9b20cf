package engine

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/policies"
)

const waterFilling = "max_min_fairness_water_filling_perf"

// entityJobs is one job per (id, entity, user) on one v100, sf 1, all
// alike so that shares differ only by entity.
func entitySnapshot(jobs ...[3]string) *Snapshot {
	s := &Snapshot{GPUs: []GPU{{ID: "v0", Type: "v100", Server: "a"}}}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, Job{ID: j[0], Entity: j[1], User: j[2], ScaleFactor: 1, Weight: 1,
			TotalSteps: 1e9, RemainingSteps: 1e9, Throughput: map[string]float64{"v100": 1}, ReceivedS: map[string]float64{}})
	}
	return s
}

// runRounds runs k rounds, crediting each assigned job a whole round, and
// calls check after each with the round count and each job's rounds run.
func runRounds(t *testing.T, e *Engine, s *Snapshot, k int, check func(r int, ran map[string]float64)) {
	t.Helper()
	ran := map[string]float64{}
	for r := 1; r <= k; r++ {
		p, err := e.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		if r > 1 && p.Recomputed {
			t.Fatalf("round %d recomputed: no event happened", r)
		}
		for _, a := range p.Assignments {
			for i := range s.Jobs {
				if s.Jobs[i].ID == a.Jobs[0] {
					s.Jobs[i].ReceivedS["v100"] += e.cfg.RoundS
					s.Jobs[i].Started = true
					ran[a.Jobs[0]]++
				}
			}
		}
		s.TimeS += e.cfg.RoundS
		s.Running = p.Assignments
		check(r, ran)
	}
}

func xOf(t *testing.T, a *policies.Allocation, id string) float64 {
	t.Helper()
	for m, j := range a.JobIDs {
		if j == id {
			return a.X[m][0]
		}
	}
	t.Fatalf("%s not in the allocation %v", id, a.JobIDs)
	return 0
}

// TestEntitiesReachThePolicy: two entities of weights 1 and 3 with two
// jobs each on one GPU. Water-filling gives the entities 1/4 and 3/4 of
// the GPU (each job half its entity's), and the rounds realise it: the
// mechanism runs, each round, the job furthest below its share (X over the
// time received since the recompute), so after r rounds every job has run
// within one round of X·r, and an entity of two jobs within two. The
// bound is checked after every one of 96 rounds (at 96, 24 rounds to 72,
// i.e. 1:3 within 2/24). Without entities the same four jobs get a
// quarter each, within one round of r/4.
func TestEntitiesReachThePolicy(t *testing.T) {
	jobs := [][3]string{{"a1", "a", ""}, {"b1", "b", ""}, {"a2", "a", ""}, {"b2", "b", ""}}
	ents := map[string]policies.Entity{"a": {Weight: 1, Policy: "fairness"}, "b": {Weight: 3, Policy: "fairness"}}
	for _, tc := range []struct {
		name     string
		entities map[string]policies.Entity
		x        map[string]float64
	}{
		{"weights 1:3", ents, map[string]float64{"a1": 0.125, "a2": 0.125, "b1": 0.375, "b2": 0.375}},
		{"no entities", nil, map[string]float64{"a1": 0.25, "a2": 0.25, "b1": 0.25, "b2": 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{Policy: waterFilling, RoundS: 360, Entities: tc.entities})
			if err != nil {
				t.Fatal(err)
			}
			s := entitySnapshot(jobs...)
			runRounds(t, e, s, 96, func(r int, ran map[string]float64) {
				if r == 1 {
					for id, want := range tc.x {
						if got := xOf(t, e.Allocation(), id); math.Abs(got-want) > 1e-6 {
							t.Fatalf("X[%s] = %g, want %g", id, got, want)
						}
					}
				}
				for id, want := range tc.x {
					if d := math.Abs(ran[id] - want*float64(r)); d > 1 {
						t.Fatalf("round %d: %s ran %g rounds, share %g·%d", r, id, ran[id], want, r)
					}
				}
				for _, ent := range []string{"a", "b"} {
					got := ran[ent+"1"] + ran[ent+"2"]
					want := (tc.x[ent+"1"] + tc.x[ent+"2"]) * float64(r)
					if math.Abs(got-want) > 2 {
						t.Fatalf("round %d: entity %s ran %g rounds, share %g", r, ent, got, want)
					}
				}
			})
			// Received time per entity over the 96 rounds.
			recv := func(ids ...string) float64 {
				sum := 0.0
				for _, j := range s.Jobs {
					for _, id := range ids {
						if j.ID == id {
							sum += j.ReceivedS["v100"]
						}
					}
				}
				return sum
			}
			ra, rb := recv("a1", "a2"), recv("b1", "b2")
			wantA := (tc.x["a1"] + tc.x["a2"]) * 96 * 360
			if math.Abs(ra-wantA) > 2*360 || math.Abs(ra+rb-96*360) > 1e-9 {
				t.Fatalf("received: a %g s, b %g s; want a %g ± 720 of %d", ra, rb, wantA, 96*360)
			}
		})
	}
}

// TestEntityOfUndeclared: a job's entity is its own when declared, else
// its user's when declared, else the default entity (weight 1, fairness),
// which every such job shares: naming an unknown entity buys no share. A
// declared "default" entity sets that entity's weight.
func TestEntityOfUndeclared(t *testing.T) {
	ents := map[string]policies.Entity{"a": {Weight: 1}, "b": {Weight: 3}}
	jobs := [][3]string{
		{"a1", "a", "b"},          // own entity wins over the user's
		{"b1", "", "b"},           // no entity: the user's
		{"g1", "ghost", "nobody"}, // undeclared entity and user: default
		{"g2", "", ""},            // nothing: default
		{"g3", "ghost", "b"},      // undeclared entity, declared user
	}
	cfg := Config{Policy: waterFilling, Entities: ents}
	want := map[string]string{"a1": "a", "b1": "b", "g1": DefaultEntity, "g2": DefaultEntity, "g3": "b"}
	s := entitySnapshot(jobs...)
	for i := range s.Jobs {
		if got := cfg.EntityOf(&s.Jobs[i]); got != want[s.Jobs[i].ID] {
			t.Errorf("EntityOf(%s) = %q, want %q", s.Jobs[i].ID, got, want[s.Jobs[i].ID])
		}
	}
	if got := (&Config{}).EntityOf(&s.Jobs[0]); got != "" {
		t.Errorf("no entities: EntityOf = %q", got)
	}
	for _, bad := range []policies.Entity{{Weight: 0}, {Weight: math.NaN()}, {Weight: 1, Policy: "las"}} {
		if _, err := New(Config{Policy: waterFilling, Entities: map[string]policies.Entity{"x": bad}}); err == nil {
			t.Errorf("entity %+v accepted", bad)
		}
	}
	// a (1): a1; b (3): b1, g3; default (1): g1, g2. The weights split
	// the GPU 1:3:1, each entity's part evenly among its jobs.
	for _, tc := range []struct {
		defWeight float64
		x         map[string]float64
	}{
		{0, map[string]float64{"a1": 0.2, "b1": 0.3, "g3": 0.3, "g1": 0.1, "g2": 0.1}},
		{2, map[string]float64{"a1": 1.0 / 6, "b1": 0.25, "g3": 0.25, "g1": 1.0 / 6, "g2": 1.0 / 6}},
	} {
		cfg := Config{Policy: waterFilling, Entities: map[string]policies.Entity{"a": ents["a"], "b": ents["b"]}}
		if tc.defWeight > 0 {
			cfg.Entities[DefaultEntity] = policies.Entity{Weight: tc.defWeight}
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Round(entitySnapshot(jobs...)); err != nil {
			t.Fatalf("default weight %g: %v", tc.defWeight, err)
		}
		for id, x := range tc.x {
			if got := xOf(t, e.Allocation(), id); math.Abs(got-x) > 1e-6 {
				t.Errorf("default weight %g: X[%s] = %g, want %g", tc.defWeight, id, got, x)
			}
		}
	}
}

// TestEntityChangesRecompute: a job moved to another entity (its meta
// changed) is a reset event, and an engine built with ResetFirst (a reload
// that changed the entities) recomputes at its first round although the
// history it restores records no event; without it, it does not.
func TestEntityChangesRecompute(t *testing.T) {
	ents := map[string]policies.Entity{"a": {Weight: 1}, "b": {Weight: 3}}
	s := entitySnapshot([3]string{"a1", "a", ""}, [3]string{"b1", "b", ""})
	e, _ := New(Config{Policy: waterFilling, RoundS: 360, Entities: ents})
	runRounds(t, e, s, 3, func(int, map[string]float64) {})
	if x := xOf(t, e.Allocation(), "a1"); math.Abs(x-0.25) > 1e-6 {
		t.Fatalf("X[a1] = %g", x)
	}
	for _, move := range []struct {
		to string
		x  float64
	}{{"a", 0.5}, {"b", 0.25}} {
		s.Jobs[1].Entity = move.to
		p, err := e.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		if x := xOf(t, p.Allocation, "a1"); !p.Recomputed || math.Abs(x-move.x) > 1e-6 {
			t.Fatalf("b1 moved to %s: recomputed %v, X[a1] = %g, want %g", move.to, p.Recomputed, x, move.x)
		}
		s.TimeS += 360
	}
	h := e.History()
	for _, reset := range []bool{false, true} {
		// The reload: b weighs 7 now.
		f, _ := New(Config{Policy: waterFilling, RoundS: 360, ResetFirst: reset,
			Entities: map[string]policies.Entity{"a": {Weight: 1}, "b": {Weight: 7}}})
		if err := f.SetHistory(h); err != nil {
			t.Fatal(err)
		}
		p, err := f.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		if p.Recomputed != reset {
			t.Fatalf("ResetFirst %v: recomputed %v", reset, p.Recomputed)
		}
		want := 0.25 // the restored allocation
		if reset {
			want = 0.125
		}
		if x := xOf(t, f.Allocation(), "a1"); math.Abs(x-want) > 1e-6 {
			t.Fatalf("ResetFirst %v: X[a1] = %g, want %g", reset, x, want)
		}
		s.TimeS += 360
		if p, _ := f.Round(s); p.Recomputed {
			t.Fatalf("ResetFirst %v: the second round recomputed too", reset)
		}
	}
}

package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/policies"
)

// preSim is a backend for multi-round tests of the preemption rules: it
// applies each plan, credits received time and steps, records when each
// job's run began (RunSinceS, when setSince) and when it checkpointed,
// finishes jobs and advances time.
type preSim struct {
	roundS   float64
	now      float64
	gpus     []GPU
	jobs     []Job
	pairs    []Pair
	running  []Assignment
	setSince bool               // the backend reports RunSinceS
	since    map[string]float64 // when each running job's run began (the truth)
	packing  bool
}

func (c *preSim) snapshot() *Snapshot {
	s := &Snapshot{TimeS: c.now, GPUs: slices.Clone(c.gpus), Running: c.running}
	for _, j := range c.jobs {
		cp := j
		cp.ReceivedS = maps2(j.ReceivedS)
		cp.RunSinceS = 0
		if v, ok := c.since[j.ID]; ok && c.setSince {
			cp.RunSinceS = v
		}
		s.Jobs = append(s.Jobs, cp)
	}
	if c.packing {
		for _, p := range c.pairs {
			cp := p
			cp.ReceivedS = maps2(p.ReceivedS)
			s.Pairs = append(s.Pairs, cp)
		}
	}
	return s
}

func maps2(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *preSim) job(id string) *Job {
	for i := range c.jobs {
		if c.jobs[i].ID == id {
			return &c.jobs[i]
		}
	}
	return nil
}

// apply carries the plan out over one round.
func (c *preSim) apply(p *Plan) {
	if c.since == nil {
		c.since = map[string]float64{}
	}
	in := map[string]bool{}
	for _, a := range p.Assignments {
		for _, id := range a.Jobs {
			in[id] = true
			j := c.job(id)
			j.Started = true
			if a.Action == Start {
				c.since[id] = c.now
			}
			if len(a.Jobs) == 1 {
				j.ReceivedS[a.Type] += c.roundS
				j.RemainingSteps -= j.Throughput[a.Type] * c.roundS
			} else {
				j.RemainingSteps -= 0.6 * j.Throughput[a.Type] * c.roundS
			}
		}
		if len(a.Jobs) == 2 {
			for i := range c.pairs {
				if c.pairs[i].Jobs == [2]string{a.Jobs[0], a.Jobs[1]} {
					if c.pairs[i].ReceivedS == nil {
						c.pairs[i].ReceivedS = map[string]float64{}
					}
					c.pairs[i].ReceivedS[a.Type] += c.roundS
				}
			}
		}
	}
	for _, ji := range p.Intents {
		if ji.Checkpoint {
			c.job(ji.Job).CheckpointAtS = c.now + c.job(ji.Job).CheckpointS
		}
	}
	for id := range c.since {
		if !in[id] {
			delete(c.since, id)
		}
	}
	c.running = p.Assignments
	kept := c.jobs[:0]
	for _, j := range c.jobs {
		if j.RemainingSteps > 0 {
			kept = append(kept, j)
		}
	}
	c.jobs = kept
	var pairs []Pair
	for _, pr := range c.pairs {
		if c.job(pr.Jobs[0]) != nil && c.job(pr.Jobs[1]) != nil {
			pairs = append(pairs, pr)
		}
	}
	c.pairs = pairs
	c.now += c.roundS
}

// add makes a job arrive now (and its pairs, with every job of its size).
func (c *preSim) add(j Job) {
	j.ArrivalS = c.now
	if j.ReceivedS == nil {
		j.ReceivedS = map[string]float64{}
	}
	if j.Weight == 0 {
		j.Weight = 1
	}
	for _, o := range c.jobs {
		if o.ScaleFactor == j.ScaleFactor {
			tp := map[string][2]float64{}
			for t, v := range o.Throughput {
				tp[t] = [2]float64{0.6 * v, 0.6 * j.Throughput[t]}
			}
			c.pairs = append(c.pairs, Pair{Jobs: [2]string{o.ID, j.ID}, Throughput: tp})
		}
	}
	c.jobs = append(c.jobs, j)
}

// xSolve gives each job the share x[job] of every type it runs on.
func xSolve(x map[string]float64) SolveFunc {
	return func(name string, p *policies.Problem) (*policies.Allocation, error) {
		return jobRows(name, p, func(j *policies.Job, types []string, row []float64) {
			for k, t := range types {
				if j.Throughput[t] > 0 {
					row[k] = x[j.ID]
				}
			}
		}), nil
	}
}

// pairSolve is isolatedSolve with a share for every third pair.
func pairSolve(name string, p *policies.Problem) (*policies.Allocation, error) {
	a, err := isolatedSolve(name, p)
	if err != nil {
		return nil, err
	}
	for q, pr := range p.Pairs {
		if q%3 == 0 {
			for k, t := range a.Types {
				if tp := pr.Throughput[t]; tp[0] > 0 && tp[1] > 0 {
					a.PairX[q][k] = 0.3
				}
			}
		}
	}
	return a, nil
}

func mustNew(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustRound(t *testing.T, e *Engine, s *Snapshot) *Plan {
	t.Helper()
	p, err := e.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func intentOf(p *Plan, job string) *JobIntent {
	for i := range p.Intents {
		if p.Intents[i].Job == job {
			return &p.Intents[i]
		}
	}
	return nil
}

// TestPinnedNeverMoved: on random clusters and workloads (arrivals,
// departures, GPU failures and recoveries, pairs, every combination of
// the options), a unit inside its minimum runtime whose GPUs stay healthy
// is kept on exactly its GPUs with the Pinned reason (or a notice before a
// reservation takes them); a failed GPU ends the pin. Also: the round's
// invariants, no job noticed two rounds in a row, at most one
// reservation, on healthy GPUs of its type, and held-back reserved GPUs
// run only pinned, noticed or backfilling jobs.
func TestPinnedNeverMoved(t *testing.T) {
	pinned, pairs, broken, noticed, reserved, backfilled := 0, 0, 0, 0, 0, 0
	for seed := range 160 {
		r := rand.New(rand.NewPCG(uint64(seed), 21))
		perServer := []int{1, 2, 4}[seed%3]
		c := &preSim{roundS: 360, now: float64(r.IntN(3)) * 360, setSince: seed%4 < 2, packing: seed%5 == 0 || seed%5 == 3}
		for _, ty := range []string{"v100", "k80"} {
			n := (1 + r.IntN(3)) * perServer
			for i := range n {
				c.gpus = append(c.gpus, GPU{ID: fmt.Sprintf("%s-%d", ty, i), Type: ty, Server: fmt.Sprintf("%s-s%d", ty, i/perServer)})
			}
		}
		next := 0
		arrive := func() {
			sf := []int{1, 1, 1, 2, 4}[r.IntN(5)]
			j := Job{ID: fmt.Sprint("j", next), ScaleFactor: sf, Throughput: map[string]float64{"v100": 1 + r.Float64()},
				TotalSteps: 1e4, RestoreS: float64(r.IntN(500)), CheckpointS: float64(r.IntN(100))}
			if r.IntN(3) > 0 {
				j.Throughput["k80"] = 0.5 + r.Float64()
			}
			j.RemainingSteps = j.Throughput["v100"] * 360 * float64(2+r.IntN(20))
			next++
			c.add(j)
		}
		for range 3 + r.IntN(6) {
			arrive()
		}
		solve := isolatedSolve
		if c.packing {
			solve = pairSolve
		}
		cfg := Config{Policy: "test_perf", Solve: solve, GavelCompat: seed%5 == 0, Packing: &c.packing,
			MinRuntimeS:     float64(1+r.IntN(4))*360 - float64(r.IntN(2))*100,
			CheckpointAware: seed%2 == 0, ReserveAfterS: []float64{0, 720}[seed/2%2]}
		e := mustNew(t, cfg)
		var lastNoticed map[string]bool
		for round := range 30 {
			if r.IntN(3) == 0 {
				arrive()
			}
			for i := range c.gpus {
				switch {
				case !c.gpus[i].Failed && r.IntN(40) == 0:
					c.gpus[i].Failed = true
				case c.gpus[i].Failed && r.IntN(3) == 0:
					c.gpus[i].Failed = false
				}
			}
			s := c.snapshot()
			p := mustRound(t, e, s)
			checkPlan(t, s, p, perServer)
			failed := map[string]bool{}
			for _, g := range s.GPUs {
				failed[g.ID] = g.Failed
			}
			for _, a := range s.Running {
				since := c.since[a.Jobs[0]]
				if len(a.Jobs) == 2 {
					since = max(since, c.since[a.Jobs[1]])
				}
				if !(s.TimeS < since+cfg.MinRuntimeS) || slices.ContainsFunc(a.Jobs, func(id string) bool { return c.job(id) == nil }) {
					continue // past its pin, or a job finished
				}
				if slices.ContainsFunc(a.GPUs, func(g string) bool { return failed[g] }) {
					broken++ // the pin ends: moved or stopped (checkPlan: never on a failed GPU)
					for _, id := range a.Jobs {
						if ji := intentOf(p, id); ji.Intent == IntentKeep || ji.Reason.Kind == Pinned {
							t.Fatalf("seed %d round %d: %s kept on a failed GPU: %+v", seed, round, id, ji)
						}
					}
					continue
				}
				pinned++
				if len(a.Jobs) == 2 {
					pairs++
				}
				got := assignmentOf(p, a.Jobs[0])
				if got == nil || !slices.Equal(got.Jobs, a.Jobs) || got.Type != a.Type || !slices.Equal(got.GPUs, a.GPUs) || got.Action != Keep {
					t.Fatalf("seed %d round %d: %v pinned until %.0f (now %.0f) on %v: got %+v", seed, round, a.Jobs,
						since+cfg.MinRuntimeS, s.TimeS, a.GPUs, got)
				}
				for _, id := range a.Jobs {
					if k := intentOf(p, id).Reason.Kind; k != Pinned && k != Noticed {
						t.Fatalf("seed %d round %d: pinned %s has reason %v", seed, round, id, intentOf(p, id).Reason)
					}
				}
			}
			now := map[string]bool{}
			for _, ji := range p.Intents {
				if !ji.Checkpoint {
					continue
				}
				noticed++
				now[ji.Job] = true
				if lastNoticed[ji.Job] {
					t.Fatalf("seed %d round %d: %s noticed two rounds in a row", seed, round, ji.Job)
				}
				if ji.Intent != IntentKeep || ji.Reason.Kind != Noticed {
					t.Fatalf("seed %d round %d: notice %+v", seed, round, ji)
				}
			}
			lastNoticed = now
			if len(p.Reservations) > 1 || (cfg.ReserveAfterS == 0 && len(p.Reservations) > 0) {
				t.Fatalf("seed %d round %d: reservations %+v", seed, round, p.Reservations)
			}
			var resv *Reservation
			if len(p.Reservations) == 1 {
				reserved++
				resv = &p.Reservations[0]
				j := c.job(resv.Job)
				if j == nil || len(resv.GPUs) != j.ScaleFactor || assignmentOf(p, resv.Job) != nil {
					t.Fatalf("seed %d round %d: reservation %+v of %+v", seed, round, resv, j)
				}
				for _, g := range resv.GPUs {
					if failed[g] || !slices.ContainsFunc(s.GPUs, func(x GPU) bool { return x.ID == g && x.Type == resv.Type }) {
						t.Fatalf("seed %d round %d: reservation on %s", seed, round, g)
					}
				}
				// In force from the round that makes it (at the
				// round's start): its GPUs run only what may.
				for _, a := range p.Assignments {
					if !slices.ContainsFunc(a.GPUs, func(g string) bool { return slices.Contains(resv.GPUs, g) }) {
						continue
					}
					for _, id := range a.Jobs {
						k := intentOf(p, id).Reason.Kind
						if k == Backfills {
							backfilled++
						}
						if k != Pinned && k != Backfills && k != Noticed && k != Resized {
							t.Fatalf("seed %d round %d: %s runs on reserved GPUs %v: %v", seed, round, id, a.GPUs, intentOf(p, id).Reason)
						}
					}
				}
			}
			c.apply(p)
		}
	}
	t.Logf("pinned %d (pairs %d), pins ended by failures %d, notices %d, rounds with a reservation %d, backfills %d",
		pinned, pairs, broken, noticed, reserved, backfilled)
	if pinned == 0 || pairs == 0 || broken == 0 || noticed == 0 || reserved == 0 || backfilled == 0 {
		t.Fatal("the random runs do not exercise every rule")
	}
}

// TestMinRuntimeFairness: three equal jobs on one GPU with a minimum
// runtime of three rounds take turns of three rounds; received time keeps
// counting while pinned, so over 60 rounds no job is ever more than one
// minimum runtime ahead of another.
func TestMinRuntimeFairness(t *testing.T) {
	for _, setSince := range []bool{false, true} {
		c := &preSim{roundS: 360, setSince: setSince, gpus: []GPU{{ID: "g0", Type: "v100", Server: "s0"}}}
		for i := range 3 {
			c.add(Job{ID: fmt.Sprint("j", i), ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9})
		}
		min := 3 * c.roundS
		e := mustNew(t, Config{Policy: "test_perf", Solve: isolatedSolve, MinRuntimeS: min})
		runs := 0
		for round := range 60 {
			s := c.snapshot()
			p := mustRound(t, e, s)
			for _, a := range s.Running {
				if s.TimeS < c.since[a.Jobs[0]]+min {
					if got := assignmentOf(p, a.Jobs[0]); got == nil || got.Action != Keep {
						t.Fatalf("round %d: %s stopped inside its minimum runtime", round, a.Jobs[0])
					}
				}
			}
			if len(p.Assignments) == 1 && p.Assignments[0].Action == Start {
				runs++
			}
			c.apply(p)
			lo, hi := math.Inf(1), 0.0
			for _, j := range c.jobs {
				lo, hi = math.Min(lo, j.ReceivedS["v100"]), math.Max(hi, j.ReceivedS["v100"])
			}
			if hi-lo > min {
				t.Fatalf("setSince=%v round %d: received time from %.0f to %.0f s", setSince, round, lo, hi)
			}
		}
		if runs != 20 {
			t.Fatalf("setSince=%v: %d runs in 60 rounds, want 20 of 3 rounds", setSince, runs)
		}
	}
}

// TestPinElasticMinimum: an elastic job's pin holds its minimum; its extra
// workers shrink for a newcomer as without pins.
func TestPinElasticMinimum(t *testing.T) {
	gpus := []GPU{{ID: "g0", Type: "v100", Server: "s0"}, {ID: "g1", Type: "v100", Server: "s0"},
		{ID: "g2", Type: "v100", Server: "s0"}, {ID: "g3", Type: "v100", Server: "s0"}}
	el := Job{ID: "el", ScaleFactor: 1, Elastic: &Elastic{StepGPUs: 1, MaxGPUs: 4}, Throughput: map[string]float64{"v100": 1},
		TotalSteps: 1e9, RemainingSteps: 1e9, ReceivedS: map[string]float64{"v100": 3600}, RunSinceS: 3600, Started: true}
	nw := Job{ID: "new", ScaleFactor: 2, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9, ArrivalS: 3900}
	s := &Snapshot{TimeS: 3960, GPUs: gpus, Jobs: []Job{el, nw},
		Running: []Assignment{{Jobs: []string{"el"}, Type: "v100", GPUs: []string{"g2", "g0", "g1", "g3"}, Action: Keep}}}
	// The newcomer outranks the elastic job: without the pin it would not
	// matter which GPUs each gets; with it the minimum stays on g2.
	e := mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"el": 0.1, "new": 1}), MinRuntimeS: 1000})
	p := mustRound(t, e, s)
	a := assignmentOf(p, "el")
	if a == nil || a.GPUs[0] != "g2" || len(a.GPUs) != 2 || a.Action != Keep {
		t.Fatalf("elastic job: %+v", a)
	}
	if n := assignmentOf(p, "new"); n == nil || len(n.GPUs) != 2 {
		t.Fatalf("newcomer: %+v", n)
	}
	if ji := intentOf(p, "el"); ji.Intent != IntentResize {
		t.Fatalf("elastic intent %+v", ji)
	}
	// Past its minimum runtime it is Gavel's again: the newcomer ranks
	// first, and both fit, so nothing changes but the reason.
	s.TimeS = 4600
	p = mustRound(t, e, s)
	if ji := intentOf(p, "el"); ji.Reason.Kind == Pinned {
		t.Fatalf("pin past its end: %+v", ji)
	}
}

// TestHeldOverlapping: a backend that shows two running units on one GPU
// (a stale report) gets one of them held there, not a failed placement.
func TestHeldOverlapping(t *testing.T) {
	job := func(id string) Job {
		return Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
			Started: true, RunSinceS: 3500, CheckpointAtS: 3000}
	}
	s := &Snapshot{TimeS: 3600, GPUs: []GPU{{ID: "g0", Type: "v100", Server: "s0"}, {ID: "g1", Type: "v100", Server: "s0"}},
		Jobs:    []Job{job("n"), job("a"), job("b")},
		Running: []Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}}, {Jobs: []string{"b"}, Type: "v100", GPUs: []string{"g0"}}}}
	for _, cfg := range []Config{{MinRuntimeS: 1000}, {CheckpointAware: true}} {
		cfg.Policy, cfg.Solve = "test_perf", xSolve(map[string]float64{"n": 0.5, "a": 0.2, "b": 0.2})
		p := mustRound(t, mustNew(t, cfg), s)
		checkPlan(t, s, p, 2)
	}
}

// TestCheckpointAwareVictims: two running jobs of equal priority that
// Gavel both stops for two starters of slightly higher priority; the
// checkpoint-aware choice keeps the one with more work since its last
// checkpoint (whatever their order) and drops a starter instead.
func TestCheckpointAwareVictims(t *testing.T) {
	const now = 7200
	gpus := []GPU{{ID: "g0", Type: "v100", Server: "s0"}, {ID: "g1", Type: "v100", Server: "s0"}}
	job := func(id string, ckpt float64) Job {
		j := Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
			CheckpointS: 1000, Started: true}
		if ckpt > 0 {
			j.RunSinceS, j.CheckpointAtS = now-1000, ckpt
		}
		return j
	}
	x := xSolve(map[string]float64{"lost": 0.25, "saved": 0.25, "s1": 0.3, "s2": 0.3})
	running := []Assignment{{Jobs: []string{"lost"}, Type: "v100", GPUs: []string{"g0"}}, {Jobs: []string{"saved"}, Type: "v100", GPUs: []string{"g1"}}}
	for _, lostFirst := range []bool{false, true} {
		jobs := []Job{job("s1", 0), job("s2", 0), job("saved", now-10), job("lost", now-200)}
		if lostFirst {
			jobs[2], jobs[3] = jobs[3], jobs[2]
		}
		s := &Snapshot{TimeS: now, GPUs: gpus, Jobs: jobs, Running: running}
		p := mustRound(t, mustNew(t, Config{Policy: "test_perf", Solve: x}), s)
		if assignmentOf(p, "lost") != nil || assignmentOf(p, "saved") != nil {
			t.Fatalf("Gavel: %+v", p.Assignments)
		}
		p = mustRound(t, mustNew(t, Config{Policy: "test_perf", Solve: x, CheckpointAware: true}), s)
		if a := assignmentOf(p, "lost"); a == nil || a.Action != Keep || a.GPUs[0] != "g0" || a.Checkpoint {
			t.Fatalf("lostFirst=%v: the victim with unsaved work: %+v", lostFirst, a)
		}
		if assignmentOf(p, "saved") != nil || assignmentOf(p, "s2") != nil || assignmentOf(p, "s1") == nil {
			t.Fatalf("lostFirst=%v: %+v", lostFirst, p.Assignments)
		}
		if ji := intentOf(p, "lost"); ji.Intent != IntentKeep || ji.Reason.Kind != LeaseRenewed {
			t.Fatalf("%+v", ji)
		}
	}
}

// TestCheckpointAwareRestore: a starter of higher priority displaces a
// running job unless its restore takes a whole horizon (RestoreS ≥ H):
// then it is worth a tenth of its priority and the running job stays.
func TestCheckpointAwareRestore(t *testing.T) {
	for _, restore := range []float64{0, 200, 360, 1000} {
		s := &Snapshot{TimeS: 3600, GPUs: []GPU{{ID: "g0", Type: "v100", Server: "s0"}},
			Jobs: []Job{
				{ID: "new", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9, RestoreS: restore},
				{ID: "run", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
					Started: true, RunSinceS: 3000, CheckpointAtS: 3600},
			},
			Running: []Assignment{{Jobs: []string{"run"}, Type: "v100", GPUs: []string{"g0"}}}}
		// new: 3 times run's priority.
		e := mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"new": 0.75, "run": 0.25}), CheckpointAware: true})
		p := mustRound(t, e, s)
		displaced := assignmentOf(p, "new") != nil
		// value(new) = 3p·max(0.1, 1 − restore/360) against p.
		if want := 3*math.Max(0.1, 1-restore/360) > 1; displaced != want {
			t.Fatalf("restore %.0f: starter runs %v, want %v: %+v", restore, displaced, want, p.Assignments)
		}
		if !displaced && intentOf(p, "run").Intent != IntentKeep {
			t.Fatalf("restore %.0f: %+v", restore, p.Intents)
		}
	}
}

// xTypeSolve gives each job the share x[job][type] of each type.
func xTypeSolve(x map[string]map[string]float64) SolveFunc {
	return func(name string, p *policies.Problem) (*policies.Allocation, error) {
		return jobRows(name, p, func(j *policies.Job, types []string, row []float64) {
			for k, t := range types {
				row[k] = x[j.ID][t]
			}
		}), nil
	}
}

// TestCheckpointAwareMigrations: a unit Gavel moves from k80 to v100 is a
// victim on k80 and a starter on v100 whose move costs its restore and its
// unsaved work. m runs on the K80, v on the V100, w waits for the K80;
// Gavel moves m to the V100 (stopping v) and starts w on the K80.
//   - m with much unsaved work: worth little as a starter on the V100, much
//     as a victim on the K80: m and v stay, w waits;
//   - m with its work saved: it wins on the V100 and loses on the K80:
//     it moves, as Gavel decided;
//   - m with some unsaved work, winning on the V100 and losing on the K80:
//     it gets the notice instead, kept on the K80 (w waits) and v with it;
//     the next round m stops and w starts;
//   - with a second, idle V100, the place m's stay leaves there goes to a
//     job that waits for it.
func TestCheckpointAwareMigrations(t *testing.T) {
	const now = 7200
	job := func(id string, unsaved float64) Job {
		return Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 2, "k80": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
			CheckpointS: 10, Started: unsaved >= 0, RunSinceS: now - 2000, CheckpointAtS: now - max(unsaved, 0)}
	}
	for _, tc := range []struct {
		name             string
		unsaved, restore float64
		xv, xw           float64 // v's share of the V100, w's of the K80
		idle             bool    // a second V100, idle, and z waiting for it
		want             map[string]Intent
		notice           bool
	}{
		{name: "stays", unsaved: 1000, restore: 30, xv: 0.4, xw: 0.35,
			want: map[string]Intent{"m": IntentKeep, "v": IntentKeep}},
		{name: "moves", unsaved: 0, restore: 30, xv: 0.4, xw: 0.35,
			want: map[string]Intent{"m": IntentMigrate, "v": IntentSuspend, "w": IntentAdmit}},
		{name: "noticed", unsaved: 100, xv: 0.3, xw: 0.45,
			want: map[string]Intent{"m": IntentKeep, "v": IntentKeep}, notice: true},
		{name: "refill", unsaved: 1000, restore: 30, xv: 0.4, xw: 0.35, idle: true,
			want: map[string]Intent{"m": IntentKeep, "v": IntentKeep, "z": IntentAdmit}},
	} {
		gpus := []GPU{{ID: "g0", Type: "v100", Server: "s0"}, {ID: "k0", Type: "k80", Server: "s1"}}
		m, v, w := job("m", tc.unsaved), job("v", 0), job("w", -1)
		m.RestoreS = tc.restore
		running := []Assignment{{Jobs: []string{"m"}, Type: "k80", GPUs: []string{"k0"}}, {Jobs: []string{"v"}, Type: "v100", GPUs: []string{"g0"}}}
		x := map[string]map[string]float64{"m": {"v100": 0.5, "k80": 0.3}, "v": {"v100": tc.xv}, "w": {"k80": tc.xw}}
		jobs := []Job{m, v, w}
		if tc.idle {
			gpus = append(gpus, GPU{ID: "g1", Type: "v100", Server: "s0"})
			jobs = append(jobs, job("z", -1))
			x["z"] = map[string]float64{"v100": 0.2}
			running[1].GPUs = []string{"g0"}
		}
		s := &Snapshot{TimeS: now, GPUs: gpus, Jobs: jobs, Running: running}
		p := mustRound(t, mustNew(t, Config{Policy: "test_perf", Solve: xTypeSolve(x)}), s)
		if a := assignmentOf(p, "m"); a == nil || a.Type != "v100" {
			t.Fatalf("%s: Gavel does not move m: %+v", tc.name, p.Assignments)
		}
		e := mustNew(t, Config{Policy: "test_perf", Solve: xTypeSolve(x), CheckpointAware: true})
		p = mustRound(t, e, s)
		checkPlan(t, s, p, 1)
		for id, want := range tc.want {
			if ji := intentOf(p, id); ji == nil || ji.Intent != want {
				t.Fatalf("%s: %s: %+v, want %s", tc.name, id, ji, want)
			}
		}
		if a := assignmentOf(p, "w"); a != nil && tc.want["w"] == "" {
			t.Fatalf("%s: w runs: %+v", tc.name, p.Assignments)
		}
		if ji := intentOf(p, "m"); ji.Checkpoint != tc.notice || (tc.notice && ji.Reason.Kind != Noticed) ||
			(ji.Intent == IntentKeep && !slices.Equal(ji.GPUs, []string{"k0"})) {
			t.Fatalf("%s: m: %+v", tc.name, ji)
		}
		if !tc.notice {
			continue
		}
		// The next round m stops, w starts in its place.
		s2 := &Snapshot{TimeS: now + 360, GPUs: gpus, Jobs: jobs, Running: p.Assignments}
		for i := range s2.Jobs {
			s2.Jobs[i].Started = true
		}
		s2.Jobs[0].CheckpointAtS = now
		p = mustRound(t, e, s2)
		checkPlan(t, s2, p, 1)
		if ji := intentOf(p, "m"); ji == nil || ji.Intent != IntentSuspend {
			t.Fatalf("%s: round 2: m: %+v", tc.name, ji)
		}
		if a := assignmentOf(p, "w"); a == nil || a.Type != "k80" {
			t.Fatalf("%s: round 2: %+v", tc.name, p.Assignments)
		}
	}
}

// TestNotice: a victim with more unsaved work than a checkpoint takes
// keeps its GPUs one round with Checkpoint set (the starter waits); next
// round its stop loses only the restore, so it stops, without a second
// notice, and the starter starts.
func TestNotice(t *testing.T) {
	c := &preSim{roundS: 360, now: 3600, gpus: []GPU{{ID: "g0", Type: "v100", Server: "s0"}}}
	c.add(Job{ID: "run", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
		Started: true, CheckpointS: 60, CheckpointAtS: 3300})
	c.add(Job{ID: "new", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9})
	c.since = map[string]float64{"run": 3000}
	c.setSince = true
	c.running = []Assignment{{Jobs: []string{"run"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep}}
	e := mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"new": 0.9, "run": 0.1}), CheckpointAware: true})

	p := mustRound(t, e, c.snapshot())
	ji := intentOf(p, "run")
	if ji == nil || ji.Intent != IntentKeep || !ji.Checkpoint || ji.Reason.Kind != Noticed || assignmentOf(p, "new") != nil {
		t.Fatalf("round 1: %+v", p.Intents)
	}
	if b, _ := json.Marshal(ji); !strings.Contains(string(b), `"checkpoint":true`) || !strings.Contains(string(b), "checkpoint now") {
		t.Fatal(string(b))
	}
	c.apply(p)

	p = mustRound(t, e, c.snapshot())
	if ji := intentOf(p, "run"); ji == nil || ji.Intent != IntentSuspend || ji.Checkpoint {
		t.Fatalf("round 2: %+v", p.Intents)
	}
	if ji := intentOf(p, "new"); ji == nil || ji.Intent != IntentAdmit {
		t.Fatalf("round 2: %+v", p.Intents)
	}
	// Without the option: stopped at once.
	c2 := &preSim{roundS: 360, now: 3600, gpus: c.gpus, jobs: nil}
	c2.add(Job{ID: "run", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9, Started: true})
	c2.add(Job{ID: "new", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9})
	c2.running = []Assignment{{Jobs: []string{"run"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep}}
	p = mustRound(t, mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"new": 0.9, "run": 0.1})}), c2.snapshot())
	if ji := intentOf(p, "run"); ji == nil || ji.Intent != IntentSuspend {
		t.Fatalf("Gavel: %+v", p.Intents)
	}
}

// TestNoticeStops: a notice means a stop. Three never-finishing jobs
// rotate on two GPUs (with and without a minimum runtime, in every
// selection mode): a job noticed in round r does not run in round r+1
// (no GPU is ever idle here), and its notice is not moved to another job
// in its place. Then a job noticed for a starter that leaves before the
// next round runs on: its GPU would otherwise stay idle.
func TestNoticeStops(t *testing.T) {
	notices := 0
	for k, cfg := range []Config{{}, {MinRuntimeS: 720}, {GavelCompat: true}, {MinRuntimeS: 1080, GavelCompat: true}} {
		for seed := range 8 {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(k)))
			c := &preSim{roundS: 360, setSince: true}
			for i := range 2 {
				c.gpus = append(c.gpus, GPU{ID: fmt.Sprint("g", i), Type: "v100", Server: "s0"})
			}
			x := map[string]float64{}
			for _, id := range []string{"a", "b", "c"} {
				c.add(Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
					CheckpointS: float64(r.IntN(60)), RestoreS: float64(r.IntN(200))})
				x[id] = 0.2 + 0.3*r.Float64()
				c.now += 360 * float64(r.IntN(2))
			}
			cfg.Policy, cfg.Solve, cfg.CheckpointAware = "test_perf", xSolve(x), true
			e := mustNew(t, cfg)
			last := map[string]bool{}
			for round := range 60 {
				p := mustRound(t, e, c.snapshot())
				if len(p.Assignments) != 2 {
					t.Fatalf("cfg %d seed %d round %d: %+v", k, seed, round, p.Assignments)
				}
				now := map[string]bool{}
				for _, ji := range p.Intents {
					if last[ji.Job] && ji.Intent != IntentSuspend {
						t.Fatalf("cfg %d seed %d round %d: %s noticed last round: %+v", k, seed, round, ji.Job, ji)
					}
					if ji.Checkpoint {
						now[ji.Job] = true
						notices++
					}
				}
				last = now
				c.apply(p)
			}
		}
	}
	if notices == 0 {
		t.Fatal("no notice")
	}

	// A notice for a starter that then leaves: the GPU would be idle.
	c := &preSim{roundS: 360, now: 3600, setSince: true, gpus: []GPU{{ID: "g0", Type: "v100", Server: "s0"}}}
	c.add(Job{ID: "run", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
		Started: true, CheckpointS: 60, CheckpointAtS: 3300})
	c.add(Job{ID: "new", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9})
	c.since = map[string]float64{"run": 3000}
	c.running = []Assignment{{Jobs: []string{"run"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep}}
	e := mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"new": 0.9, "run": 0.1}), CheckpointAware: true})
	p := mustRound(t, e, c.snapshot())
	if ji := intentOf(p, "run"); ji == nil || !ji.Checkpoint {
		t.Fatalf("round 1: %+v", p.Intents)
	}
	c.apply(p)
	c.jobs = slices.DeleteFunc(c.jobs, func(j Job) bool { return j.ID == "new" })
	c.pairs = nil
	p = mustRound(t, e, c.snapshot())
	if ji := intentOf(p, "run"); ji == nil || ji.Intent != IntentKeep || ji.Checkpoint {
		t.Fatalf("round 2, the GPU otherwise idle: %+v", p.Intents)
	}
}

// TestKeepBonusBounded: a job that never checkpoints on its own (its
// CheckpointAtS moves only on a notice) has unsaved work growing without
// limit; its keep value is capped at p·(2 + restore/H), so once the
// waiting job's start value exceeds that it gets its notice and stops the
// round after, every time, also once the waiting job has received more
// than H (without the cap the running job would then never stop).
func TestKeepBonusBounded(t *testing.T) {
	const restore = 30
	c := &preSim{roundS: 360, setSince: true, gpus: []GPU{{ID: "g0", Type: "v100", Server: "s0"}}}
	for _, id := range []string{"w", "run"} {
		c.add(Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9,
			CheckpointS: 30, RestoreS: restore})
	}
	// Equal shares: the priorities' ratio is the ratio of received times
	// (one reset, at the first round).
	e := mustNew(t, Config{Policy: "test_perf", Solve: xSolve(map[string]float64{"w": 0.5, "run": 0.5}), CheckpointAware: true})
	const h = 360.0
	switches, late := 0, 0
	due := -1 // the round the runner became due to stop
	var runner string
	for round := range 80 {
		s := c.snapshot()
		p := mustRound(t, e, s)
		on := ""
		if len(p.Assignments) == 1 {
			on = p.Assignments[0].Jobs[0]
		}
		if on != runner {
			if runner != "" {
				switches++
				if c.job(on).ReceivedS["v100"] > h {
					late++
				}
			}
			runner, due = on, -1
		} else if runner != "" {
			other := "w"
			if runner == "w" {
				other = "run"
			}
			rr, ro := c.job(runner).ReceivedS["v100"], c.job(other).ReceivedS["v100"]
			// start value over keep value, the keep value at its cap.
			if ro > 0 && (rr/ro)*(1-restore/h) > (2+restore/h)*1.01 && due < 0 {
				due = round
			}
			if due >= 0 && round > due+1 {
				t.Fatalf("round %d: %s still runs, due to stop since round %d (received %.0f against %.0f)", round, runner, due, rr, ro)
			}
		}
		c.apply(p)
	}
	if switches < 3 || late < 2 {
		t.Fatalf("%d switches, %d of them once the waiting job had received more than H", switches, late)
	}
}

// gangSim: four GPUs on two servers held by 1-GPU jobs whose minimum
// runtimes (three rounds) end one round apart, a gang of 4 waiting, and a
// new 1-GPU job every round that outranks the gang.
func gangSim() *preSim {
	c := &preSim{roundS: 360, now: 3600, setSince: true, since: map[string]float64{}}
	for i := range 4 {
		c.gpus = append(c.gpus, GPU{ID: fmt.Sprint("g", i), Type: "v100", Server: fmt.Sprint("s", i/2)})
	}
	c.add(Job{ID: "gang", ScaleFactor: 4, Throughput: map[string]float64{"v100": 4}, TotalSteps: 1e9, RemainingSteps: 1e9})
	for i := range 4 {
		id := fmt.Sprint("old", i)
		c.add(Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9, Started: true})
		c.since[id] = c.now - float64(i)*c.roundS
		c.running = append(c.running, Assignment{Jobs: []string{id}, Type: "v100", GPUs: []string{fmt.Sprint("g", i)}, Action: Keep})
	}
	return c
}

// TestReservationGang: the gang starves behind the staggered pins and the
// stream of newcomers without ReserveAfterS; with it, it gets a
// reservation once it has waited that long and starts on the reserved
// GPUs by the reservation's StartS, which never moves later.
func TestReservationGang(t *testing.T) {
	for _, reserve := range []float64{0, 720} {
		c := gangSim()
		e := mustNew(t, Config{Policy: "test_perf", Solve: isolatedSolve, MinRuntimeS: 3 * 360, ReserveAfterS: reserve})
		first := math.Inf(1)
		var resv *Reservation
		started := -1.0
		for round := range 40 {
			c.add(Job{ID: fmt.Sprint("new", round), ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1e9, RemainingSteps: 1e9})
			s := c.snapshot()
			p := mustRound(t, e, s)
			if a := assignmentOf(p, "gang"); a != nil && started < 0 {
				started = s.TimeS
				if resv == nil || !slices.Equal(a.GPUs, resv.GPUs) || a.Action != Start {
					t.Fatalf("gang started on %+v, reservation %+v", a, resv)
				}
			}
			if len(p.Reservations) > 0 && started < 0 {
				r := p.Reservations[0]
				if r.Job != "gang" || r.Type != "v100" || len(r.GPUs) != 4 {
					t.Fatalf("%+v", r)
				}
				if resv == nil {
					first = r.StartS
					if s.TimeS-3600 < reserve {
						t.Fatalf("reserved after %.0f s", s.TimeS-3600)
					}
				} else if r.StartS > first || r.SinceS != resv.SinceS {
					t.Fatalf("reservation moved: %+v, was %+v", r, resv)
				}
				resv = &r
				// Newcomers never run on the held-back GPUs, not even in
				// the round that makes the reservation: they would
				// neither finish nor be stoppable by StartS.
				for _, a := range p.Assignments {
					if a.Action == Start && slices.ContainsFunc(a.GPUs, func(g string) bool { return slices.Contains(r.GPUs, g) }) {
						t.Fatalf("round %d: %v started on reserved GPUs %v (reserved since %.0f)", round, a.Jobs, a.GPUs, r.SinceS)
					}
				}
			}
			c.apply(p)
		}
		switch {
		case reserve == 0 && started >= 0:
			t.Fatalf("the gang started at %.0f without reservations", started)
		case reserve > 0 && (started < 0 || started > first):
			t.Fatalf("the gang started at %.0f, reserved from %.0f", started, first)
		}
		t.Logf("reserve after %.0f: gang started at %.0f (reserved from %.0f)", reserve, started, first)
	}
}

// reserveT is the time reservationCase starts at.
const reserveT = 7200

// reservationCase is the reservation tests' cluster at reserveT: 4 V100s
// on two servers and a 4-GPU gang; one makes 1-GPU jobs that finish after
// seconds on a V100 ("pin" started 720 s before, "old" 1,440 s before).
func reservationCase() (*preSim, func(id string, seconds float64) Job) {
	const T = reserveT
	c := &preSim{roundS: 360, now: T, setSince: true, since: map[string]float64{"pin": T - 720, "old": T - 1440}}
	for i := range 4 {
		c.gpus = append(c.gpus, GPU{ID: fmt.Sprint("g", i), Type: "v100", Server: fmt.Sprint("s", i/2)})
	}
	one := func(id string, seconds float64) Job {
		return Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 2}, TotalSteps: 1e9, RemainingSteps: 2 * seconds,
			CheckpointS: 30, Started: id == "pin" || id == "old"}
	}
	c.add(Job{ID: "gang", ScaleFactor: 4, Throughput: map[string]float64{"v100": 4}, TotalSteps: 1e9, RemainingSteps: 1e9})
	return c, one
}

// TestBackfill: reserved GPUs held back for a gang until a pin ends take
// a job that finishes before the reservation starts and keep one that ran
// there past its pin (it may be stopped at any round), not one that would
// be pinned past the start nor one that finishes too late; with
// CheckpointAware the holders get their notice the round before; at StartS
// the gang starts on the reserved GPUs.
func TestBackfill(t *testing.T) {
	const T = reserveT
	c, one := reservationCase()
	c.jobs[0].ArrivalS = 0
	c.add(one("pin", 1e6))
	c.add(one("old", 1e6))
	c.running = []Assignment{{Jobs: []string{"pin"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep},
		{Jobs: []string{"old"}, Type: "v100", GPUs: []string{"g1"}, Action: Keep}}
	e := mustNew(t, Config{Policy: "test_perf", Solve: isolatedSolve, MinRuntimeS: 1440, ReserveAfterS: 360, CheckpointAware: true})

	// Round 1: 3 GPUs free, the gang needs 4: reserved from pin's end.
	p := mustRound(t, e, c.snapshot())
	if len(p.Reservations) != 1 || p.Reservations[0].StartS != T+720 || p.Reservations[0].SinceS != T ||
		!sameSet(p.Reservations[0].GPUs, []string{"g0", "g1", "g2", "g3"}) {
		t.Fatalf("round 1: %+v", p.Reservations)
	}
	if ji := intentOf(p, "pin"); ji.Reason.Kind != Pinned || ji.Reason.Until != T+720 || ji.Checkpoint {
		t.Fatalf("round 1: %+v", ji)
	}
	c.apply(p)

	// Round 2: newcomers; only the short one backfills, old keeps g1.
	c.add(one("short", 300))
	c.add(one("late", 400))
	c.add(one("long", 1e6))
	p = mustRound(t, e, c.snapshot())
	for id, want := range map[string]Intent{"short": IntentAdmit, "old": IntentKeep} {
		ji := intentOf(p, id)
		if ji == nil || ji.Intent != want || (ji.Reason.Kind != Backfills && ji.Reason.Kind != Noticed) {
			t.Fatalf("round 2: %s: %+v", id, ji)
		}
	}
	if ji := intentOf(p, "short"); ji.Reason.Kind != Backfills || ji.Reason.Until != T+720 {
		t.Fatalf("round 2: %+v", ji)
	}
	if assignmentOf(p, "late") != nil || assignmentOf(p, "long") != nil || assignmentOf(p, "gang") != nil {
		t.Fatalf("round 2: %+v", p.Assignments)
	}
	// StartS is next round: the holders checkpoint now.
	for _, id := range []string{"pin", "old"} {
		if ji := intentOf(p, id); !ji.Checkpoint || ji.Reason.Kind != Noticed || ji.Intent != IntentKeep {
			t.Fatalf("round 2: %s: %+v", id, ji)
		}
	}
	if len(p.Reservations) != 1 || p.Reservations[0].StartS != T+720 {
		t.Fatalf("round 2: %+v", p.Reservations)
	}
	c.apply(p)
	if c.job("short") != nil {
		t.Fatal("the short job did not finish")
	}

	// Round 3: the pin has ended, the gang starts on the reserved GPUs.
	p = mustRound(t, e, c.snapshot())
	a := assignmentOf(p, "gang")
	if a == nil || a.Action != Start || !sameSet(a.GPUs, []string{"g0", "g1", "g2", "g3"}) || len(p.Reservations) != 0 {
		t.Fatalf("round 3: %+v %+v", p.Assignments, p.Reservations)
	}
	if ji := intentOf(p, "gang"); ji.Intent != IntentAdmit || ji.Reason.Kind != FirstStart {
		t.Fatalf("round 3: %+v", ji)
	}
	for _, id := range []string{"pin", "old"} {
		if ji := intentOf(p, id); ji == nil || ji.Intent != IntentSuspend {
			t.Fatalf("round 3: %s: %+v", id, ji)
		}
	}
	if r := (Reservation{Type: "v100", StartS: T + 720}).Reason(); r.Kind != Reserved || r.String() == "" {
		t.Fatal(r)
	}
}

// TestReservationFirstRound: the reservation is made at the round's
// start, so the round that makes it already holds its GPUs back. A gang
// that has just waited ReserveAfterS, four GPUs of which one is pinned for
// two more rounds, one held past its pin and two idle; newcomers that
// would be pinned past the reservation's start do not start on its GPUs
// (before, one started on an idle GPU and its pin pushed the reservation
// a full minimum runtime later), one that finishes before it backfills,
// and the job past its pin keeps its GPU as a backfill (its notice, with
// CheckpointAware, comes the round before the start).
func TestReservationFirstRound(t *testing.T) {
	const T = reserveT
	c, one := reservationCase()
	c.jobs[0].ArrivalS = T - 360 // waited exactly ReserveAfterS
	c.add(one("pin", 1e6))
	c.add(one("old", 1e6))
	c.add(one("long", 1e6))
	c.add(one("long2", 1e6))
	c.add(one("short", 300))
	c.running = []Assignment{{Jobs: []string{"pin"}, Type: "v100", GPUs: []string{"g0"}, Action: Keep},
		{Jobs: []string{"old"}, Type: "v100", GPUs: []string{"g1"}, Action: Keep}}
	x := xSolve(map[string]float64{"gang": 0.1, "pin": 0.2, "old": 0.2, "long": 0.3, "long2": 0.3, "short": 0.2})
	for _, ca := range []bool{false, true} {
		e := mustNew(t, Config{Policy: "test_perf", Solve: x, MinRuntimeS: 1440, ReserveAfterS: 360, CheckpointAware: ca})
		s := c.snapshot()
		p := mustRound(t, e, s)
		checkPlan(t, s, p, 2)
		if len(p.Reservations) != 1 || p.Reservations[0].SinceS != T || p.Reservations[0].StartS != T+720 {
			t.Fatalf("ca=%v: %+v", ca, p.Reservations)
		}
		for _, a := range p.Assignments {
			for _, id := range a.Jobs {
				ji := intentOf(p, id)
				if a.Action == Start && ji.Reason.Kind != Backfills {
					t.Fatalf("ca=%v: %s starts on reserved GPUs %v: %v", ca, id, a.GPUs, ji.Reason)
				}
			}
		}
		if ji := intentOf(p, "short"); ji == nil || ji.Intent != IntentAdmit || ji.Reason.Kind != Backfills {
			t.Fatalf("ca=%v: short: %+v", ca, ji)
		}
		if ji := intentOf(p, "old"); ji == nil || ji.Intent != IntentKeep || !slices.Equal(ji.GPUs, []string{"g1"}) ||
			ji.Checkpoint || ji.Reason.Kind != Backfills {
			t.Fatalf("ca=%v: old: %+v", ca, ji)
		}
	}
}

// TestOptionsOffUnchanged: with every option off the new job fields change
// nothing: plans (and histories) equal a default engine's on snapshots
// without them.
func TestOptionsOffUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 21))
	for trial := range 100 {
		compat := trial%2 == 0
		a := mustNew(t, Config{Policy: "test_perf", GavelCompat: compat, Solve: isolatedSolve})
		b := mustNew(t, Config{Policy: "test_perf", GavelCompat: compat, Solve: isolatedSolve, MinRuntimeS: 0, ReserveAfterS: 0})
		s := randomSnapshot(r, []int{1, 2, 4}[trial%3])
		for range 4 {
			with := *s
			with.Jobs = slices.Clone(s.Jobs)
			for i := range with.Jobs {
				j := &with.Jobs[i]
				j.RunSinceS, j.CheckpointAtS = s.TimeS-float64(r.IntN(3000)), s.TimeS-float64(r.IntN(500))
				j.CheckpointS, j.RestoreS = float64(r.IntN(100)), float64(r.IntN(1000))
			}
			pa, pb := mustRound(t, a, s), mustRound(t, b, &with)
			if !reflect.DeepEqual(pa.Assignments, pb.Assignments) || !reflect.DeepEqual(pa.Suspend, pb.Suspend) ||
				!reflect.DeepEqual(pa.Intents, pb.Intents) || pb.Reservations != nil {
				t.Fatalf("trial %d: plans differ:\n%+v\n%+v", trial, pa, pb)
			}
			for _, ji := range pb.Intents {
				if ji.Checkpoint {
					t.Fatal(ji)
				}
			}
			s.Running = pa.Assignments
			s.TimeS += 360
			for _, as := range pa.Assignments {
				for i := range s.Jobs {
					if s.Jobs[i].ID == as.Jobs[0] {
						s.Jobs[i].ReceivedS[as.Type] += 360
					}
				}
			}
		}
		ha, _ := a.MarshalHistory()
		hb, _ := b.MarshalHistory()
		if string(ha) != string(hb) {
			t.Fatalf("trial %d: histories differ", trial)
		}
	}
}

// TestPreemptHistory: an engine restored from a JSON copy of another's
// history, taken while pins run on the engine's own records, a job is
// noticed and a reservation is in force, decides as the original from
// then on; an old history without that state still loads.
func TestPreemptHistory(t *testing.T) {
	cuts := 0
	for seed := range 40 {
		cfg := Config{Policy: "test_perf", Solve: isolatedSolve, MinRuntimeS: 3 * 360, CheckpointAware: true, ReserveAfterS: 720}
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		c := gangSim()
		c.setSince = false // the pins run on the engine's records
		for i := range c.jobs {
			c.jobs[i].CheckpointS = 30
			c.jobs[i].RestoreS = float64(r.IntN(400))
		}
		a := mustNew(t, cfg)
		var b *Engine
		for round := range 30 {
			if r.IntN(2) == 0 {
				c.add(Job{ID: fmt.Sprint("new", round), ScaleFactor: 1 + r.IntN(2), Throughput: map[string]float64{"v100": 1},
					TotalSteps: 1e9, RemainingSteps: 360 * float64(1+r.IntN(8)), CheckpointS: 30, RestoreS: float64(r.IntN(400))})
			}
			s := c.snapshot()
			if b == nil {
				h := a.History()
				if len(h.RunStartS) > 0 && len(h.Noticed) > 0 && h.Reservation != nil && len(h.WaitSinceS) > 0 {
					js, err := a.MarshalHistory()
					if err != nil {
						t.Fatal(err)
					}
					b = mustNew(t, cfg)
					if err := b.UnmarshalHistory(js); err != nil {
						t.Fatal(err)
					}
					cuts++
				}
			}
			pa := mustRound(t, a, s)
			if b != nil {
				pb := mustRound(t, b, s)
				ja, _ := json.Marshal(pa)
				jb, _ := json.Marshal(pb)
				if string(ja) != string(jb) {
					t.Fatalf("seed %d round %d: restored engine differs:\n%s\n%s", seed, round, ja, jb)
				}
			}
			c.apply(pa)
		}
	}
	if cuts == 0 {
		t.Fatal("no history with all the new state")
	}
	// An old history (none of the new fields) loads into an engine with
	// the options on.
	old := mustNew(t, Config{Policy: "test_perf", Solve: isolatedSolve})
	mustRound(t, old, gangSim().snapshot())
	js, _ := old.MarshalHistory()
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_start_s", "noticed", "wait_since_s", "reservation"} {
		if _, ok := m[k]; ok {
			t.Fatalf("a default engine's history has %s", k)
		}
	}
	e := mustNew(t, Config{Policy: "test_perf", Solve: isolatedSolve, MinRuntimeS: 360, CheckpointAware: true, ReserveAfterS: 720})
	if err := e.UnmarshalHistory(js); err != nil {
		t.Fatal(err)
	}
	mustRound(t, e, gangSim().snapshot())
}

package engine

import (
	"fmt"
	"reflect"
	"testing"
)

// toyCluster is a tiny deterministic backend: 2 V100 + 1 K80 on two
// servers, jobs arriving at given rounds, each running job credited the
// round's time and its throughput's steps.
type toyCluster struct {
	roundS  float64
	now     float64
	gpus    []GPU
	jobs    []Job
	arrive  map[int][]Job
	running []Assignment
	round   int
}

func newToyCluster() *toyCluster {
	c := &toyCluster{roundS: 60, arrive: map[int][]Job{},
		gpus: []GPU{{ID: "v0", Type: "v100", Server: "a"}, {ID: "v1", Type: "v100", Server: "a"}, {ID: "k0", Type: "k80", Server: "b"}}}
	mk := func(i int, v, k, steps float64) Job {
		return Job{ID: fmt.Sprintf("j%d", i), ScaleFactor: 1, Weight: 1, Throughput: map[string]float64{"v100": v, "k80": k},
			TotalSteps: steps, RemainingSteps: steps, ReceivedS: map[string]float64{}}
	}
	c.arrive[0] = []Job{mk(0, 10, 3, 20000), mk(1, 8, 4, 30000), mk(2, 5, 4, 25000)}
	c.arrive[2] = []Job{mk(3, 12, 2, 15000), mk(4, 6, 5, 40000)}
	c.arrive[7] = []Job{mk(5, 9, 1, 30000)}
	return c
}

func (c *toyCluster) snapshot() *Snapshot {
	for _, j := range c.arrive[c.round] {
		j.ArrivalS = c.now
		c.jobs = append(c.jobs, j)
	}
	s := &Snapshot{TimeS: c.now, GPUs: c.gpus, Running: c.running}
	for _, j := range c.jobs {
		cp := j
		cp.ReceivedS = map[string]float64{}
		for k, v := range j.ReceivedS {
			cp.ReceivedS[k] = v
		}
		s.Jobs = append(s.Jobs, cp)
	}
	return s
}

func (c *toyCluster) enforce(p *Plan) {
	for _, a := range p.Assignments {
		for i := range c.jobs {
			j := &c.jobs[i]
			if j.ID == a.Jobs[0] {
				j.ReceivedS[a.Type] += c.roundS
				j.RemainingSteps -= j.Throughput[a.Type] * c.roundS
			}
		}
	}
	kept := c.jobs[:0]
	for _, j := range c.jobs {
		if j.RemainingSteps > 0 {
			kept = append(kept, j)
		}
	}
	c.jobs = kept
	c.running = p.Assignments
	c.now += c.roundS
	c.round++
}

// TestHistoryRestart: an engine restored from a JSON copy of another's
// history, taken mid-run, makes exactly the decisions the original makes
// from then on (priorities to 1e-9); a fresh engine (no history) does not.
func TestHistoryRestart(t *testing.T) {
	freshDiffers := 0
	for _, policy := range []string{"max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf"} {
		for _, cut := range []int{4, 9} {
			c := newToyCluster()
			a, err := New(Config{Policy: policy, RoundS: c.roundS, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			var b, fresh *Engine
			for r := 0; r < 24 && (r == 0 || len(c.jobs) > 0); r++ {
				if r == cut {
					js, err := a.MarshalHistory()
					if err != nil {
						t.Fatal(err)
					}
					if b, err = New(Config{Policy: policy, RoundS: c.roundS, Seed: 3}); err != nil {
						t.Fatal(err)
					}
					if err := b.UnmarshalHistory(js); err != nil {
						t.Fatal(err)
					}
					fresh, _ = New(Config{Policy: policy, RoundS: c.roundS, Seed: 3})
				}
				s := c.snapshot()
				pa, err := a.Round(s)
				if err != nil {
					t.Fatal(err)
				}
				if b != nil {
					pb, err := b.Round(s)
					if err != nil {
						t.Fatal(err)
					}
					// Priorities to 1e-9 (samePlacement): the restored
					// engine's first recompute is cold, the original's
					// LAS re-solve incremental (not history), which may
					// move the last bits.
					if !samePlacement(pa.Assignments, pb.Assignments) || !reflect.DeepEqual(pa.Suspend, pb.Suspend) ||
						pa.Recomputed != pb.Recomputed {
						t.Fatalf("%s, restored at round %d: round %d differs:\noriginal %+v (recomputed %v)\nrestored %+v (recomputed %v)",
							policy, cut, r, pa.Assignments, pa.Recomputed, pb.Assignments, pb.Recomputed)
					}
					pf, err := fresh.Round(s)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(pa.Assignments, pf.Assignments) || pa.Recomputed != pf.Recomputed {
						freshDiffers++
					}
				}
				c.enforce(pa)
			}
			if b == nil {
				t.Fatalf("%s: the run ended before round %d", policy, cut)
			}
		}
	}
	if freshDiffers == 0 {
		t.Errorf("an engine without the history decided the same in every round: the test shows nothing")
	}
	t.Logf("rounds where an engine without history decided differently: %d", freshDiffers)
}

// TestHistoryPolicyMismatch: a history is only taken by an engine of the
// same policy.
func TestHistoryPolicyMismatch(t *testing.T) {
	a, _ := New(Config{Policy: "max_min_fairness_perf"})
	b, _ := New(Config{Policy: "fifo"})
	js, err := a.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalHistory(js); err == nil {
		t.Errorf("a fifo engine took a max_min_fairness_perf history")
	}
}

// BenchmarkMarshalHistory: the agent's per-round cost of saving the
// history, 1,000 jobs on 3 types after a few rounds.
func BenchmarkMarshalHistory(b *testing.B) {
	s := &Snapshot{}
	for i := range 48 {
		t := []string{"v100", "p100", "k80"}[i%3]
		s.GPUs = append(s.GPUs, GPU{ID: fmt.Sprintf("g%d", i), Type: t, Server: fmt.Sprintf("s%d", i/4)})
	}
	for i := range 1000 {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("j%d", i), ScaleFactor: 1, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
			Throughput: map[string]float64{"v100": 3 + float64(i%7), "p100": 2 + float64(i%5), "k80": 1 + float64(i%3)},
			ReceivedS:  map[string]float64{"v100": float64(i % 11), "k80": float64(i % 13)}})
	}
	e, _ := New(Config{Policy: "max_min_fairness_perf", RoundS: 360, Solve: isolatedSolve})
	for range 3 {
		if _, err := e.Round(s); err != nil {
			b.Fatal(err)
		}
		s.TimeS += 360
		s.Jobs = s.Jobs[:len(s.Jobs)-1] // a completion: recompute, baselines set
	}
	var n int
	b.ResetTimer()
	for range b.N {
		h, err := e.MarshalHistory()
		if err != nil {
			b.Fatal(err)
		}
		n = len(h)
	}
	b.ReportMetric(float64(n), "bytes")
}

package fair

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// harness loops rounds: it credits each assigned job RoundS of ReceivedS
// on its type and feeds the plan back as Running.
type harness struct {
	t       testing.TB
	s       *Scheduler
	roundS  float64
	gpus    []engine.GPU
	jobs    []engine.Job
	running []engine.Assignment
	timeS   float64
	plan    *engine.Plan
	// gpuQ is GPU-quanta (quantum = one round here) received per job.
	gpuQ map[string]float64
	// userQ is GPU-rounds per user, reset by the tests.
	userQ map[string]float64
}

func newHarness(t testing.TB, cfg Config, gpus []engine.GPU) *harness {
	t.Helper()
	if cfg.RoundS == 0 {
		cfg.RoundS = 360
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, s: s, roundS: cfg.RoundS, gpus: gpus, gpuQ: map[string]float64{}, userQ: map[string]float64{}}
}

// cluster is servers × per GPUs of type typ (servers named typ-s0...).
func cluster(typ string, servers, per int) []engine.GPU {
	var out []engine.GPU
	for s := 0; s < servers; s++ {
		for g := 0; g < per; g++ {
			out = append(out, engine.GPU{ID: fmt.Sprintf("%s-s%02d-g%02d", typ, s, g), Type: typ, Server: fmt.Sprintf("%s-s%02d", typ, s)})
		}
	}
	return out
}

func job(id, user string, gpus int, tput map[string]float64) engine.Job {
	if tput == nil {
		tput = map[string]float64{"v100": 1}
	}
	return engine.Job{ID: id, User: user, ScaleFactor: gpus, Throughput: tput, ReceivedS: map[string]float64{}}
}

func (h *harness) add(jobs ...engine.Job) { h.jobs = append(h.jobs, jobs...) }

func (h *harness) remove(ids ...string) {
	h.jobs = slices.DeleteFunc(h.jobs, func(j engine.Job) bool { return slices.Contains(ids, j.ID) })
	h.running = slices.DeleteFunc(h.running, func(a engine.Assignment) bool { return slices.Contains(ids, a.Jobs[0]) })
}

func (h *harness) find(id string) *engine.Job {
	for i := range h.jobs {
		if h.jobs[i].ID == id {
			return &h.jobs[i]
		}
	}
	return nil
}

// step runs one round, checks the plan's invariants and credits it.
func (h *harness) step() *engine.Plan {
	h.t.Helper()
	snap := &engine.Snapshot{TimeS: h.timeS, GPUs: h.gpus, Jobs: h.jobs, Running: h.running}
	p, err := h.s.Round(snap)
	if err != nil {
		h.t.Fatal(err)
	}
	gpu := map[string]engine.GPU{}
	for _, g := range h.gpus {
		gpu[g.ID] = g
	}
	used := map[string]string{}
	for _, a := range p.Assignments {
		j := h.find(a.Jobs[0])
		if j == nil {
			h.t.Fatalf("round %d: unknown job %s", h.s.st.Rounds, a.Jobs[0])
		}
		if len(a.GPUs) != j.ScaleFactor {
			h.t.Fatalf("job %s: %d GPUs, wants %d", j.ID, len(a.GPUs), j.ScaleFactor)
		}
		for _, g := range a.GPUs {
			if o, ok := used[g]; ok {
				h.t.Fatalf("GPU %s to %s and %s", g, o, j.ID)
			}
			used[g] = j.ID
			if gg, ok := gpu[g]; !ok || gg.Failed || gg.Type != a.Type {
				h.t.Fatalf("job %s on bad GPU %s", j.ID, g)
			}
		}
		j.ReceivedS[a.Type] += h.roundS
		h.gpuQ[j.ID] += float64(j.ScaleFactor)
		u := j.User
		if u == "" {
			u = "default"
		}
		h.userQ[u] += float64(j.ScaleFactor)
	}
	h.running = p.Assignments
	h.timeS += h.roundS
	h.plan = p
	return p
}

func (h *harness) steps(n int) {
	for i := 0; i < n; i++ {
		h.step()
	}
}

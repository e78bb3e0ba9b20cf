package agent

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// fakeBackend: two GPUs, three jobs; it records the plans.
type fakeBackend struct {
	mu      sync.Mutex
	plans   []*engine.Plan
	running []engine.Assignment
	t       float64
}

func (f *fakeBackend) Observe() (*engine.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &engine.Snapshot{TimeS: f.t, GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}, {ID: "g1", Type: "v100", Server: "n", Failed: true}},
		Running: f.running}
	for _, id := range []string{"a", "b", "c"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100, ReceivedS: map[string]float64{}})
	}
	return s, nil
}

func (f *fakeBackend) Enforce(p *engine.Plan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans = append(f.plans, p)
	f.running = p.Assignments
	f.t += 1
	return nil
}

func TestAgentRoundsAndStatus(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackend{}
	a := New(Config{Backend: fb, Engine: e, Round: 20 * time.Millisecond, Cluster: "test", Policy: "max_min_fairness_perf",
		VCs: []VC{{Name: "research", Policy: "max_min_fairness_perf"}}})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	status := func() Status {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s Status
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Run until three rounds are done (however slow the machine), then stop.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for status().Round < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := status()
	if s.Round < 3 || s.Cluster != "test" || len(s.VCs) != 1 || s.NextRound.IsZero() {
		t.Errorf("status: %+v", s)
	}
	u := s.Types["v100"]
	if u.Total != 2 || u.Failed != 1 || u.Used != 1 {
		t.Errorf("usage: %+v", u)
	}
	running := 0
	for _, j := range s.Jobs {
		if j.State == "running" {
			running++
		}
	}
	if running != 1 || len(s.Jobs) != 3 {
		t.Errorf("jobs: %+v", s.Jobs)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.plans) != s.Round {
		t.Errorf("%d plans enforced for %d rounds", len(fb.plans), s.Round)
	}
}

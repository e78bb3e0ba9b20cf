package agent

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/throughputs"
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
			TotalSteps: 100, RemainingSteps: 100, ReceivedS: map[string]float64{}, VC: "research"})
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
		// The allocation in force: three equal jobs on one healthy V100.
		if x := j.X["v100"]; math.Abs(x-1.0/3) > 1e-6 {
			t.Errorf("job %s: X %v, want a third of the V100", j.ID, j.X)
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

// Job states as `rondo job status` shows them: queued before any GPU time,
// running with a throughput and an ETA, suspended after it ran, done when
// it leaves the snapshot; rounds count the rounds it got GPUs.
func TestJobStates(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}}
	job := func(id string, received float64) engine.Job {
		return engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 2}, TotalSteps: 100,
			RemainingSteps: 40, ReceivedS: map[string]float64{"v100": received}}
	}
	byID := func() map[string]JobStatus {
		out := map[string]JobStatus{}
		for _, j := range a.Status().Jobs {
			out[j.ID] = j
		}
		return out
	}
	run := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}}}}
	a.record(&engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{job("a", 0), job("b", 0)}}, run, 1)
	a.record(&engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{job("a", 360), job("b", 0)}}, run, 2)
	js := byID()
	if js["a"].State != "running" || js["a"].Rounds != 2 || js["a"].Throughput != 2 || js["a"].ETA == nil {
		t.Fatalf("a: %+v", js["a"])
	}
	if d := time.Until(*js["a"].ETA); d < 15*time.Second || d > 25*time.Second {
		t.Fatalf("ETA in %v, want ~20s (40 steps at 2/s)", d)
	}
	if js["b"].State != "queued" || js["b"].Rounds != 0 {
		t.Fatalf("b: %+v", js["b"])
	}
	// b runs, a is suspended; then a finishes (leaves the snapshot).
	runB := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"g0"}}}}
	a.record(&engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{job("a", 720), job("b", 0)}}, runB, 3)
	if js = byID(); js["a"].State != "suspended" || js["b"].State != "running" {
		t.Fatalf("round 3: a %+v, b %+v", js["a"], js["b"])
	}
	a.record(&engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{job("b", 360)}}, runB, 4)
	if js = byID(); js["a"].State != "done" || js["a"].ETA != nil || js["b"].Rounds != 2 {
		t.Fatalf("round 4: a %+v, b %+v", js["a"], js["b"])
	}
}

// recordingDecider keeps the snapshots the engine would see.
type recordingDecider struct {
	mu   sync.Mutex
	seen []*engine.Snapshot
}

func (r *recordingDecider) Round(s *engine.Snapshot) (*engine.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
	return &engine.Plan{}, nil
}

// Throughputs reported through the lease API replace the table's values in
// what the engine decides on (learned online, Gavel §3.3): the agent hands
// each round the reports since the last one (engine.Job.Measured, their
// mean), the estimating stage learns them and amends the throughputs.
func TestMeasuredThroughputReachesEngine(t *testing.T) {
	fb := &fakeBackend{}
	rd := &recordingDecider{}
	a := New(Config{Backend: fb, Engine: &round.Estimating{Next: rd, Online: estimator.NewOnline(0, nil)}, Round: time.Hour, Cluster: "test"})
	ctx := context.Background()
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	report := func(v float64) {
		t.Helper()
		if err := a.Report(ctx, lease.Caller{Job: "b", IdentityJob: "b"}, lease.Progress{GPUType: "v100", StepsDone: 1, ThroughputStepsPerS: v, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// seen checks what the engine saw at the last round: b's throughput
	// (its measurements reach the snapshot once, and only b's), the others
	// the fake backend's table value.
	seen := func(wantB float64, measured bool) {
		t.Helper()
		rd.mu.Lock()
		defer rd.mu.Unlock()
		last := rd.seen[len(rd.seen)-1]
		for _, j := range last.Jobs {
			want := 1.0
			if j.ID == "b" {
				want = wantB
			}
			if got := j.Throughput["v100"]; math.Abs(got-want) > 1e-9 {
				t.Errorf("round %d: job %s: engine saw %g steps/s on v100, want %g", len(rd.seen), j.ID, got, want)
			}
			if (j.ID == "b" && measured) != (len(j.Measured) > 0) {
				t.Errorf("round %d: job %s: measured %v", len(rd.seen), j.ID, j.Measured)
			}
		}
	}
	for _, v := range []float64{3, 3.2, 2.8} {
		report(v)
	}
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	seen(3, true)
	// No new report: the estimate stands (the last reports are not fed again).
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	seen(3, false)
	// A second round's report is the second sample: the mean of 3 and 4.
	report(4)
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	seen(3.5, true)
	// The state keeps the last report and the number of reports.
	if m, ok := a.Measured("b", "v100"); !ok || m.StepsPerSec != 4 || m.Samples != 4 {
		t.Errorf("state's measurement %+v %v", m, ok)
	}
	// A report measured next to a partner (space sharing) is a pair
	// throughput: not learned as b's own.
	if err := a.Report(ctx, lease.Caller{Job: "b", IdentityJob: "b"}, lease.Progress{GPUType: "v100", StepsDone: 2, ThroughputStepsPerS: 1,
		Partner: "a", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	seen(3.5, false)
}

// pairBackend offers the pair (a, b) on v100 as the table measured it.
type pairBackend struct{ fakeBackend }

func (p *pairBackend) Observe() (*engine.Snapshot, error) {
	s, _ := p.fakeBackend.Observe()
	s.Pairs = []engine.Pair{{Jobs: [2]string{"a", "b"}, Throughput: map[string][2]float64{"v100": {0.5, 0.5}}}}
	return s, nil
}

// TestPairReportsReachRound: what two jobs report while sharing GPUs
// reaches the round as their pair's measurement (both sides, each its
// mean since the last round) and is learned as the pair's throughput; a
// pair only one side of which reported is not measured.
func TestPairReportsReachRound(t *testing.T) {
	rd := &recordingDecider{}
	a := New(Config{Backend: &pairBackend{}, Engine: &round.Estimating{Next: rd, Online: estimator.NewOnline(0, nil),
		Pairs: round.NewPairEstimates(throughputs.Default())}, Round: time.Hour, Cluster: "test"})
	ctx := context.Background()
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	report := func(job, partner string, v float64) {
		t.Helper()
		if err := a.Report(ctx, lease.Caller{Job: job, IdentityJob: job}, lease.Progress{GPUType: "v100", StepsDone: 1,
			ThroughputStepsPerS: v, Partner: partner, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	last := func() engine.Pair {
		rd.mu.Lock()
		defer rd.mu.Unlock()
		return rd.seen[len(rd.seen)-1].Pairs[0]
	}
	report("a", "b", 0.3)
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := last().Throughput["v100"]; got != [2]float64{0.5, 0.5} {
		t.Fatalf("one side reported: the round saw %v, want the table's", got)
	}
	report("a", "b", 0.3)
	report("a", "b", 0.4)
	report("b", "a", 0.6)
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := last().Throughput["v100"]; math.Abs(got[0]-0.35) > 1e-9 || got[1] != 0.6 {
		t.Fatalf("both reported: the round saw %v, want [0.35 0.6]", got)
	}
	for _, j := range rd.seen[len(rd.seen)-1].Jobs {
		if len(j.Measured) > 0 {
			t.Errorf("job %s: a pair report learned as its own throughput %v", j.ID, j.Measured)
		}
	}
}

// TestStatusXUnderVCEngines: with per-VC engines deciding, /v1/status shows
// each job's x from its VC's engine.
func TestStatusXUnderVCEngines(t *testing.T) {
	sp := cells.Spec{
		Types: []cells.CellType{{Name: "v100", GPUType: "v100"}, {Name: "v100-node", Child: "v100", Count: 2, Node: true}},
		Cells: []cells.TopCell{{Name: "top", Type: "v100-node"}},
		VCs:   []cells.VC{{Name: "research", Quota: []cells.Quota{{Type: "v100-node", Count: 1}}}},
	}
	d, err := round.NewCells(round.CellsConfig{Spec: sp, NodeOfCell: map[string]string{"top": "n"},
		Policies: []string{"max_min_fairness_perf"}, RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Backend: &fakeBackend{}, Engine: d, Round: time.Second})
	a.Step()
	st := a.Status()
	if len(st.Jobs) != 3 {
		t.Fatalf("jobs %+v", st.Jobs)
	}
	sum := 0.0
	for _, j := range st.Jobs {
		x, ok := j.X["v100"]
		if !ok || x <= 0 {
			t.Errorf("job %s: x %v under per-VC engines", j.ID, j.X)
		}
		sum += x
	}
	// The VC's engine shares its quota's 2 virtual GPUs among the three
	// jobs (its view: the failed g1 is not bound to a virtual GPU yet).
	if sum < 2-1e-3 || sum > 2+1e-3 {
		t.Errorf("x sums to %.3f, want the VC's 2 virtual GPUs", sum)
	}
}

// childBackend schedules two dispatched children of "p" and knows which
// allocation belongs to which.
type childBackend struct {
	fakeBackend
	owners  map[string]string
	lookups int
}

func (c *childBackend) Observe() (*engine.Snapshot, error) {
	s := &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}, {ID: "g1", Type: "v100", Server: "n"}}}
	for _, id := range []string{"p/dispatch-1-a", "p/dispatch-2-b"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100, ReceivedS: map[string]float64{}})
	}
	return s, nil
}

func (c *childBackend) AllocJob(ctx context.Context, ns, alloc string) (string, error) {
	c.lookups++
	if ns != "default" {
		return "", nil
	}
	return c.owners[alloc], nil
}

// TestLeaseChildJobs: a dispatched child, whose identity names its parent,
// gets leases and reports progress for itself only; without a backend that
// can tell allocations apart, children are refused.
func TestLeaseChildJobs(t *testing.T) {
	ctx := context.Background()
	b := &childBackend{owners: map[string]string{"alloc-1": "p/dispatch-1-a", "alloc-2": "p/dispatch-2-b"}}
	a := newTestAgent(t, b, nil, nil)
	a.Step()
	c1 := lease.Caller{Namespace: "default", Job: "p/dispatch-1-a", IdentityJob: "p", Alloc: "alloc-1"}
	if g, err := a.Lease(ctx, c1); err != nil || !g.Continue {
		t.Fatalf("child's own lease: %+v %v", g, err)
	}
	if err := a.Report(ctx, c1, lease.Progress{GPUType: "v100", StepsDone: 7, ThroughputStepsPerS: 2}); err != nil {
		t.Fatal(err)
	}
	if v, ok := a.Reported("p/dispatch-1-a"); !ok || v != 7 {
		t.Errorf("child's progress %v %v", v, ok)
	}
	// Its token also names p, but its allocation is not the sibling's.
	sib := c1
	sib.Job = "p/dispatch-2-b"
	if _, err := a.Lease(ctx, sib); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("lease for a sibling: %v", err)
	}
	if err := a.Report(ctx, sib, lease.Progress{GPUType: "v100", StepsDone: 99, ThroughputStepsPerS: 2}); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("report for a sibling: %v", err)
	}
	if _, ok := a.Reported("p/dispatch-2-b"); ok {
		t.Errorf("the sibling's progress was recorded")
	}
	// Another namespace's allocation of the same id is not the child's.
	other := c1
	other.Namespace = "prod"
	if _, err := a.Lease(ctx, other); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("lease from another namespace: %v", err)
	}
	if b.lookups != 2 {
		t.Errorf("%d allocation lookups, want 2 (cached per namespace and allocation)", b.lookups)
	}
	// A backend that cannot tell allocations apart: children are unknown.
	a2 := newTestAgent(t, &fakeBackend{}, nil, nil)
	a2.Step()
	if _, err := a2.Lease(ctx, lease.Caller{Namespace: "default", Job: "a/dispatch-1", IdentityJob: "a", Alloc: "x"}); !errors.Is(err, lease.ErrUnknownJob) {
		t.Errorf("child without an AllocOwner backend: %v", err)
	}
}

// roleBackend tells the roles of job "a"'s allocations (agent.RoleTeller).
type roleBackend struct {
	fakeBackend
	err error
}

func (r *roleBackend) Roles(_ context.Context, ns, job, alloc string) (*lease.Roles, error) {
	if r.err != nil {
		return nil, r.err
	}
	if job != "a" {
		return nil, nil
	}
	return &lease.Roles{Role: lease.RoleWorker, Workers: 3, PS: 1, Batch: lease.BatchShare(256, 3, 2), TotalBatch: 256}, nil
}

// TestLeaseTwoRole: a two-role job's task gets its role, the counts and its
// batch from the backend in its lease; other jobs none; when the backend
// cannot tell, the lease goes without them. Epochs reported are kept.
func TestLeaseTwoRole(t *testing.T) {
	ctx := context.Background()
	b := &roleBackend{}
	a := newTestAgent(t, b, nil, nil)
	a.Step()
	g, err := a.Lease(ctx, lease.Caller{Namespace: "default", Job: "a", IdentityJob: "a", Alloc: "x"})
	if err != nil || g.Roles == nil || *g.Roles != (lease.Roles{Role: "worker", Workers: 3, PS: 1, Batch: 85, TotalBatch: 256}) {
		t.Fatalf("two-role lease %+v %v", g.Roles, err)
	}
	if g, err := a.Lease(ctx, lease.Caller{Namespace: "default", Job: "b", IdentityJob: "b", Alloc: "y"}); err != nil || g.Roles != nil {
		t.Fatalf("one-role lease %+v %v", g.Roles, err)
	}
	b.err = errors.New("nomad down")
	if g, err := a.Lease(ctx, lease.Caller{Namespace: "default", Job: "a", IdentityJob: "a", Alloc: "x"}); err != nil || g.Roles != nil {
		t.Fatalf("lease while the backend cannot tell: %+v %v", g.Roles, err)
	}
	if _, ok := a.ReportedEpochs("a"); ok {
		t.Fatal("epochs before any report")
	}
	if err := a.Report(ctx, lease.Caller{Job: "a", IdentityJob: "a"}, lease.Progress{GPUType: "v100", StepsDone: 40, ThroughputStepsPerS: 1,
		EpochsDone: 1.5, HasEpochs: true}); err != nil {
		t.Fatal(err)
	}
	if e, ok := a.ReportedEpochs("a"); !ok || e != 1.5 {
		t.Errorf("epochs %v %v", e, ok)
	}
	if s, _ := a.Reported("a"); s != 40 {
		t.Errorf("steps %v", s)
	}
}

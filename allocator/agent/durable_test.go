package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/allocator/telemetry"
)

// memStore is a Store kept as JSON in memory, with a save counter.
type memStore struct {
	mu    sync.Mutex
	raw   []byte
	saves int
}

func (m *memStore) Load(ctx context.Context) (*state.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := state.New()
	if m.raw != nil {
		if err := json.Unmarshal(m.raw, st); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (m *memStore) Save(ctx context.Context, st *state.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st.SavedAt = time.Now()
	b, err := json.Marshal(st)
	m.raw, m.saves = b, m.saves+1
	return err
}

func (m *memStore) state(t *testing.T) *state.State {
	st, err := m.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// durableBackend is fakeBackend plus Durable: it credits running jobs one
// second per round and records what the agent restored and reconciled.
type durableBackend struct {
	fakeBackend
	epoch      time.Time
	received   map[string]map[string]float64
	arrival    map[string]float64
	reconciled []state.Intent
	onEnforce  func(p *engine.Plan)
}

func (d *durableBackend) Observe() (*engine.Snapshot, error) {
	s, _ := d.fakeBackend.Observe()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.ReceivedS = map[string]float64{}
		for k, v := range d.received[j.ID] {
			j.ReceivedS[k] = v
		}
		j.ArrivalS = d.arrival[j.ID]
	}
	return s, nil
}

func (d *durableBackend) Enforce(p *engine.Plan) error {
	d.mu.Lock()
	for _, a := range p.Assignments {
		for _, j := range a.Jobs {
			if d.received[j] == nil {
				d.received[j] = map[string]float64{}
			}
			d.received[j][a.Type]++
		}
	}
	f := d.onEnforce
	d.mu.Unlock()
	if f != nil {
		f(p)
	}
	return d.fakeBackend.Enforce(p)
}

func (d *durableBackend) Restore(epoch time.Time, arrival map[string]float64, received map[string]map[string]float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch, d.arrival, d.received = epoch, arrival, map[string]map[string]float64{}
	for k, v := range received {
		d.received[k] = v
	}
}

func (d *durableBackend) Epoch() time.Time { return time.Unix(1000, 0) }

func (d *durableBackend) Intents(p *engine.Plan) []state.Intent {
	var out []state.Intent
	for _, a := range p.Assignments {
		if a.Action == engine.Start {
			out = append(out, state.Intent{Job: a.Jobs[0], Action: "admit", GPUs: a.GPUs, JobModifyIndex: 7})
		}
	}
	for _, id := range p.Suspend {
		out = append(out, state.Intent{Job: id, Action: "suspend", JobModifyIndex: 7})
	}
	return out
}

func (d *durableBackend) Reconcile(pending []state.Intent) (applied, rolled []string, err error) {
	d.reconciled = append(d.reconciled, pending...)
	for _, in := range pending {
		if in.Job == "a" {
			applied = append(applied, in.Job)
		} else {
			rolled = append(rolled, in.Job)
		}
	}
	return applied, rolled, nil
}

func newTestAgent(t *testing.T, b loop.Backend, store Store, tel *telemetry.Telemetry) *Agent {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Backend: b, Engine: e, Round: time.Second, Store: store, Telemetry: tel,
		CheckpointDir: func(j string) string { return "/ckpt/" + j }})
}

// TestDurableRestart: the state (round, received time, arrival, epoch)
// survives a restart; a decision left in flight is reconciled, not replayed.
func TestDurableRestart(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	b1 := &durableBackend{received: map[string]map[string]float64{}}
	a1 := newTestAgent(t, b1, store, nil)
	if err := a1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var inFlight *state.State
	b1.onEnforce = func(*engine.Plan) {
		// What a crash mid-enforcement would leave behind.
		inFlight = store.state(t)
	}
	for i := 0; i < 4; i++ {
		if err := a1.StepContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := store.state(t)
	if st.Round != 4 || st.InFlight != nil || st.Epoch.Unix() != 1000 {
		t.Fatalf("after 4 rounds: round %d, in flight %v, epoch %v", st.Round, st.InFlight, st.Epoch)
	}
	if inFlight == nil || inFlight.InFlight == nil || inFlight.InFlight.Round != 4 {
		t.Fatalf("the decision was not saved before enforcing: %+v", inFlight)
	}
	total := 0.0
	for _, m := range st.Received {
		total += m["v100"]
	}
	if total < 3 { // credited after rounds 1..3 (round 4's credit lands after its Observe)
		t.Errorf("received time not recorded: %v", st.Received)
	}

	// Restart from the state saved mid-enforcement of round 4.
	inFlight.InFlight.Intents = append(inFlight.InFlight.Intents,
		state.Intent{Job: "a", Action: "admit", JobModifyIndex: 7}, state.Intent{Job: "b", Action: "suspend", JobModifyIndex: 7, Applied: true})
	raw, _ := json.Marshal(inFlight)
	store2 := &memStore{raw: raw}
	b2 := &durableBackend{received: map[string]map[string]float64{}}
	a2 := newTestAgent(t, b2, store2, nil)
	if err := a2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if a2.Status().Round != 4 {
		t.Errorf("round after restart %d, want 4", a2.Status().Round)
	}
	for _, in := range b2.reconciled {
		if in.Applied {
			t.Errorf("applied intent reconciled again: %+v", in)
		}
	}
	if got := a2.Status().Reconciled; got["a"] != "applied" || len(b2.reconciled) == 0 {
		t.Errorf("reconciled %v (%d intents)", got, len(b2.reconciled))
	}
	if st := store2.state(t); st.InFlight != nil {
		t.Errorf("decision still in flight after reconcile")
	}
	if b2.epoch.Unix() != 1000 || len(b2.received) == 0 {
		t.Errorf("history not restored: epoch %v received %v", b2.epoch, b2.received)
	}
	if err := a2.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if r := store2.state(t).Round; r != 5 {
		t.Errorf("round after a restarted round %d, want 5", r)
	}
}

// conflictStore fails every save with a CAS conflict.
type conflictStore struct{ memStore }

func (c *conflictStore) Save(ctx context.Context, st *state.State) error { return state.ErrConflict }

func TestLostStateStopsEnforcing(t *testing.T) {
	fb := &fakeBackend{}
	a := newTestAgent(t, fb, &conflictStore{}, nil)
	a.smu.Lock()
	a.st = state.New()
	a.smu.Unlock()
	err := a.StepContext(context.Background())
	if !errors.Is(err, ErrLostState) {
		t.Fatalf("err %v, want ErrLostState", err)
	}
	if len(fb.plans) != 0 {
		t.Errorf("a plan was enforced although the decision could not be recorded")
	}
}

func TestLeaseProgressAndMetrics(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackend{}
	a := newTestAgent(t, fb, nil, tel)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lease(ctx, lease.Caller{Job: "a", IdentityJob: "a"}); !errors.Is(err, lease.ErrUnknownJob) {
		t.Errorf("lease before any round: %v", err)
	}
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	running := fb.plans[0].Assignments[0].Jobs[0]
	for _, id := range []string{"a", "b", "c"} {
		g, err := a.Lease(ctx, lease.Caller{Job: id, IdentityJob: id})
		if err != nil {
			t.Fatal(err)
		}
		if g.Continue != (id == running) || g.Round != 1 || g.CheckpointDir != "/ckpt/"+id || !g.ExpiresAt.After(time.Now()) {
			t.Errorf("lease %s: %+v (running %s)", id, g, running)
		}
		a.Event(id, "admit")
	}
	if _, err := a.Lease(ctx, lease.Caller{Job: "zz", IdentityJob: "zz"}); !errors.Is(err, lease.ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := a.Lease(ctx, lease.Caller{Job: "a/dispatch-1", IdentityJob: "a"}); !errors.Is(err, lease.ErrUnknownJob) {
		t.Errorf("child job: %v", err)
	}
	if err := a.Report(ctx, lease.Caller{Job: "a", IdentityJob: "a"}, lease.Progress{GPUType: "v100", StepsDone: 42, ThroughputStepsPerS: 3.5, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if v, ok := a.Reported("a"); !ok || v != 42 {
		t.Errorf("reported %v %v", v, ok)
	}
	if m, ok := a.Measured("a", "v100"); !ok || m.StepsPerSec != 3.5 || m.Samples != 1 {
		t.Errorf("measured %+v %v", m, ok)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`rondo_decisions_total{kind="admit"} 3`, "rondo_round_duration_seconds_bucket", `rondo_jobs{state="running",vc="research"} 1`, "rondo_rounds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// creditBackend is durableBackend plus Creditor: each Observe marks every
// job credited up to the snapshot's time, holding "alloc-<job>".
type creditBackend struct {
	durableBackend
	restored map[string]state.Credit
	marks    map[string]state.Credit
}

func (c *creditBackend) Observe() (*engine.Snapshot, error) {
	s, err := c.durableBackend.Observe()
	c.marks = map[string]state.Credit{}
	for _, j := range s.Jobs {
		c.marks[j.ID] = state.Credit{AtS: s.TimeS, Allocs: []string{"alloc-" + j.ID}}
	}
	return s, err
}

func (c *creditBackend) CreditMarks() map[string]state.Credit { return c.marks }

func (c *creditBackend) RestoreCredit(m map[string]state.Credit) { c.restored = m }

// TestCreditMarksSurviveRestart: each round saves the credit marks of the
// snapshot whose received time it saves, and a restarted agent hands them
// back to the backend before its first Observe.
func TestCreditMarksSurviveRestart(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	b1 := &creditBackend{durableBackend: durableBackend{received: map[string]map[string]float64{}}}
	a1 := newTestAgent(t, b1, store, nil)
	if err := a1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var mid *state.State
	b1.onEnforce = func(*engine.Plan) { mid = store.state(t) }
	for i := 0; i < 3; i++ {
		if err := a1.StepContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The decision recorded before round 3's enforcement carries round 3's
	// observation time (2: the fake clock advances once per Enforce).
	if len(mid.Credit) != 3 || mid.Credit["a"].AtS != 2 || mid.Credit["a"].Allocs[0] != "alloc-a" {
		t.Fatalf("credit marks saved with the decision: %+v", mid.Credit)
	}
	raw, _ := json.Marshal(mid)
	b2 := &creditBackend{durableBackend: durableBackend{received: map[string]map[string]float64{}}}
	a2 := newTestAgent(t, b2, &memStore{raw: raw}, nil)
	if err := a2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if len(b2.restored) != 3 || b2.restored["b"].AtS != 2 {
		t.Errorf("credit marks restored: %+v", b2.restored)
	}
	// A state written before marks existed restores none (and still loads).
	mid.Credit = nil
	raw, _ = json.Marshal(mid)
	b3 := &creditBackend{durableBackend: durableBackend{received: map[string]map[string]float64{}}}
	if err := newTestAgent(t, b3, &memStore{raw: raw}, nil).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if len(b3.restored) != 0 {
		t.Errorf("marks from nowhere: %+v", b3.restored)
	}
	// A finished job's mark goes with it.
	st := state.New()
	st.Credit = map[string]state.Credit{"x": {AtS: 1}}
	st.Arrival["x"] = 0
	st.RemoveJob("x")
	if len(st.Credit) != 0 {
		t.Errorf("RemoveJob kept the credit mark")
	}
}

// TestMeasurementsSurviveRestart: the state keeps each job's last measured
// throughput per GPU type; a restarted agent's estimating stage starts
// from it (one sample), and a decider swapped in with the same estimator
// carries on from what it learned rather than being fed the state again.
func TestMeasurementsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	rd1 := &recordingDecider{}
	on := estimator.NewOnline(0, nil)
	a1 := New(Config{Backend: &fakeBackend{}, Engine: &round.Estimating{Next: rd1, Online: on}, Round: time.Hour, Store: store})
	if err := a1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	report := func(a *Agent, typ string, v float64) {
		t.Helper()
		if err := a.Report(ctx, lease.Caller{Job: "b", IdentityJob: "b"}, lease.Progress{GPUType: typ, StepsDone: 1, ThroughputStepsPerS: v, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(a *Agent) {
		t.Helper()
		if err := a.StepContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// lastB is b's throughputs in the last snapshot rd decided on.
	lastB := func(rd *recordingDecider) map[string]float64 {
		rd.mu.Lock()
		defer rd.mu.Unlock()
		for _, j := range rd.seen[len(rd.seen)-1].Jobs {
			if j.ID == "b" {
				return j.Throughput
			}
		}
		t.Fatal("no job b")
		return nil
	}
	step(a1)
	report(a1, "v100", 3)
	report(a1, "k80", 2) // a type the backend's table lacks
	step(a1)
	report(a1, "v100", 5)
	step(a1)
	if got := lastB(rd1); got["v100"] != 4 || got["k80"] != 2 {
		t.Fatalf("before the restart the engine saw %v, want v100 4 (mean of 3, 5), k80 2", got)
	}

	// The same estimator under a new decider (SIGHUP, lost leader lock):
	// what it learned stands, the state is not fed again.
	rd2 := &recordingDecider{}
	a1.Reconfigure(&round.Estimating{Next: rd2, Online: on}, "", time.Hour, nil)
	step(a1)
	if got := lastB(rd2); got["v100"] != 4 {
		t.Errorf("after swapping the decider the engine saw v100 %g, want 4", got["v100"])
	}

	// A restarted agent: a fresh estimator starts from the state's last
	// report per type.
	raw := append([]byte(nil), store.raw...)
	rd3 := &recordingDecider{}
	a2 := New(Config{Backend: &fakeBackend{}, Engine: &round.Estimating{Next: rd3, Online: estimator.NewOnline(0, nil)},
		Round: time.Hour, Store: &memStore{raw: raw}})
	if err := a2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	step(a2)
	if got := lastB(rd3); got["v100"] != 5 || got["k80"] != 2 {
		t.Errorf("after a restart the engine saw %v, want the last reports v100 5, k80 2", got)
	}
	// New reports carry on from there: mean of the restored 5 and 2.
	report(a2, "v100", 2)
	step(a2)
	if got := lastB(rd3); got["v100"] != 3.5 {
		t.Errorf("after a restart and a report of 2 the engine saw v100 %g, want 3.5", got["v100"])
	}
}

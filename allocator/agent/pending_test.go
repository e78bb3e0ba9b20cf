package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// TestPendingThroughTheLoop: the agent's rounds explain every waiting job
// (the loop calls engine.Explain): on one healthy V100 two of the fake
// backend's three jobs wait behind the one running, in queue order.
func TestPendingThroughTheLoop(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Backend: &fakeBackend{}, Engine: e, Cluster: "test",
		VCs: []VC{{Name: "research", Policy: "max_min_fairness_perf"}}})
	for range 2 {
		if err := a.StepContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var pos []int
	var ahead string
	for _, j := range a.Status().Jobs {
		switch j.State {
		case "running":
			ahead = j.ID
			if j.Pending != "" || j.PendingKind != "" || j.WaitS != 0 || j.QueuePosition != 0 {
				t.Errorf("running job %s has pending fields: %+v", j.ID, j)
			}
		default:
			if j.PendingKind != "priority" || !strings.Contains(j.Pending, "lower priority than") || j.Priority <= 0 {
				t.Errorf("waiting job %s: %+v", j.ID, j)
			}
			pos = append(pos, j.QueuePosition)
		}
	}
	slices.Sort(pos)
	if !slices.Equal(pos, []int{1, 2}) {
		t.Errorf("queue positions %v, want 1 and 2", pos)
	}
	for _, j := range a.Status().Jobs {
		if j.State != "running" && !strings.Contains(j.Pending, ahead) {
			t.Errorf("%s: %q does not name the running job %s", j.ID, j.Pending, ahead)
		}
	}
}

// TestPendingReasons: each waiting reason's fields and state, the wait
// since arrival (never ran) or since the job stopped, and a job that
// refuses to fit anywhere is unschedulable.
func TestPendingReasons(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n0"}, {ID: "g1", Type: "v100", Server: "n1"}}
	job := func(id string, sf int, arrival float64) engine.Job {
		return engine.Job{ID: id, ScaleFactor: sf, Throughput: map[string]float64{"v100": 1}, TotalSteps: 100,
			RemainingSteps: 100, ArrivalS: arrival}
	}
	s := &engine.Snapshot{TimeS: 100, GPUs: gpus, Jobs: []engine.Job{job("a", 1, 0), job("b", 1, 10), job("big", 4, 20)}}
	run := engine.Assignment{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}, Servers: []string{"n0"}, Priority: 2}
	p := &engine.Plan{Assignments: []engine.Assignment{run}}
	engine.Explain(s, p)
	engine.Annotate(s, p, nil)
	a.record(s, p, 1)
	js := map[string]JobStatus{}
	for _, j := range a.Status().Jobs {
		js[j.ID] = j
	}
	if b := js["b"]; b.State != "queued" || b.PendingKind != "priority" || b.QueuePosition != 1 || b.WaitS != 90 ||
		b.Pending != "lower priority than a (priority 0 vs 2)" {
		t.Errorf("b: %+v", b)
	}
	if big := js["big"]; big.State != "unschedulable" || big.PendingKind != "unschedulable" || big.QueuePosition != 0 ||
		!strings.Contains(big.Pending, "a gang of 4 GPUs, the most it can ever hold is 2 (v100)") || big.WaitS != 80 {
		t.Errorf("big: %+v", big)
	}
	// a is suspended at t=200 (it ran) and waits since then.
	ran := job("a", 1, 0)
	ran.ReceivedS, ran.Started = map[string]float64{"v100": 100}, true
	s2 := &engine.Snapshot{TimeS: 200, GPUs: gpus, Jobs: []engine.Job{ran, job("b", 1, 10)}, Running: []engine.Assignment{run}}
	p2 := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"g1"}, Priority: 3}},
		Suspend: []string{"a"}}
	engine.Explain(s2, p2)
	engine.Annotate(s2, p2, nil)
	a.record(s2, p2, 2)
	s3 := &engine.Snapshot{TimeS: 260, GPUs: gpus, Jobs: s2.Jobs, Running: p2.Assignments}
	p3 := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"g1"}, Priority: 3}}}
	engine.Explain(s3, p3)
	engine.Annotate(s3, p3, nil)
	a.record(s3, p3, 3)
	for _, j := range a.Status().Jobs {
		js[j.ID] = j
	}
	if aa := js["a"]; aa.State != "suspended" || aa.WaitS != 60 || aa.PendingKind != "priority" {
		t.Errorf("a after its suspension: %+v", aa)
	}
	if b := js["b"]; b.WaitS != 0 || b.Pending != "" || b.State != "running" {
		t.Errorf("b running: %+v", b)
	}
	// The history: admit, suspend, wait.
	h, _ := a.Job("a")
	var got []string
	for _, e := range h.History {
		got = append(got, fmt.Sprintf("%d:%s", e.Round, e.Intent))
	}
	if want := []string{"1:admit", "2:suspend", "3:wait"}; !slices.Equal(got, want) {
		t.Errorf("a's history %v, want %v", got, want)
	}
	hb, _ := a.Job("b")
	got = nil
	for _, e := range hb.History {
		got = append(got, fmt.Sprintf("%d:%s", e.Round, e.Intent))
	}
	if want := []string{"1:wait", "2:admit"}; !slices.Equal(got, want) {
		t.Errorf("b's history %v, want %v (keep is not an event)", got, want)
	}
	if hb.History[0].Reason != "lower priority than a (priority 0 vs 2)" || hb.History[1].Type != "v100" || hb.History[1].GPUs != 1 {
		t.Errorf("b's events: %+v", hb.History)
	}
	// big left: it is done and keeps its history.
	if d, ok := a.Job("big"); !ok || d.State != "done" || len(d.History) != 1 {
		t.Errorf("big after it left: %+v %v", d, ok)
	}
}

// TestHistoryRing: a job's history keeps its last 100 events; a change of
// pending kind is an event, the same kind again is not.
func TestHistoryRing(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n0"}}
	j := engine.Job{ID: "j", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, TotalSteps: 100, RemainingSteps: 100}
	s := &engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{j}}
	on := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"j"}, Type: "v100", GPUs: []string{"g0"}}}}
	for r := 1; r <= 120; r++ {
		// Alternately admitted (or resumed) and suspended.
		if r%2 == 1 {
			s.Running = nil
			engine.Annotate(s, on, nil)
			a.record(s, on, r)
		} else {
			s.Running = on.Assignments
			off := &engine.Plan{Suspend: []string{"j"}}
			engine.Annotate(s, off, nil)
			a.record(s, off, r)
		}
	}
	h, _ := a.Job("j")
	if len(h.History) != historyLen || h.History[0].Round != 21 || h.History[historyLen-1].Round != 120 {
		t.Fatalf("history: %d events, rounds %d..%d", len(h.History), h.History[0].Round, h.History[len(h.History)-1].Round)
	}
	// Waiting for the same reason for rounds: one event; another kind: one more.
	a2 := New(Config{Cluster: "test"})
	w := engine.Job{ID: "w", ScaleFactor: 2, Throughput: map[string]float64{"v100": 1}, TotalSteps: 1, RemainingSteps: 1}
	for r := 1; r <= 5; r++ {
		s := &engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{w}}
		if r == 4 {
			s.GPUs = append(s.GPUs, engine.GPU{ID: "g1", Type: "v100", Server: "n1"}) // fits now, but waits
		}
		p := &engine.Plan{}
		engine.Explain(s, p)
		a2.record(s, p, r)
	}
	h, _ = a2.Job("w")
	var kinds []string
	for _, e := range h.History {
		kinds = append(kinds, fmt.Sprintf("%d:%s:%s", e.Round, e.Intent, strings.SplitN(e.Reason, ":", 2)[0]))
	}
	if want := []string{"1:wait:unschedulable", "4:wait:waits for a gang of 2 GPUs on one server", "5:wait:unschedulable"}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// TestJobEndpoint: GET /v1/jobs/{id} answers one job with its history, a
// 404 with a JSON error for a job the agent does not list; /v1/status
// carries no history.
func TestJobEndpoint(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Backend: &fakeBackend{}, Engine: e, Cluster: "test",
		VCs: []VC{{Name: "research", Policy: "max_min_fairness_perf"}}})
	for range 3 {
		if err := a.StepContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", path, ct)
		}
		return resp.StatusCode, b
	}
	code, body := get("/v1/status")
	if code != 200 || strings.Contains(string(body), `"history"`) {
		t.Errorf("status %d carries a history: %s", code, body)
	}
	n := 0
	for _, id := range []string{"a", "b", "c"} {
		code, body := get("/v1/jobs/" + id)
		var js JobStatus
		if err := json.Unmarshal(body, &js); code != 200 || err != nil || js.ID != id {
			t.Fatalf("%s: %d %v %s", id, code, err, body)
		}
		n += len(js.History)
		for _, e := range js.History {
			if e.Intent == "keep" || e.Reason == "" || e.Round < 1 || e.Time.IsZero() {
				t.Errorf("%s: event %+v", id, e)
			}
		}
	}
	if n == 0 {
		t.Error("no job has a history")
	}
	code, body = get("/v1/jobs/nope")
	var msg map[string]string
	if err := json.Unmarshal(body, &msg); code != 404 || err != nil || !strings.Contains(msg["error"], "nope") {
		t.Errorf("unknown job: %d %s", code, body)
	}
}

// rejectingBackend: one GPU; a job of a declared VC, one of an undeclared
// VC, an opportunistic one of an undeclared VC (rejected too), and one the
// backend rejects itself.
type rejectingBackend struct{ fakeBackend }

func (f *rejectingBackend) Observe() (*engine.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	job := func(id, vc string, class engine.Class) engine.Job {
		return engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1, TotalSteps: 100,
			RemainingSteps: 100, VC: vc, Class: class, User: "ann"}
	}
	return &engine.Snapshot{TimeS: f.t, GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}}, Running: f.running,
		Jobs: []engine.Job{job("ok", "research", ""), job("lost", "nowhere", ""), job("opp", "nowhere", engine.Opportunistic)},
		Rejected: []engine.Rejection{{Job: "bad", Namespace: "team", VC: "research",
			Reason: `bad rondo meta: meta rondo.steps = "abc": must be a positive number`}}}, nil
}

// TestRejected: a job of an undeclared VC is rejected by the agent (the
// round never sees it), a backend's rejection is listed as it came;
// neither is leased, both have a history event.
func TestRejected(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	fb := &rejectingBackend{}
	a := New(Config{Backend: fb, Engine: e, Cluster: "test",
		VCs: []VC{{Name: "research", Policy: "max_min_fairness_perf"}, {Name: "dev", Policy: "fifo"}}})
	for range 2 {
		if err := a.StepContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	js := map[string]JobStatus{}
	for _, j := range a.Status().Jobs {
		js[j.ID] = j
	}
	lost := js["lost"]
	if lost.State != "rejected" || lost.PendingKind != "rejected" || lost.VC != "nowhere" || lost.User != "ann" ||
		lost.Pending != `VC "nowhere" is not declared (declared: research, dev)` {
		t.Errorf("lost: %+v", lost)
	}
	bad := js["bad"]
	if bad.State != "rejected" || bad.Namespace != "team" || !strings.Contains(bad.Pending, `rondo.steps = "abc"`) {
		t.Errorf("bad: %+v", bad)
	}
	if o := js["opp"]; o.State != "rejected" {
		t.Errorf("an opportunistic job of an undeclared VC: %+v", o)
	}
	if ok := js["ok"]; ok.State == "rejected" {
		t.Errorf("a job of a declared VC: %+v", ok)
	}
	fb.mu.Lock()
	for _, p := range fb.plans {
		for _, in := range p.Intents {
			if in.Job == "lost" || in.Job == "bad" {
				t.Errorf("the round saw a rejected job: %+v", in)
			}
		}
	}
	fb.mu.Unlock()
	a.mu.Lock()
	if a.known["lost"] || a.known["bad"] {
		t.Error("a rejected job is known to the lease API")
	}
	a.mu.Unlock()
	h, ok := a.Job("lost")
	if !ok || len(h.History) != 1 || h.History[0].Intent != "reject" {
		t.Errorf("lost's history: %+v", h.History)
	}
	// A job of an undeclared VC that holds GPUs stays in the round (it is
	// suspended by a VC decider, or kept by the one engine) until it stops.
	sn := &engine.Snapshot{Jobs: []engine.Job{{ID: "held", VC: "gone"}, {ID: "idle", VC: "gone"}},
		Running: []engine.Assignment{{Jobs: []string{"held"}, Type: "v100", GPUs: []string{"g0"}}}}
	a.rejectUndeclared(sn)
	if len(sn.Jobs) != 1 || sn.Jobs[0].ID != "held" || len(sn.Rejected) != 1 || sn.Rejected[0].Job != "idle" {
		t.Errorf("running job of an undeclared VC: jobs %+v, rejected %+v", sn.Jobs, sn.Rejected)
	}
	// Without declared VCs nothing is rejected by the agent.
	a2 := New(Config{Backend: &rejectingBackend{}, Engine: e, Cluster: "test", Round: time.Second})
	if err := a2.StepContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, j := range a2.Status().Jobs {
		if j.State == "rejected" && j.ID != "bad" || j.ID == "lost" && j.PendingKind == "rejected" {
			t.Errorf("rejected without declared VCs: %+v", j)
		}
	}
}

package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// namespacedBackend: jobs of two namespaces naming VCs that list
// namespaces, one without a namespace, and two with the same id in two
// namespaces (keyed "id" and "team-b/id", as the Nomad backend keys them).
type namespacedBackend struct{ fakeBackend }

func (f *namespacedBackend) Observe() (*engine.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	job := func(id, ns, vc string) engine.Job {
		return engine.Job{ID: id, Namespace: ns, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 100, RemainingSteps: 100, VC: vc, User: ns}
	}
	return &engine.Snapshot{TimeS: f.t, GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}, {ID: "g1", Type: "v100", Server: "n"}},
		Running: f.running, Jobs: []engine.Job{job("a-in-a", "team-a", "a"), job("b-in-a", "team-b", "a"),
			job("b-in-open", "team-b", "open"), job("nons", "", "a"), job("same", "team-a", "a"), job("team-b/same", "team-b", "a")}}, nil
}

// TestNamespaceRule: a job whose namespace a VC's namespaces do not list
// is rejected with the reason naming namespace and VC (the round never
// sees it); a VC without namespaces is open; a job without a namespace is
// not restricted; a job holding GPUs stays until it stops.
func TestNamespaceRule(t *testing.T) {
	e, err := engine.New(engine.Config{Policy: "fifo", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	fb := &namespacedBackend{}
	a := New(Config{Backend: fb, Engine: e, Cluster: "test",
		VCs: []VC{{Name: "a", Policy: "fifo", Namespaces: []string{"team-a"}}, {Name: "open", Policy: "fifo"}}})
	for range 2 {
		if err := a.StepContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	js := map[string]JobStatus{}
	for _, j := range a.Status().Jobs {
		js[j.ID] = j
	}
	want := `namespace "team-b" may not use VC "a" (its namespaces: team-a)`
	for _, id := range []string{"b-in-a", "team-b/same"} {
		if j := js[id]; j.State != "rejected" || j.PendingKind != "rejected" || j.Pending != want || j.Namespace != "team-b" {
			t.Errorf("%s: %+v", id, j)
		}
	}
	for _, id := range []string{"a-in-a", "b-in-open", "nons", "same"} {
		if j, ok := js[id]; !ok || j.State == "rejected" {
			t.Errorf("%s: %+v (listed %v)", id, j, ok)
		}
	}
	if j := js["a-in-a"]; j.Namespace != "team-a" {
		t.Errorf("a-in-a's namespace: %q", j.Namespace)
	}
	fb.mu.Lock()
	for _, p := range fb.plans {
		for _, in := range p.Intents {
			if in.Job == "b-in-a" || in.Job == "team-b/same" {
				t.Errorf("the round saw a refused job: %+v", in)
			}
		}
	}
	fb.mu.Unlock()
	h, ok := a.Job("b-in-a")
	if !ok || len(h.History) != 1 || h.History[0].Intent != "reject" || h.History[0].Reason != want {
		t.Errorf("b-in-a's history: %+v", h.History)
	}
	// A key with a slash through the status API, escaped or not.
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	for _, path := range []string{"/v1/jobs/team-b%2Fsame", "/v1/jobs/team-b/same"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var j JobStatus
		err = json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || j.ID != "team-b/same" || j.Pending != want {
			t.Errorf("GET %s: %d %+v %v", path, resp.StatusCode, j, err)
		}
	}
	// Holding GPUs (a reload took its namespace off the VC): left to run.
	sn := &engine.Snapshot{Jobs: []engine.Job{{ID: "held", Namespace: "team-b", VC: "a"}, {ID: "idle", Namespace: "team-b", VC: "a"}},
		Running: []engine.Assignment{{Jobs: []string{"held"}, Type: "v100", GPUs: []string{"g0"}}}}
	a.rejectNamespaces(sn)
	if len(sn.Jobs) != 1 || sn.Jobs[0].ID != "held" || len(sn.Rejected) != 1 || sn.Rejected[0].Job != "idle" {
		t.Errorf("running job of another namespace: jobs %+v, rejected %+v", sn.Jobs, sn.Rejected)
	}
}

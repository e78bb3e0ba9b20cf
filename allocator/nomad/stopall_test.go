package nomad

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// slowScales answers scale calls after a delay, counting how many are in
// flight at once; everything else goes to the fake.
type slowScales struct {
	f              *fakeNomad
	inFlight, most atomic.Int32
	mu             sync.Mutex
	scaled         []string
}

func (s *slowScales) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/scale") {
		s.f.ServeHTTP(w, r)
		return
	}
	n := s.inFlight.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(20 * time.Millisecond)
	s.inFlight.Add(-1)
	s.mu.Lock()
	s.scaled = append(s.scaled, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/job/"), "/scale"))
	s.mu.Unlock()
	w.Header().Set("X-Nomad-Index", "1")
	fmt.Fprint(w, "{}")
}

// slowScalesBackend is a backend on f behind slowScales, observed once;
// events collects its job events ("id:event").
func slowScalesBackend(t *testing.T, f *fakeNomad) (*slowScales, *Backend, *[]string) {
	t.Helper()
	s := &slowScales{f: f}
	events := new([]string)
	b, err := New(Config{Client: serveClient(t, s), AckTimeout: 5 * time.Second, Progress: func(*api.Job) (float64, bool) { return 0, false },
		OnEvent: func(id, ev string) { *events = append(*events, id+":"+ev) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Observe(); err != nil {
		t.Fatal(err)
	}
	return s, b, events
}

// A round that suspends many jobs issues their scale calls a few at a time
// (a full rotation stops every running job), and still reports the
// suspensions in the plan's order.
func TestSuspendsIssuedConcurrently(t *testing.T) {
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}}
	var ids []string
	for i := range 24 {
		id := fmt.Sprintf("j%02d", 23-i) // the plan's order is not the ids'
		f.jobs = append(f.jobs, resJob(id))
		ids = append(ids, id)
	}
	s, b, events := slowScalesBackend(t, f)
	if err := b.Enforce(&engine.Plan{Suspend: ids}); err != nil {
		t.Fatal(err)
	}
	if len(s.scaled) != len(ids) {
		t.Fatalf("%d scale calls for %d suspensions", len(s.scaled), len(ids))
	}
	if m := s.most.Load(); m < 2 || m > startParallelism {
		t.Fatalf("%d scale calls in flight at most, want 2..%d", m, startParallelism)
	}
	var want []string
	for _, id := range ids {
		want = append(want, id+":suspend")
	}
	if !slices.Equal(*events, want) {
		t.Fatalf("events %v, want the plan's order %v", *events, want)
	}
}

// Jobs in the GPU pool with a count but no allocation Rondo placed (an
// agent died between a start's registration and its placement; a job
// submitted straight to the pool) are withdrawn, or gated when never
// admitted, a few scale calls at a time, reported in id order.
func TestWithdrawalsIssuedConcurrently(t *testing.T) {
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}}
	var want []string
	for i := range 16 {
		id := fmt.Sprintf("w%02d", 15-i)
		job := resJob(id)
		job.NodePool = ptr("rondo")
		if i%2 == 0 { // admitted: pinned to a node
			job.TaskGroups[0].Constraints = append(job.TaskGroups[0].Constraints, api.NewConstraint(nodeTarget, "=", "n1"))
		}
		f.jobs = append(f.jobs, job)
	}
	for i := range 16 {
		ev := "gate"
		if (15-i)%2 == 0 {
			ev = "withdraw"
		}
		want = append(want, fmt.Sprintf("w%02d:%s", i, ev))
	}
	s, b, events := slowScalesBackend(t, f)
	if err := b.Enforce(&engine.Plan{}); err != nil {
		t.Fatal(err)
	}
	if len(s.scaled) != 16 {
		t.Fatalf("%d scale calls for 16 withdrawals", len(s.scaled))
	}
	if m := s.most.Load(); m < 2 || m > startParallelism {
		t.Fatalf("%d scale calls in flight at most, want 2..%d", m, startParallelism)
	}
	if !slices.Equal(*events, want) {
		t.Fatalf("events %v, want %v", *events, want)
	}
}

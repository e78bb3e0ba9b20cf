package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/lease"
)

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

type leaseCall struct {
	path string
	code int
}

type fakeAllocator struct {
	mu      sync.Mutex
	calls   []leaseCall
	callers []lease.Caller
	reports []lease.Progress
}

func (f *fakeAllocator) Lease(_ context.Context, c lease.Caller) (lease.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callers = append(f.callers, c)
	return lease.Grant{Continue: true, ExpiresAt: time.Now().Add(time.Minute), Round: 1, CheckpointDir: "/tmp/ckpt"}, nil
}

func (f *fakeAllocator) Report(_ context.Context, c lease.Caller, p lease.Progress) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callers = append(f.callers, c)
	f.reports = append(f.reports, p)
	return nil
}

// TestLeaseAPIWorkloadIdentity runs a raw_exec task that calls the lease API
// with jobs/lease-client.sh and its real Nomad workload identity: accepted
// for its own job, 403 for another job id, 401 with the default identity
// (wrong audience).
func TestLeaseAPIWorkloadIdentity(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	if testing.Short() {
		t.Skip("e2e: starts a Nomad agent")
	}
	a := StartAgent(t, AgentOptions{ACL: true})
	c := a.Client()

	fa := &fakeAllocator{}
	srv := &lease.Server{Verifier: lease.NewJWKSVerifier(a.HTTPAddr, "rondo-lease"), Decider: fa, Sink: fa, Logf: t.Logf}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sr := &statusRecorder{ResponseWriter: w, code: 200}
		h.ServeHTTP(sr, r)
		fa.mu.Lock()
		fa.calls = append(fa.calls, leaseCall{r.URL.Path, sr.code})
		fa.mu.Unlock()
	}))
	defer ts.Close()

	script := filepath.Join(moduleRoot(t), "jobs", "lease-client.sh")
	cmd := `set -x
S=` + quote(script) + `
sh "$S" progress 1200 3.5 a100 || exit 10
sh "$S" lease || exit 11
RONDO_JOB=someone-else sh "$S" lease && exit 12
RONDO_IDENTITY_FILE="$NOMAD_SECRETS_DIR/nomad_token" sh "$S" lease && exit 13
exit 0
`
	job := api.NewBatchJob("train", "train", "global", 50)
	task := api.NewTask("main", "raw_exec").SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", cmd})
	task.Env = map[string]string{"RONDO_LEASE_ADDR": ts.URL}
	task.Resources = &api.Resources{CPU: new(100), MemoryMB: new(64)}
	task.Identity = &api.WorkloadIdentity{File: true} // default identity, aud nomadproject.io
	task.Identities = []*api.WorkloadIdentity{{Name: "rondo", Audience: []string{"rondo-lease"}, File: true, TTL: time.Hour}}
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: new(0), Unlimited: new(false)}
	job.AddTaskGroup(tg)
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register: %v", err)
	}

	var alloc *api.AllocationListStub
	a.WaitFor(60*time.Second, "task to finish", func() (bool, error) {
		allocs, _, err := c.Jobs().Allocations("train", false, nil)
		if err != nil || len(allocs) == 0 {
			return false, nil
		}
		alloc = allocs[0]
		return alloc.ClientStatus == "complete" || alloc.ClientStatus == "failed", nil
	})
	logs := func() string {
		var out string
		for _, f := range []string{"main.stdout.0", "main.stderr.0"} {
			b, _ := os.ReadFile(filepath.Join(a.Dir, "data", "alloc", alloc.ID, "alloc", "logs", f))
			out += f + ":\n" + string(b) + "\n"
		}
		return out
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if alloc.ClientStatus != "complete" {
		t.Fatalf("task %s (calls %+v)\n%s", alloc.ClientStatus, fa.calls, logs())
	}
	want := []leaseCall{{"/v1/progress", 204}, {"/v1/lease", 200}, {"/v1/lease", 403}, {"/v1/lease", 401}}
	if len(fa.calls) != len(want) {
		t.Fatalf("calls %+v, want %+v\n%s", fa.calls, want, logs())
	}
	for i := range want {
		if fa.calls[i] != want[i] {
			t.Fatalf("call %d: %+v, want %+v\n%s", i, fa.calls[i], want[i], logs())
		}
	}
	for _, cl := range fa.callers {
		if cl.Job != "train" || cl.IdentityJob != "train" || cl.Alloc != alloc.ID || cl.Namespace != "default" || cl.Task != "main" {
			t.Fatalf("caller %+v, want job train, alloc %s", cl, alloc.ID)
		}
	}
	if len(fa.reports) != 1 || fa.reports[0].StepsDone != 1200 || fa.reports[0].ThroughputStepsPerS != 3.5 || fa.reports[0].GPUType != "a100" {
		t.Fatalf("reports %+v", fa.reports)
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/lease"
)

// fakeVerifier accepts tokens "job:alloc".
type fakeVerifier struct{}

func (fakeVerifier) Verify(_ context.Context, tok string) (*lease.Identity, error) {
	job, alloc, ok := strings.Cut(tok, ":")
	if !ok {
		return nil, lease.ErrInvalidToken
	}
	return &lease.Identity{Namespace: "default", Job: job, Alloc: alloc}, nil
}

type rec struct {
	mu  sync.Mutex
	got []lease.Progress
}

func (r *rec) Lease(_ context.Context, c lease.Caller) (lease.Grant, error) {
	g := lease.Grant{Continue: c.Job == "train" || c.Job == "victim", ExpiresAt: time.Unix(1900000000, 0), Round: 4, CheckpointDir: "/ck"}
	if c.Job == "victim" {
		g.CheckpointNow, g.StopAt = true, time.Unix(1900000060, 0)
	}
	if c.Job == "dl2" {
		g.Roles = &lease.Roles{Role: lease.RoleWorker, Workers: 3, PS: 1, Batch: lease.BatchShare(256, 3, 1), TotalBatch: 256}
	}
	return g, nil
}

func (r *rec) Report(_ context.Context, _ lease.Caller, p lease.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, p)
	return nil
}

func TestClientFromEnv(t *testing.T) {
	r := &rec{}
	srv := httptest.NewServer((&lease.Server{Verifier: fakeVerifier{}, Decider: r, Sink: r}).Handler())
	defer srv.Close()

	secrets := t.TempDir()
	t.Setenv("RONDO_LEASE_ADDR", strings.TrimPrefix(srv.URL, "http://")) // scheme optional
	t.Setenv("NOMAD_JOB_ID", "train")
	t.Setenv("NOMAD_ALLOC_ID", "a1")
	t.Setenv("NOMAD_NAMESPACE", "default")
	t.Setenv("NOMAD_SECRETS_DIR", secrets)
	t.Setenv("NOMAD_TOKEN", "")
	t.Setenv("NOMAD_TOKEN_rondo", "")
	t.Setenv("RONDO_IDENTITY_FILE", "")

	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Report(ctx, 10, 1.5, "a100"); err == nil || !strings.Contains(err.Error(), "no workload identity") {
		t.Fatalf("without a token: %v", err)
	}
	// The named identity's file; re-read on every call.
	if err := os.WriteFile(filepath.Join(secrets, "nomad_rondo.jwt"), []byte("train:a1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Report(ctx, 10, 1.5, "a100"); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lease(ctx)
	if err != nil || !l.Continue || l.Round != 4 || l.CheckpointDir != "/ck" || !l.LeaseExpiresAt.Equal(time.Unix(1900000000, 0)) {
		t.Fatalf("lease: %+v %v", l, err)
	}
	if len(r.got) != 1 || r.got[0].StepsDone != 10 || r.got[0].ThroughputStepsPerS != 1.5 || r.got[0].GPUType != "a100" {
		t.Fatalf("reports: %+v", r.got)
	}

	// NOMAD_TOKEN_rondo wins over the file; a token for another job is refused.
	t.Setenv("NOMAD_TOKEN_rondo", "other:a1")
	_, err = c.Lease(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Status != 403 || e.Field != "job" || e.Temporary() {
		t.Fatalf("token of another job: %v", err)
	}

	// A two-role job's worker: its role, the counts and its batch; its
	// epochs reported.
	t.Setenv("NOMAD_TOKEN_rondo", "dl2:a1")
	c.Job = "dl2"
	l, err = c.Lease(ctx)
	if err != nil || !l.TwoRole() || l.Role != "worker" || l.Workers != 3 || l.PS != 1 || l.Batch != 85 || l.TotalBatch != 256 {
		t.Fatalf("two-role lease: %+v %v", l, err)
	}
	ep := 2.5
	if err := c.Send(ctx, Progress{StepsDone: 20, StepsPerSec: 2, GPUType: "v100", EpochsDone: &ep}); err != nil {
		t.Fatal(err)
	}
	if p := r.got[len(r.got)-1]; !p.HasEpochs || p.EpochsDone != 2.5 || p.StepsDone != 20 {
		t.Fatalf("epochs report: %+v", p)
	}

	// A job given notice: checkpoint now, stop at stop_at; it reports
	// its checkpoint and what checkpoints and restarts cost it.
	t.Setenv("NOMAD_TOKEN_rondo", "victim:a1")
	c.Job = "victim"
	l, err = c.Lease(ctx)
	if err != nil || !l.CheckpointNow || !l.StopAt.Equal(time.Unix(1900000060, 0)) {
		t.Fatalf("notice: %+v %v", l, err)
	}
	at := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	ck, rs := 1.5, 4.0
	if err := c.Send(ctx, Progress{StepsDone: 30, StepsPerSec: 2, GPUType: "v100", CheckpointAt: at, CheckpointS: &ck, RestoreS: &rs}); err != nil {
		t.Fatal(err)
	}
	if p := r.got[len(r.got)-1]; !p.CheckpointAt.Equal(at) || !p.HasCheckpointS || p.CheckpointS != 1.5 || !p.HasRestoreS || p.RestoreS != 4 {
		t.Fatalf("checkpoint report: %+v", p)
	}
	if err := c.Send(ctx, Progress{StepsDone: 31, StepsPerSec: 2, GPUType: "v100"}); err != nil {
		t.Fatal(err)
	}
	if p := r.got[len(r.got)-1]; !p.CheckpointAt.IsZero() || p.HasCheckpointS || p.HasRestoreS {
		t.Fatalf("a report without them: %+v", p)
	}

	t.Setenv("RONDO_LEASE_ADDR", "")
	if _, err := FromEnv(); err == nil {
		t.Fatal("FromEnv without RONDO_LEASE_ADDR succeeded")
	}
}

// TestClientAddrFile: RONDO_LEASE_ADDR_FILE, re-read on every call, moves
// the client to the address a template re-rendered (the agents replaced);
// RONDO_LEASE_ADDR serves while the file names none.
func TestClientAddrFile(t *testing.T) {
	var srvs [2]*httptest.Server
	var recs [2]*rec
	for i := range srvs {
		recs[i] = &rec{}
		srvs[i] = httptest.NewServer((&lease.Server{Verifier: fakeVerifier{}, Decider: recs[i], Sink: recs[i]}).Handler())
		defer srvs[i].Close()
	}
	file := filepath.Join(t.TempDir(), "rondo-lease.env")
	t.Setenv("RONDO_LEASE_ADDR", "")
	t.Setenv("RONDO_LEASE_ADDR_FILE", file)
	t.Setenv("NOMAD_JOB_ID", "train")
	t.Setenv("NOMAD_ALLOC_ID", "a1")
	t.Setenv("NOMAD_TOKEN_rondo", "train:a1")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "names no address") {
		t.Fatalf("FromEnv without an address: %v", err)
	}
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The env file of jobs/deploy/team-train.nomad.hcl's template.
	write("\nRONDO_LEASE_ADDR=" + srvs[0].URL + "\n")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	report := func(steps int64) {
		t.Helper()
		if err := c.Report(ctx, steps, 1, "v100"); err != nil {
			t.Fatal(err)
		}
	}
	report(1)
	write("RONDO_LEASE_ADDR=" + strings.TrimPrefix(srvs[1].URL, "http://") + "/\n") // re-rendered
	report(2)
	write(srvs[0].URL + "\n") // a bare address
	report(3)
	os.Remove(file) // RONDO_LEASE_ADDR serves
	t.Setenv("RONDO_LEASE_ADDR", srvs[1].URL)
	if c, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	report(4)
	steps := func(r *rec) (out []int64) {
		for _, p := range r.got {
			out = append(out, p.StepsDone)
		}
		return out
	}
	if a, b := steps(recs[0]), steps(recs[1]); len(a) != 2 || a[0] != 1 || a[1] != 3 || len(b) != 2 || b[0] != 2 || b[1] != 4 {
		t.Fatalf("reports: first server %v, second %v; want [1 3] and [2 4]", a, b)
	}
}

// TestShellClient: jobs/lease-client.sh sends the optional progress
// fields and tells a notice apart (exit 0, a line on stderr), against the
// real server.
func TestShellClient(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	r := &rec{}
	srv := httptest.NewServer((&lease.Server{Verifier: fakeVerifier{}, Decider: r, Sink: r}).Handler())
	defer srv.Close()
	script, _ := filepath.Abs("../../../jobs/lease-client.sh")
	addrEnv := []string{"RONDO_LEASE_ADDR=" + srv.URL, "RONDO_LEASE_ADDR_FILE="}
	run := func(job string, args ...string) (int, string, string) {
		cmd := exec.Command("sh", append([]string{script}, args...)...)
		cmd.Env = append(append(os.Environ(), addrEnv...), "NOMAD_JOB_ID="+job, "NOMAD_ALLOC_ID=a1",
			"NOMAD_NAMESPACE=default", "RONDO_IDENTITY_FILE=", "NOMAD_TOKEN_rondo="+job+":a1")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	if code, _, e := run("train", "progress", "40", "2", "v100", "checkpoint_at="+at.Format(time.RFC3339), "checkpoint_s=1.5",
		"restore_s=3", "epochs_done=0.5"); code != 0 {
		t.Fatalf("progress: %d %s", code, e)
	}
	if p := r.got[len(r.got)-1]; p.StepsDone != 40 || !p.CheckpointAt.Equal(at) || p.CheckpointS != 1.5 || p.RestoreS != 3 ||
		!p.HasEpochs || p.EpochsDone != 0.5 {
		t.Fatalf("report %+v", p)
	}
	if code, out, _ := run("train", "progress", "40", "2", "v100", "restore_s=-1"); code != 1 || !strings.Contains(out, `"field":"restore_s"`) {
		t.Fatalf("a negative restore_s: %d %s", code, out)
	}
	if code, _, e := run("train", "progress", "40", "2", "v100", "bogus=1"); code != 2 || !strings.Contains(e, "unknown field bogus") {
		t.Fatalf("an unknown field: %d %s", code, e)
	}
	if code, out, e := run("victim", "lease"); code != 0 || !strings.Contains(out, `"checkpoint_now":true`) ||
		!strings.Contains(e, "checkpoint_now stop_at=2030-03-17T17:47:40Z") {
		t.Fatalf("notice: %d %s %s", code, out, e)
	}
	if code, _, e := run("train", "lease"); code != 0 || strings.Contains(e, "checkpoint_now") {
		t.Fatalf("a plain lease: %d %s", code, e)
	}
	if code, _, _ := run("other", "lease"); code != 3 {
		t.Fatalf("a lease that ends: %d, want 3", code)
	}
	// RONDO_LEASE_ADDR_FILE (a template's env file, or a bare address)
	// wins over RONDO_LEASE_ADDR, a dead agent's address here.
	file := filepath.Join(t.TempDir(), "rondo-lease.env")
	addrEnv = []string{"RONDO_LEASE_ADDR=http://127.0.0.1:9", "RONDO_LEASE_ADDR_FILE=" + file}
	if code, _, _ := run("train", "progress", "41", "2", "v100"); code == 0 {
		t.Fatal("progress to a dead address (no file yet) succeeded")
	}
	for i, text := range []string{"\nRONDO_LEASE_ADDR=" + srv.URL + "\n", strings.TrimPrefix(srv.URL, "http://") + "\n"} {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, e := run("train", "progress", fmt.Sprint(42+i), "2", "v100"); code != 0 || r.got[len(r.got)-1].StepsDone != int64(42+i) {
			t.Fatalf("progress with the address file %q: %d %s", text, code, e)
		}
	}
}

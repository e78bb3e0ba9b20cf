package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

func readCk(t *testing.T, dir string) checkpoint {
	t.Helper()
	var ck checkpoint
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestSuspendResume runs the real binary: SIGTERM checkpoints and exits 0,
// a restart resumes from the checkpoint and finishes.
func TestSuspendResume(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "RONDO_CHECKPOINT_DIR="+dir, "NOMAD_META_rondo.model=LM (batch size 20)",
		"NOMAD_META_rondo.steps=400", "RONDO_GPU_TYPE=v100", "CUDA_VISIBLE_DEVICES=GPU-0")
	cmd := exec.Command(bin)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the start line, so a slow machine cannot signal a trainer
	// that has not begun; then let it train about a second.
	started := bufio.NewScanner(stdout)
	if !started.Scan() || !strings.Contains(started.Text(), "resuming at") {
		t.Fatalf("no start line: %q", started.Text())
	}
	go io.Copy(io.Discard, stdout)
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	first := readCk(t, dir)
	if first.Steps <= 0 || first.Steps >= 400 {
		t.Fatalf("checkpoint after 1s at 64.7 steps/s: %+v", first)
	}
	cmd = exec.Command(bin)
	cmd.Env = append(env, "RONDO_PROGRESS_INTERVAL=300ms")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if ck := readCk(t, dir); ck.Steps != 400 {
		t.Errorf("final checkpoint %+v", ck)
	}
	if want := "resuming at"; !strings.Contains(string(out), want) {
		t.Errorf("output %q", out)
	}
	// Its progress lines, every RONDO_PROGRESS_INTERVAL, with an ETA.
	if !strings.Contains(string(out), "rondo-trainer: progress ") || !strings.Contains(string(out), "/400 steps (") ||
		!strings.Contains(string(out), " steps/s, eta ") {
		t.Errorf("no progress line: %q", out)
	}
}

func TestProgressLine(t *testing.T) {
	if got, want := progressLine(100, 400, 10), "rondo-trainer: progress 100/400 steps (25.0%), 10.000 steps/s, eta 30s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := progressLine(0, 7200000, 2); !strings.HasSuffix(got, "eta 41d16h") {
		t.Errorf("long ETA: %q", got)
	}
	if got := progressLine(5, 10, 0); !strings.HasSuffix(got, "eta ?") {
		t.Errorf("no rate: %q", got)
	}
}

// TestPartnerRate: next to a partner (space sharing) the trainer runs at
// its pair throughput from Gavel's table, not its isolated one.
func TestPartnerRate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	a, b := "LM (batch size 20)", "ResNet-18 (batch size 64)"
	tb := throughputs.Default()
	pair, ok := tb.Pair(throughputs.Key{Model: a, ScaleFactor: 1}, throughputs.Key{Model: b, ScaleFactor: 1}, "v100")
	iso, _ := tb.Lookup(a, 1, "v100")
	if !ok || pair[0] <= 0 || pair[0] == iso {
		t.Fatalf("table: pair %v ok %v, isolated %v", pair, ok, iso)
	}
	for partner, want := range map[string]float64{"": iso, b: pair[0]} {
		cmd := exec.Command(bin, "-steps", "1", "-checkpoint-dir", t.TempDir(), "-model", a, "-type", "v100")
		cmd.Env = append(os.Environ(), "RONDO_PARTNER_MODEL="+partner)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("partner %q: %v\n%s", partner, err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf(": %.3f steps/s", want)) {
			t.Errorf("partner %q: want %.3f steps/s in %s", partner, want, out)
		}
	}
}

// fakeVerifier accepts tokens "job:alloc".
type fakeVerifier struct{}

func (fakeVerifier) Verify(_ context.Context, tok string) (*lease.Identity, error) {
	job, alloc, ok := strings.Cut(tok, ":")
	if !ok {
		return nil, lease.ErrInvalidToken
	}
	return &lease.Identity{Namespace: "default", Job: job, Alloc: alloc}, nil
}

// roleAPI answers leases with a two-role job's sizes (workers settable)
// and records progress reports.
type roleAPI struct {
	mu      sync.Mutex
	workers int
	reports []lease.Progress
}

func (r *roleAPI) Lease(_ context.Context, c lease.Caller) (lease.Grant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := lease.Grant{Continue: true, ExpiresAt: time.Now().Add(time.Minute)}
	if c.Alloc == "p0" {
		g.Roles = &lease.Roles{Role: lease.RolePS, Workers: r.workers, PS: 1, TotalBatch: 256}
	} else {
		i := int(c.Alloc[1] - '0')
		g.Roles = &lease.Roles{Role: lease.RoleWorker, Workers: r.workers, PS: 1, Batch: lease.BatchShare(256, r.workers, i), TotalBatch: 256}
	}
	return g, nil
}

func (r *roleAPI) Report(_ context.Context, _ lease.Caller, p lease.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, p)
	return nil
}

// TestTwoRole runs a two-role job's worker 0, worker 1 and parameter
// server against a lease API: each worker writes the batch it is answered
// to its alloc dir and follows a resize without a restart; worker 0
// reports epochs and checkpoints them; the other worker and the parameter
// server exit 0 once worker 0's checkpoint says the job is done.
func TestTwoRole(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	api := &roleAPI{workers: 3}
	srv := httptest.NewServer((&lease.Server{Verifier: fakeVerifier{}, Decider: api, Sink: api}).Handler())
	defer srv.Close()
	ck := t.TempDir()
	start := func(alloc, group string, index int) (*exec.Cmd, string) {
		dir := t.TempDir()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "RONDO_CHECKPOINT_DIR="+ck, "NOMAD_META_rondo.model=LM (batch size 20)",
			"NOMAD_META_rondo.steps=100000", "NOMAD_META_rondo.ps=1:2", "NOMAD_META_rondo.ps_group=ps", "NOMAD_META_rondo.epochs=10",
			"RONDO_GPU_TYPE=v100", "CUDA_VISIBLE_DEVICES=GPU-0", "RONDO_LEASE_ADDR="+srv.URL, "RONDO_REPORT_INTERVAL=100ms",
			"NOMAD_JOB_ID=dl2", "NOMAD_ALLOC_ID="+alloc, "NOMAD_TOKEN_rondo=dl2:"+alloc, "NOMAD_GROUP_NAME="+group,
			fmt.Sprintf("NOMAD_ALLOC_INDEX=%d", index), "NOMAD_ALLOC_DIR="+dir)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, filepath.Join(dir, "rondo-trainer.json")
	}
	w0, f0 := start("w0", "train", 0)
	w1, f1 := start("w1", "train", 1)
	ps, fp := start("p0", "ps", 0)
	waitFile := func(f string, want map[string]any) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var got map[string]any
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(f)
			got = nil
			if err == nil && json.Unmarshal(b, &got) == nil {
				ok := true
				for k, v := range want {
					ok = ok && got[k] == v
				}
				if ok {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: %v, want %v", f, got, want)
	}
	waitFile(f0, map[string]any{"role": "worker", "batch": 86.0, "workers": 3.0, "total_batch": 256.0})
	waitFile(f1, map[string]any{"role": "worker", "batch": 85.0, "index": 1.0})
	waitFile(fp, map[string]any{"role": "ps", "workers": 3.0, "ps": 1.0})
	api.mu.Lock()
	api.workers = 2
	api.mu.Unlock()
	waitFile(f0, map[string]any{"batch": 128.0, "workers": 2.0})
	waitFile(f1, map[string]any{"batch": 128.0, "workers": 2.0})
	api.mu.Lock()
	var epochs float64
	for _, p := range api.reports {
		if !p.HasEpochs {
			t.Fatalf("report without epochs: %+v", p)
		}
		epochs = p.EpochsDone
	}
	n := len(api.reports)
	api.mu.Unlock()
	if n == 0 || !(epochs > 0) {
		t.Fatalf("%d reports, last epochs %v", n, epochs)
	}
	// Worker 0 stops (a suspension): its checkpoint has the epochs. Then
	// the job is done: the others exit on their own.
	w0.Process.Signal(syscall.SIGTERM)
	if err := w0.Wait(); err != nil {
		t.Fatal(err)
	}
	c := readCk(t, ck)
	if c.Epochs == nil || *c.Epochs != c.Steps/100000*10 {
		t.Fatalf("checkpoint %+v", c)
	}
	b, _ := json.Marshal(checkpoint{Steps: 100000, Total: 100000})
	if err := os.WriteFile(filepath.Join(ck, "checkpoint.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, cmd := range map[string]*exec.Cmd{"worker 1": w1, "parameter server": ps} {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not exit when the job was done", name)
		}
	}
}

// noticeAPI answers leases, with a notice (checkpoint_now, stopping at
// stop) while stop is set, and records progress reports.
type noticeAPI struct {
	mu      sync.Mutex
	stop    time.Time
	reports []lease.Progress
}

func (n *noticeAPI) Lease(_ context.Context, _ lease.Caller) (lease.Grant, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := lease.Grant{Continue: true, ExpiresAt: time.Now().Add(time.Minute)}
	if !n.stop.IsZero() {
		g.CheckpointNow, g.StopAt = true, n.stop
	}
	return g, nil
}

func (n *noticeAPI) Report(_ context.Context, _ lease.Caller, p lease.Progress) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reports = append(n.reports, p)
	return nil
}

func (n *noticeAPI) last() (lease.Progress, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.reports) == 0 {
		return lease.Progress{}, 0
	}
	return n.reports[len(n.reports)-1], len(n.reports)
}

// TestCheckpointNotice: a trainer that checkpoints only when told
// (RONDO_CHECKPOINT_INTERVAL=0) and cannot when stopped
// (RONDO_CHECKPOINT_ON_STOP=false) checkpoints once per notice and trains
// on; its reports carry checkpoint_at and checkpoint_s (the write's cost)
// and restore_s (its start, the restore cost included); stopped, it loses
// what it did since; restarted, it resumes from the notice's checkpoint
// and reports that checkpoint's time.
func TestCheckpointNotice(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	api := &noticeAPI{}
	srv := httptest.NewServer((&lease.Server{Verifier: fakeVerifier{}, Decider: api, Sink: api}).Handler())
	defer srv.Close()
	dir := t.TempDir()
	start := func() (*exec.Cmd, *lineLog) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "RONDO_CHECKPOINT_DIR="+dir, "NOMAD_META_rondo.model=LM (batch size 20)",
			"NOMAD_META_rondo.steps=1000000", "RONDO_GPU_TYPE=v100", "CUDA_VISIBLE_DEVICES=GPU-0", "RONDO_LEASE_ADDR="+srv.URL,
			"RONDO_REPORT_INTERVAL=100ms", "NOMAD_JOB_ID=j", "NOMAD_ALLOC_ID=a0", "NOMAD_TOKEN_rondo=j:a0",
			"RONDO_CHECKPOINT_INTERVAL=0", "RONDO_CHECKPOINT_ON_STOP=false", "RONDO_CHECKPOINT_COST=200ms", "RONDO_RESTORE_COST=300ms")
		out := &lineLog{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, out
	}
	wait := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !f(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	cmd, out := start()
	wait("a report with restore_s", func() bool { p, _ := api.last(); return p.HasRestoreS })
	if p, _ := api.last(); p.RestoreS < 0.3 || p.RestoreS > 5 || !p.CheckpointAt.IsZero() || p.HasCheckpointS {
		t.Fatalf("first report %+v: want restore_s >= the 300ms restore cost, no checkpoint yet", p)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.json")); err == nil {
		t.Fatal("checkpointed on its own with RONDO_CHECKPOINT_INTERVAL=0")
	}
	stop := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	api.mu.Lock()
	api.stop = stop
	api.mu.Unlock()
	wait("the notice's checkpoint reported", func() bool { p, _ := api.last(); return !p.CheckpointAt.IsZero() })
	ck := readCk(t, dir)
	p, n := api.last()
	if !p.CheckpointAt.Equal(ck.At) || p.CheckpointS < 0.2 || p.CheckpointS > 5 || ck.Steps <= 0 {
		t.Fatalf("report %+v after the checkpoint %+v: want its time and the 200ms cost", p, ck)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("checkpoint now: checkpointed at %.0f/1000000, stop at %s", ck.Steps, stop.Format(time.RFC3339))) {
		t.Errorf("no notice line in %q", out.String())
	}
	// Once per notice: the same notice again writes nothing; it trains on.
	wait("more reports", func() bool { _, m := api.last(); return m >= n+5 })
	if again := readCk(t, dir); !again.At.Equal(ck.At) {
		t.Fatalf("checkpointed again for the same notice: %+v then %+v", ck, again)
	}
	if p, _ := api.last(); float64(p.StepsDone) <= ck.Steps {
		t.Fatalf("not training on after the notice: %d steps, checkpoint %.0f", p.StepsDone, ck.Steps)
	}
	// Stopped: nothing saved.
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if c := readCk(t, dir); c != ck {
		t.Fatalf("checkpointed on stop: %+v, want %+v", c, ck)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("not checkpointed (RONDO_CHECKPOINT_ON_STOP=false): its last checkpoint holds %.0f\n", ck.Steps)) {
		t.Errorf("no stop line in %q", out.String())
	}
	// Restarted: from the notice's checkpoint.
	api.mu.Lock()
	api.stop, api.reports = time.Time{}, nil
	api.mu.Unlock()
	_, out = start()
	wait("a report from the restarted task", func() bool { p, _ := api.last(); return p.HasRestoreS })
	if p, _ := api.last(); !p.CheckpointAt.Equal(ck.At) || p.HasCheckpointS || p.RestoreS < 0.3 {
		t.Fatalf("restarted: %+v, want the checkpoint it resumed from (%v)", p, ck.At)
	}
	if want := fmt.Sprintf("resuming at %.0f/1000000", ck.Steps); !strings.Contains(out.String(), want) {
		t.Errorf("want %q in %q", want, out.String())
	}
}

// lineLog collects a process's output.
type lineLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunLock: a second run of a job started while the first still runs
// logs the overlap to overlaps.log, waits for the first to exit, and
// resumes from its final checkpoint (nothing lost, nothing run twice).
func TestRunLock(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "RONDO_CHECKPOINT_DIR="+dir, "NOMAD_META_rondo.model=LM (batch size 20)",
		"NOMAD_META_rondo.steps=100000", "RONDO_GPU_TYPE=v100", "CUDA_VISIBLE_DEVICES=GPU-0", "RONDO_PROGRESS_INTERVAL=0")
	start := func(alloc string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(bin)
		cmd.Env = append(env, "NOMAD_ALLOC_ID="+alloc)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewScanner(out)
	}
	first, out1 := start("first")
	if !out1.Scan() || !strings.Contains(out1.Text(), "resuming at 0/") {
		t.Fatalf("first: %q", out1.Text())
	}
	go io.Copy(io.Discard, struct{ io.Reader }{strings.NewReader("")})
	second, out2 := start("second")
	// The second waits on the lock: it logs the overlap and prints nothing.
	deadline := time.Now().Add(10 * time.Second)
	var log []byte
	for time.Now().Before(deadline) {
		if log, _ = os.ReadFile(filepath.Join(dir, overlapsFile)); len(log) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(log), "alloc second pid ") || !strings.Contains(string(log), "while alloc first pid ") {
		t.Fatalf("overlaps.log: %q", log)
	}
	time.Sleep(300 * time.Millisecond)
	first.Process.Signal(syscall.SIGTERM)
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	final := readCk(t, dir)
	if !out2.Scan() || !strings.Contains(out2.Text(), fmt.Sprintf("resuming at %.0f/", final.Steps)) {
		t.Fatalf("second resumed with %q, first's final checkpoint %.3f", out2.Text(), final.Steps)
	}
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Fatal(err)
	}
	if ck := readCk(t, dir); ck.Steps < final.Steps {
		t.Errorf("checkpoint went back: %.3f then %.3f", final.Steps, ck.Steps)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, runLockFile)); !strings.Contains(string(b), "alloc second") {
		t.Errorf("run.lock names %q, want the second run", b)
	}
}

package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/lease"
)

// noticeDecider runs job a on g0 and, while notice is set, gives it
// notice (a keep with Checkpoint, as a checkpoint-aware engine does the
// round before it stops a job); it reserves g0 for the waiting gang c
// (which the plan gives no intent: its reason is the reservation's).
type noticeDecider struct{ notice bool }

func (d *noticeDecider) Round(s *engine.Snapshot) (*engine.Plan, error) {
	act := engine.Start
	for _, r := range s.Running {
		if r.Jobs[0] == "a" {
			act = engine.Keep
		}
	}
	p := &engine.Plan{TimeS: s.TimeS, Assignments: []engine.Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"},
		Servers: []string{"n"}, Action: act}}}
	engine.Annotate(s, p, nil)
	if d.notice {
		p.Intents[0].Checkpoint = true
		p.Intents[0].Reason = engine.Reason{Kind: engine.Noticed, To: "v100", Priority: 0.5}
	}
	p.Reservations = []engine.Reservation{{Job: "c", Type: "v100", GPUs: []string{"g0"}, StartS: s.TimeS + 60, SinceS: s.TimeS}}
	return p, nil
}

// TestLeaseNotice: a keep with Checkpoint in the decision in force makes
// the job's lease answer checkpoint_now, stopping at the lease's end (the
// next round); other jobs and the next decision without notice do not.
// The status shows the notice, the reasons and the reservations.
func TestLeaseNotice(t *testing.T) {
	ctx := context.Background()
	d := &noticeDecider{}
	fb := &fakeBackend{}
	a := New(Config{Backend: fb, Engine: d, Round: time.Minute})
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lease := func(job string) lease.Grant {
		t.Helper()
		g, err := a.Lease(ctx, lease.Caller{Job: job, IdentityJob: job})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if g := lease("a"); !g.Continue || g.CheckpointNow || !g.StopAt.IsZero() {
		t.Fatalf("round 1, no notice: %+v", g)
	}
	d.notice = true
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	g := lease("a")
	if !g.Continue || !g.CheckpointNow || !g.StopAt.Equal(g.ExpiresAt) || !g.StopAt.After(time.Now()) {
		t.Fatalf("round 2, notice: %+v", g)
	}
	if g := lease("b"); g.Continue || g.CheckpointNow {
		t.Fatalf("b, not running: %+v", g)
	}
	st := a.Status()
	js := map[string]JobStatus{}
	for _, j := range st.Jobs {
		js[j.ID] = j
	}
	if j := js["a"]; !j.CheckpointNow || j.Intent != "keep" || !strings.HasPrefix(j.Reason, "checkpoint now") {
		t.Errorf("status a: %+v", j)
	}
	if j := js["c"]; j.CheckpointNow || j.Intent != "" || !strings.HasPrefix(j.Reason, "waits: GPUs of v100 are reserved") {
		t.Errorf("status c: %+v", j)
	}
	if j := js["b"]; j.Intent != "" || j.Reason != "" || j.CheckpointNow {
		t.Errorf("status b: %+v", j)
	}
	if len(st.Reservations) != 1 || st.Reservations[0].Job != "c" || st.Reservations[0].GPUs[0] != "g0" {
		t.Errorf("reservations %+v", st.Reservations)
	}
	d.notice = false
	if err := a.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if g := lease("a"); !g.Continue || g.CheckpointNow {
		t.Fatalf("round 3, notice withdrawn: %+v", g)
	}
}

// TestCheckpointReportsSurviveRestart: what a job reports of its
// checkpoints and restarts, and its start latency (the round that started
// it to its first report), are kept in the durable state: a restarted
// agent still has them; a job gone from the snapshot is forgotten.
func TestCheckpointReportsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	a1 := newTestAgent(t, &fakeBackend{}, store, nil)
	if err := a1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a1.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	a1.mu.Lock()
	begin := a1.begin
	a1.mu.Unlock()
	a1.Event("a", "admit") // the round's start landed
	caller := lease.Caller{Job: "a", IdentityJob: "a"}
	if err := a1.Report(ctx, caller, lease.Progress{GPUType: "v100", StepsDone: 1, At: begin.Add(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	ckAt := begin.Add(-time.Hour).UTC().Truncate(time.Second)
	if err := a1.Report(ctx, caller, lease.Progress{GPUType: "v100", StepsDone: 2, At: begin.Add(9 * time.Second),
		CheckpointAt: ckAt, CheckpointS: 1.5, HasCheckpointS: true, RestoreS: 2.5, HasRestoreS: true}); err != nil {
		t.Fatal(err)
	}
	ck, ok := a1.Checkpoint("a")
	if !ok || !ck.At.Equal(ckAt) || ck.WriteS == nil || *ck.WriteS != 1.5 || ck.RestoreS == nil || *ck.RestoreS != 2.5 ||
		ck.StartLatencyS == nil || *ck.StartLatencyS != 4 {
		t.Fatalf("checkpoint %+v %v", ck, ok)
	}
	if _, ok := a1.Checkpoint("b"); ok {
		t.Fatal("b reported nothing")
	}
	// A report that says nothing of them keeps them; a restart (resume)
	// measures its latency anew at the next report.
	a1.Event("a", "resume")
	if err := a1.Report(ctx, caller, lease.Progress{GPUType: "v100", StepsDone: 3, At: begin.Add(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if ck, _ := a1.Checkpoint("a"); !ck.At.Equal(ckAt) || *ck.RestoreS != 2.5 || *ck.StartLatencyS != 7 {
		t.Fatalf("after a plain report: %+v", ck)
	}
	if err := a1.StepContext(ctx); err != nil { // saved with the round
		t.Fatal(err)
	}
	for _, j := range a1.Status().Jobs {
		if j.ID == "a" && (j.CheckpointAt == nil || !j.CheckpointAt.Equal(ckAt) || j.RestoreS != 2.5) {
			t.Errorf("status a: checkpoint at %v, restore %g", j.CheckpointAt, j.RestoreS)
		}
	}
	a2 := newTestAgent(t, &fakeBackend{}, store, nil)
	if err := a2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ck, ok := a2.Checkpoint("a"); !ok || !ck.At.Equal(ckAt) || *ck.WriteS != 1.5 || *ck.RestoreS != 2.5 || *ck.StartLatencyS != 7 {
		t.Fatalf("after a restart: %+v %v", ck, ok)
	}
	// Gone from the snapshot: forgotten.
	gone := &shrinkBackend{}
	a3 := newTestAgent(t, gone, store, nil)
	if err := a3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a3.StepContext(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := a3.Checkpoint("a"); ok {
		t.Fatal("a finished, its checkpoint is kept")
	}
}

// shrinkBackend is fakeBackend without job a.
type shrinkBackend struct{ fakeBackend }

func (s *shrinkBackend) Observe() (*engine.Snapshot, error) {
	snap, _ := s.fakeBackend.Observe()
	snap.Jobs = snap.Jobs[1:]
	return snap, nil
}

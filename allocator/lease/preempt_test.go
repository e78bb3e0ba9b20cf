package lease

import (
	"testing"
	"time"
)

// TestCheckpointReports: a report's checkpoint_at (within the clock skew),
// checkpoint_s and restore_s reach the sink; absent, the report says
// nothing of them.
func TestCheckpointReports(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	tok := f.rs.token(t, claims("train", "alloc-1"))
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	soon := time.Now().Add(20 * time.Second).UTC().Truncate(time.Second) // within MaxClockSkew
	for _, c := range []struct {
		body string
		want Progress
	}{
		{`{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100","checkpoint_at":"` + at.Format(time.RFC3339Nano) +
			`","checkpoint_s":2.5,"restore_s":0}`,
			Progress{CheckpointAt: at, CheckpointS: 2.5, HasCheckpointS: true, HasRestoreS: true}},
		{`{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100","restore_s":7.25}`,
			Progress{RestoreS: 7.25, HasRestoreS: true}},
		{`{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100","checkpoint_at":"` +
			soon.In(time.FixedZone("x", 2*3600)).Format(time.RFC3339) + `"}`,
			Progress{CheckpointAt: soon}},
		{`{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100"}`, Progress{}},
	} {
		if code, m := f.post(t, "/v1/progress", tok, c.body); code != 204 {
			t.Fatalf("%s: %d %v", c.body, code, m)
		}
		p := f.rec.reports[len(f.rec.reports)-1]
		if !p.CheckpointAt.Equal(c.want.CheckpointAt) || p.CheckpointS != c.want.CheckpointS || p.RestoreS != c.want.RestoreS ||
			p.HasCheckpointS != c.want.HasCheckpointS || p.HasRestoreS != c.want.HasRestoreS || p.StepsDone != 10 {
			t.Errorf("%s: report %+v, want %+v", c.body, p, c.want)
		}
	}
}

// TestLeaseCheckpointNow: a grant with notice answers checkpoint_now and
// stop_at; without it neither field is in the answer.
func TestLeaseCheckpointNow(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	tok := f.rs.token(t, claims("train", "alloc-1"))
	code, m := f.post(t, "/v1/lease", tok, `{"job":"train"}`)
	if _, ok := m["checkpoint_now"]; ok || code != 200 {
		t.Fatalf("no notice: %d %v", code, m)
	}
	if _, ok := m["stop_at"]; ok {
		t.Fatalf("no notice: stop_at in %v", m)
	}
	stop := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	f.rec.notice = &stop
	code, m = f.post(t, "/v1/lease", tok, `{"job":"train"}`)
	if code != 200 || m["checkpoint_now"] != true || m["stop_at"] != "2030-01-02T02:04:05Z" || m["continue"] != true {
		t.Fatalf("notice: %d %v", code, m)
	}
	// A notice without its stop time stops at the lease's end.
	f.rec.notice = &time.Time{}
	if code, m = f.post(t, "/v1/lease", tok, `{"job":"train"}`); m["stop_at"] != m["lease_expires_at"] {
		t.Fatalf("notice without a stop time: %d %v", code, m)
	}
}

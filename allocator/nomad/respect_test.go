package nomad

import (
	"math"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/hcl"
)

// TestFillWork: Observe puts on the snapshot when each job's run began
// (its oldest live allocation holding GPUs), its reported checkpoint (at
// least its run's start) and costs, its restore time (reported, else its
// measured start latency, else the mean of its model's jobs), and the
// mean write time of its model when it reported none.
func TestFillWork(t *testing.T) {
	var jobs []*api.Job
	for _, j := range []struct{ id, model string }{{"alex", "m1"}, {"gnmt", "m1"}, {"lm", "m1"}, {"other", "m2"}, {"twice", "m3"}} {
		job := resJob(j.id)
		job.Meta[hcl.MetaModel] = j.model
		if j.id != "lm" {
			if err := Pin(job, "train", engine.Assignment{GPUs: []string{"n1-g" + itoa(len(jobs))}, Servers: []string{"n1"}},
				func(string) string { return "n1" }); err != nil {
				t.Fatal(err)
			}
			job.NodePool = ptr("rondo")
		}
		jobs = append(jobs, job)
	}
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}, jobs: jobs}
	b := testBackend(t, f)
	at := func(s float64) time.Time { return b.epoch.Add(time.Duration(s * float64(time.Second))) }
	alloc := func(id, job, gpu string, createdS float64, status string) *api.Allocation {
		return &api.Allocation{ID: id, JobID: job, TaskGroup: "train", NodeID: "n1", ClientStatus: status, DesiredStatus: "run",
			CreateTime: at(createdS).UnixNano(),
			AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{"train": {
				Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", DeviceIDs: []string{gpu}}}}}}}
	}
	f.allocs = []*api.Allocation{alloc("a0", "alex", "n1-g0", 100, "running"), alloc("g0", "gnmt", "n1-g1", 50, "running"),
		alloc("o0", "other", "n1-g3", 70, "pending"),
		// An earlier run of "twice", stopped, and its current one.
		alloc("t0", "twice", "n1-g4", 10, "complete"), alloc("t1", "twice", "n1-g4", 80, "running")}
	f.allocs[3].DesiredStatus = "stop"
	f64 := func(v float64) *float64 { return &v }
	reported := map[string]state.Checkpoint{
		"alex": {At: at(150), WriteS: f64(2), RestoreS: f64(10), StartLatencyS: f64(99)},
		"gnmt": {At: at(20), StartLatencyS: f64(6)}, // a checkpoint from before its run
	}
	b.cfg.Checkpoints = func(job string) (state.Checkpoint, bool) { ck, ok := reported[job]; return ck, ok }
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	type work struct{ run, ckAt, ckS, restore float64 }
	want := map[string]work{
		"alex":  {100, 150, 2, 10}, // reported restore_s wins over the latency
		"gnmt":  {50, 50, 2, 6},    // checkpoint before its run: its run's start; latency; m1's write time
		"lm":    {0, 0, 2, 8},      // not running: m1's means (10 and 6)
		"other": {70, 0, 0, 0},     // m2: nothing known
		"twice": {80, 0, 0, 0},     // its live allocation's creation, not the stopped one's
	}
	if len(snap.Jobs) != len(want) {
		t.Fatalf("jobs %+v", snap.Jobs)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	for _, j := range snap.Jobs {
		w := want[j.ID]
		if !near(j.RunSinceS, w.run) || !near(j.CheckpointAtS, w.ckAt) || !near(j.CheckpointS, w.ckS) || !near(j.RestoreS, w.restore) {
			t.Errorf("%s: run %g, checkpoint at %g, writes in %g, restores in %g; want %+v", j.ID, j.RunSinceS, j.CheckpointAtS,
				j.CheckpointS, j.RestoreS, w)
		}
	}
	// Without a Checkpoints hook only the run's start is known.
	b.cfg.Checkpoints = nil
	if snap, err = b.Observe(); err != nil {
		t.Fatal(err)
	}
	for _, j := range snap.Jobs {
		if !near(j.RunSinceS, want[j.ID].run) || j.CheckpointAtS != 0 || j.CheckpointS != 0 || j.RestoreS != 0 {
			t.Errorf("no hook: %s %+v", j.ID, j)
		}
	}
}

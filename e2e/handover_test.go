package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestStopBeforeStartOnNomad: a stopped task exits only after it has
// checkpointed (SIGTERM), but Nomad marks its allocation desired-stop at
// once. A job that takes 2 s to write its checkpoint (RONDO_CHECKPOINT_COST)
// runs on one of two V100s; its GPU turns unhealthy, so a round moves it
// to the other GPU: the new task must start only once the old one has
// exited, else the job runs twice for those 2 s and its new task resumes
// from the checkpoint before the one being written (measured from Nomad's
// task start and finish times). Before the fix the new task started at
// once, overlapping the exiting one by its checkpoint's 2 s (the chaos soak
// saw the same race, from agents killed between a stop and a start, as a
// checkpoint going backwards).
func TestStopBeforeStartOnNomad(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2)}, `agent {
  round = "3s"
}
vc "research" {
  policy = "max_min_fairness"
}
`)
	c := s.c.API
	spec := s.jobHCL("mover", "ResNet-18 (batch size 64)", 1000000, 1)
	spec = strings.Replace(spec, "RONDO_SPEEDUP", "RONDO_CHECKPOINT_COST     = \"2s\"\n        RONDO_SPEEDUP", 1)
	s.submitSpec("mover", spec)
	s.startAgent("3s")
	var gpu, node string
	s.waitFor(60*time.Second, "the job running", func() (bool, error) {
		l := liveAllocs(c, "mover")
		if len(l) == 1 && l[0].ClientStatus == "running" && len(allocGPUs(l[0])) == 1 {
			gpu, node = allocGPUs(l[0])[0], l[0].NodeName
			return true, nil
		}
		return false, nil
	})
	time.Sleep(2 * time.Second) // a checkpoint or more
	if err := os.WriteFile(filepath.Join(s.c.FaultDir(node), gpu), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitFor(30*time.Second, "the job moved off the unhealthy GPU", func() (bool, error) {
		l := liveAllocs(c, "mover")
		return len(l) == 1 && l[0].ClientStatus == "running" && len(allocGPUs(l[0])) == 1 && allocGPUs(l[0])[0] != gpu, nil
	})
	checkHandover(s, c, "mover", "moved")
}

// TestStartOverPendingPlacementOnNomad: a start registered while its GPU
// is still held (its evaluation blocked) is placed by Nomad whenever the
// GPU frees, with that start's spec. A round that saw the job with no
// allocation and starts it on another machine registers its new spec over
// the allocation placed meanwhile: a destructive update. The new task must
// not start while the old one still checkpoints (two trainers on one
// checkpoint): Nomad links the replacement to the allocation it replaces
// (PreviousAllocation) and its client holds it until that one has exited,
// on any node, and Rondo must keep relying on that (not, say, stop and
// re-register the job as two writes). The race is made deterministic by
// driving the backend by hand: "mover" (2 s checkpoints) is started on the
// GPU "holder" runs on, the round's observation is taken, holder is
// stopped so that mover's old placement runs, then the stale round starts
// mover on the other machine's GPU. Checked by Nomad's task times and by
// the trainer's run lock (overlaps.log).
func TestStartOverPendingPlacementOnNomad(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 1), cluster.UniformClient("v100-b", "v100", 1)}, `vc "research" {
  policy = "max_min_fairness"
}
`)
	c := s.c.API
	spec := func(id, cost string) string {
		hcl := s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000, 1)
		hcl = strings.Replace(hcl, "RONDO_SPEEDUP", "RONDO_CHECKPOINT_COST     = \""+cost+"\"\n        RONDO_SPEEDUP", 1)
		// No agent runs: the trainers do not report.
		return regexp.MustCompile(`(?m)^\s*RONDO_LEASE_ADDR.*\n`).ReplaceAllString(hcl, "")
	}
	s.submitSpec("holder", spec("holder", "0s"))
	s.submitSpec("mover", spec("mover", "2s"))
	b, err := rnomad.New(rnomad.Config{Client: c, AckTimeout: 10 * time.Second,
		Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.GPUs) != 2 || len(snap.Jobs) != 2 {
		t.Fatalf("observed %d GPUs and %d jobs, want 2 and 2", len(snap.GPUs), len(snap.Jobs))
	}
	// On two machines: Nomad's client holds a replacement allocation on
	// the same node until the one it replaces has exited, not on another.
	g0, g1 := snap.GPUs[0], snap.GPUs[1]
	if g0.Server == g1.Server {
		t.Fatalf("GPUs %s and %s on one node", g0.ID, g1.ID)
	}
	start := func(id string, g engine.GPU) engine.Assignment {
		return engine.Assignment{Jobs: []string{id}, Type: g.Type, GPUs: []string{g.ID}, Servers: []string{g.Server}, Action: engine.Start}
	}
	if err := b.Enforce(&engine.Plan{Assignments: []engine.Assignment{start("holder", g0)}}); err != nil {
		t.Fatalf("start holder: %v", err)
	}
	// mover on holder's GPU: registered, its evaluation blocked; the
	// enforcement's wait for it to run times out.
	if _, err := b.Observe(); err != nil {
		t.Fatal(err)
	}
	if err := b.Enforce(&engine.Plan{Assignments: []engine.Assignment{start("mover", g0)}}); err == nil {
		t.Fatal("mover started on a GPU holder holds")
	}
	if _, err := b.Observe(); err != nil { // mover: registered at count 1, no allocation
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Deregister("holder", false, nil); err != nil {
		t.Fatal(err)
	}
	s.waitFor(60*time.Second, "mover's pending placement running on holder's GPU", func() (bool, error) {
		l := liveAllocs(c, "mover")
		if len(l) != 1 || l[0].ClientStatus != "running" {
			return false, nil
		}
		a, _, err := c.Allocations().Info(l[0].ID, nil)
		if err != nil {
			return false, nil
		}
		ts := a.TaskStates["train"]
		return ts != nil && !ts.StartedAt.IsZero(), nil
	})
	time.Sleep(time.Second) // a checkpoint or two
	err = b.Enforce(&engine.Plan{Assignments: []engine.Assignment{start("mover", g1)}})
	t.Logf("the stale round's enforcement: %v", err)
	s.waitFor(60*time.Second, "mover running on the other GPU", func() (bool, error) {
		l := liveAllocs(c, "mover")
		return len(l) == 1 && l[0].ClientStatus == "running" && len(allocGPUs(l[0])) == 1 && allocGPUs(l[0])[0] == g1.ID, nil
	})
	checkHandover(s, c, "mover", "new")
	if b, err := os.ReadFile(filepath.Join(s.ckpt, "mover", "overlaps.log")); err == nil {
		t.Errorf("the trainer's run lock saw two runs at once:\n%s", b)
	}
}

// checkHandover waits until job's task "train" has run twice, the first
// run ended, and fails if the second (the what task) started before the
// first ended, by Nomad's task times.
func checkHandover(s *stack, c *api.Client, job, what string) {
	t := s.t
	t.Helper()
	type span struct {
		start, end time.Time
		alloc      string
	}
	var spans []span
	s.waitFor(30*time.Second, "the "+what+" task's start and the old task's end recorded", func() (bool, error) {
		allocs, _, err := c.Jobs().Allocations(job, true, nil)
		if err != nil {
			return false, nil
		}
		spans = spans[:0]
		ended := 0
		for _, al := range allocs {
			ts := al.TaskStates["train"]
			if ts == nil || ts.StartedAt.IsZero() {
				continue
			}
			end := ts.FinishedAt
			if end.IsZero() {
				end = time.Now().Add(time.Hour) // running
			} else {
				ended++
			}
			spans = append(spans, span{ts.StartedAt, end, al.ID[:8]})
		}
		return len(spans) == 2 && ended == 1, nil
	})
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	old, next := spans[0], spans[1]
	t.Logf("old task %s %s-%s, %s task %s from %s", old.alloc, old.start.Format("15:04:05.000"),
		old.end.Format("15:04:05.000"), what, next.alloc, next.start.Format("15:04:05.000"))
	if next.start.Before(old.end) {
		t.Errorf("the job ran twice: its %s task started %.1fs before the old one exited", what, old.end.Sub(next.start).Seconds())
	}
}

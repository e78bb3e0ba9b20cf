package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

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
	type span struct {
		start, end time.Time
		alloc      string
	}
	var spans []span
	s.waitFor(30*time.Second, "the moved task's start and the old task's end recorded", func() (bool, error) {
		allocs, _, err := c.Jobs().Allocations("mover", true, nil)
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
	old, moved := spans[0], spans[1]
	t.Logf("old task %s %s-%s, moved task %s from %s", old.alloc, old.start.Format("15:04:05.000"),
		old.end.Format("15:04:05.000"), moved.alloc, moved.start.Format("15:04:05.000"))
	if moved.start.Before(old.end) {
		t.Errorf("the job ran twice: its moved task started %.1fs before the old one exited", old.end.Sub(moved.start).Seconds())
	}
}

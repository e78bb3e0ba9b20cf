package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
)

// opportunisticJobHCL is jobHCL with meta rondo.priority = "opportunistic".
func (s *stack) opportunisticJobHCL(id, model string, steps int, speedup float64) string {
	return strings.Replace(s.jobHCL(id, model, steps, speedup), `"rondo.vc"    = "research"`,
		`"rondo.vc"    = "research"
    "rondo.priority" = "opportunistic"`, 1)
}

func (s *stack) checkpointSteps(id string) float64 {
	c, err := rnomad.ReadCheckpoint(filepath.Join(s.ckpt, id))
	if err != nil {
		return 0
	}
	return c.Steps
}

// TestOpportunisticPreemptionOnNomad: on the cells cluster (VC research
// owns all four GPUs' cells), an opportunistic job runs in the unused
// cells; four guaranteed jobs of research arrive and need every GPU: the
// opportunistic job is preempted (scaled to 0, not stopped, its checkpoint
// kept), a guaranteed job runs on its GPU within a few rounds, and once the
// guaranteed jobs are done the opportunistic job resumes from its
// checkpoint.
func TestOpportunisticPreemptionOnNomad(t *testing.T) {
	s := startStack(t)
	c := s.c.API
	a := s.startAgent("4s")
	s.submitSpec("opp", s.opportunisticJobHCL("opp", "LM (batch size 20)", 1000000, 1))
	var oppGPUs []string
	s.waitFor(60*time.Second, "the opportunistic job to run and checkpoint", func() (bool, error) {
		live := liveAllocs(c, "opp")
		if len(live) != 1 || live[0].ClientStatus != "running" {
			return false, nil
		}
		oppGPUs = allocGPUs(live[0])
		if s.checkpointSteps("opp") <= 50 {
			return false, nil
		}
		// Credited with running time (the agent's status then says
		// suspended, not queued, once it stops).
		for _, j := range s.status(a).Jobs {
			if j.ID == "opp" {
				for _, v := range j.ReceivedS {
					if v > 0 {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	before := s.status(a).Round
	for _, id := range []string{"g0", "g1", "g2", "g3"} {
		s.submit(id, "LM (batch size 20)", 600, 1)
	}
	var holder string
	var took int
	s.waitFor(90*time.Second, "a guaranteed job on the opportunistic job's GPU, the opportunistic job suspended", func() (bool, error) {
		if len(liveAllocs(c, "opp")) != 0 {
			return false, nil
		}
		for _, id := range []string{"g0", "g1", "g2", "g3"} {
			for _, al := range liveAllocs(c, id) {
				if al.ClientStatus == "running" && slices.Equal(allocGPUs(al), oppGPUs) {
					holder, took = id, s.status(a).Round-before
					return true, nil
				}
			}
		}
		return false, nil
	})
	t.Logf("guaranteed job %s runs on %v %d rounds after the arrival", holder, oppGPUs, took)
	if took > 3 {
		t.Errorf("the guaranteed job took %d rounds to get the opportunistic job's GPU, want at most 3", took)
	}
	if !strings.Contains(a.logs(), "preempt: job=opp") {
		t.Errorf("no preempt log line for opp")
	}
	job, _, err := c.Jobs().Info("opp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.Stop != nil && *job.Stop {
		t.Errorf("the opportunistic job was stopped, not suspended")
	}
	if n := *job.TaskGroups[0].Count; n != 0 {
		t.Errorf("opp group count %d after preemption, want 0", n)
	}
	kept := s.checkpointSteps("opp")
	if kept <= 50 {
		t.Fatalf("opp's checkpoint lost: %.0f steps", kept)
	}
	st := s.status(a)
	for _, j := range st.Jobs {
		if j.ID == "opp" && j.State != "suspended" {
			t.Errorf("opp shows %q, want suspended", j.State)
		}
	}
	// Guaranteed jobs finish (the V100 ones first) and free cells; the
	// opportunistic job resumes in one from its checkpoint (its step count
	// continues, it does not restart at 0), never on a GPU a guaranteed
	// job holds.
	s.waitFor(240*time.Second, "the opportunistic job to resume and make progress", func() (bool, error) {
		checkDisjoint(t, c, "opp", "g0", "g1", "g2", "g3")
		if got := s.checkpointSteps("opp"); got < kept {
			return false, fmt.Errorf("opp restarted from scratch: %.0f steps, %.0f kept at preemption", got, kept)
		}
		live := liveAllocs(c, "opp")
		return len(live) == 1 && live[0].ClientStatus == "running" && s.checkpointSteps("opp") > kept, nil
	})
	finished := 0
	for _, id := range []string{"g0", "g1", "g2", "g3"} {
		if s.checkpointSteps(id) >= 600 {
			finished++
		}
	}
	if finished == 0 {
		t.Errorf("opp resumed before any guaranteed job finished")
	}
	if !strings.Contains(a.logs(), "resume: job=opp") {
		t.Errorf("no resume log line for opp")
	}
	noOverlap(t, c, "opp")
}

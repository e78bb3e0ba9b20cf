package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// ckptSteps reads a job's trainer checkpoint (0 when there is none yet).
func (s *stack) ckptSteps(id string) float64 {
	b, err := os.ReadFile(filepath.Join(s.ckpt, id, "checkpoint.json"))
	if err != nil {
		return 0
	}
	var ck struct{ Steps float64 }
	json.Unmarshal(b, &ck)
	return ck.Steps
}

// rondoJobRun runs `rondo job run` on spec (the management token).
func (s *stack) rondoJobRun(id, spec string) string {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), id+".nomad.hcl")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(s.bin, "rondo"), "job", "run", "-address", s.c.Address, "-token", s.c.ManagementToken, path)
	cmd.Env = cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "NOMAD_ADDR"), "NOMAD_TOKEN")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("rondo job run %s: %v\n%s", id, err, out)
	}
	return string(out)
}

// TestUpdateAdmittedJobOnNomad: re-running a job Rondo admitted. One
// client of 2 V100s, one job (1 GPU). `rondo job run` with the same file
// changes nothing (the same allocation runs on); with a changed meta value
// the job restarts in place on its GPU (Rondo's count, pins and pool kept,
// no round needed) and resumes from its checkpoint. A plain `nomad job run`
// moves it back to the user's pool: Nomad stops it (it checkpoints), it
// waits, and Rondo re-admits it at a round; it resumes from its
// checkpoint. The job never has two allocations running at once.
func TestUpdateAdmittedJobOnNomad(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-u", "v100", 2)}, `round_seconds = 4
vc "research" {
  policy = "max_min_fairness_perf"
}
`)
	a := s.startAgent("4s")
	c := s.c.API
	spec := s.jobHCL("upd", "ResNet-50 (batch size 64)", 1e9, 1)
	s.submitSpec("upd", spec)
	var first *api.AllocationListStub
	s.waitFor(60*time.Second, "upd to run", func() (bool, error) {
		l := liveAllocs(c, "upd")
		if len(l) == 1 && l[0].ClientStatus == "running" && s.ckptSteps("upd") > 0 {
			first = l[0]
			return true, nil
		}
		return false, nil
	})
	gpu := allocGPUs(first)
	admits := strings.Count(a.logs(), "job=upd")

	// The same file again: nothing changes.
	if out := s.rondoJobRun("upd", spec); !strings.Contains(out, "its count, GPUs, nodes and pool are kept") {
		t.Fatalf("rondo job run: %s", out)
	}
	time.Sleep(3 * time.Second)
	if l := liveAllocs(c, "upd"); len(l) != 1 || l[0].ID != first.ID {
		t.Fatalf("an unchanged re-run replaced the allocation: %d live", len(l))
	}

	// A changed meta value: restarts in place on the same GPU, no round.
	before := s.ckptSteps("upd")
	changed := strings.Replace(spec, `"rondo.vc"    = "research"`, `"rondo.vc"    = "research"
    "note"        = "v2"`, 1)
	updated := time.Now()
	s.rondoJobRun("upd", changed)
	var second *api.AllocationListStub
	s.waitFor(30*time.Second, "upd to restart in place", func() (bool, error) {
		l := liveAllocs(c, "upd")
		if len(l) == 1 && l[0].ID != first.ID && l[0].ClientStatus == "running" {
			second = l[0]
			return true, nil
		}
		return false, nil
	})
	t.Logf("restarted in place %.1fs after rondo job run", time.Since(updated).Seconds())
	if g := allocGPUs(second); strings.Join(g, ",") != strings.Join(gpu, ",") || second.NodeID != first.NodeID {
		t.Errorf("moved: GPUs %v on %s, was %v on %s", g, second.NodeID, gpu, first.NodeID)
	}
	job, _, err := c.Jobs().Info("upd", nil)
	if err != nil {
		t.Fatal(err)
	}
	if job.Meta["note"] != "v2" || *job.NodePool != "rondo" || *job.TaskGroups[0].Count != 1 {
		t.Errorf("job after the update: meta %v pool %s count %d", job.Meta, *job.NodePool, *job.TaskGroups[0].Count)
	}
	time.Sleep(2 * time.Second)
	if after := s.ckptSteps("upd"); after < before {
		t.Errorf("progress lost: checkpoint %.0f, was %.0f before the update", after, before)
	}
	if n := strings.Count(a.logs(), "job=upd"); n != admits {
		t.Errorf("Rondo acted on upd after rondo job run (%d log lines, was %d):\n%s", n, admits, tail(a.logs(), 3000))
	}

	// Plain nomad job run: a suspension and a re-admission.
	before = s.ckptSteps("upd")
	s.submitSpec("upd", changed)
	s.waitFor(60*time.Second, "upd to be re-admitted after nomad job run", func() (bool, error) {
		l := liveAllocs(c, "upd")
		return len(l) == 1 && l[0].ID != second.ID && l[0].ClientStatus == "running", nil
	})
	time.Sleep(2 * time.Second)
	if after := s.ckptSteps("upd"); after < before {
		t.Errorf("progress lost after nomad job run: checkpoint %.0f, was %.0f", after, before)
	}
	if n := noOverlap(t, c, "upd"); n < 3 {
		t.Errorf("%d allocations ran, want 3 (first, in-place update, re-admission)", n)
	}
}

// TestScalingBlockOnNomad: a job whose GPU group has a Nomad scaling block
// (min 2, max 3) and no rondo.elastic is elastic over 2..3 workers: it
// grows to 3; its admission lowered the block's min to 0 and kept the
// bounds in rondo.elastic; a 3-GPU job then gets the GPUs, which needs the
// elastic job scaled to 0 (refused by Nomad below the block's min).
func TestScalingBlockOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-s", "v100", 3)}, `round_seconds = 4
vc "research" {
  policy = "max_min_fairness_perf"
}
`)
	a := s.startAgent("4s")
	c := s.c.API
	spec := strings.Replace(s.jobHCL("scaled", "ResNet-50 (batch size 64)", 1e9, 1), `group "train" {`, `group "train" {
    count = 2
    scaling {
      min = 2
      max = 3
    }`, 1)
	s.submitSpec("scaled", spec)
	s.waitFor(90*time.Second, "the scaled job to grow to 3 running workers", func() (bool, error) {
		by := allocsByIndex(c, "scaled")
		if len(by) != 3 {
			return false, nil
		}
		for _, al := range by {
			if al.ClientStatus != "running" {
				return false, nil
			}
		}
		return true, nil
	})
	job, _, err := c.Jobs().Info("scaled", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc := job.TaskGroups[0].Scaling; sc == nil || *sc.Min != 0 || *sc.Max != 3 || job.Meta["rondo.elastic"] != "2:3" {
		t.Errorf("after admission: scaling %+v, meta %v", sc, job.Meta)
	}
	for _, j := range s.status(a).Jobs {
		if j.ID == "scaled" && (j.MinWorkers != 2 || j.MaxWorkers != 3) {
			t.Errorf("status workers %d..%d, want 2..3", j.MinWorkers, j.MaxWorkers)
		}
	}
	big := strings.Replace(s.jobHCL("big", "ResNet-50 (batch size 64)", 1e9, 1), "count = 1\n        }", "count = 3\n        }", 1)
	s.submitSpec("big", big)
	s.waitFor(60*time.Second, "the 3-GPU job to run (the scaled job suspended)", func() (bool, error) {
		l := liveAllocs(c, "big")
		return len(l) == 1 && l[0].ClientStatus == "running" && len(liveAllocs(c, "scaled")) == 0, nil
	})
	if strings.Contains(a.logs(), "less than scaling policy minimum") {
		t.Errorf("Nomad refused a scale below the block's min:\n%s", tail(a.logs(), 3000))
	}
	checkDisjoint(t, c, "scaled", "big")
}

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// dl2TotalBatch is the test job's total batch: odd, so that every split
// over 2 workers is uneven (128, 127).
const dl2TotalBatch = 255

// dl2JobHCL is a two-role elastic job (DL2): a worker group "train" of
// 1-GPU workers (1..3) and a parameter-server group "ps" (1..2) of CPU
// tasks, both running the fake trainer (the ps group's is a parameter
// server: it only asks for its lease), a total batch of dl2TotalBatch and
// 100 epochs over steps steps (the trainer reports epochs_done).
func (s *stack) dl2JobHCL(id string, steps int) string {
	task := func(name string, gpu bool) string {
		dev := ""
		if gpu {
			dev = `
        device "nvidia/gpu" {
          count = 1
        }`
		}
		return fmt.Sprintf(`    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task %q {
      driver       = "raw_exec"
      kill_timeout = "10s"
      config {
        command = %q
      }
      identity {
        name = "rondo"
        aud  = ["rondo-lease"]
        file = true
      }
      env {
        RONDO_CHECKPOINT_DIR  = "%s/${NOMAD_JOB_ID}"
        RONDO_GPU_TYPE        = "${meta.rondo_gpu_type}"
        RONDO_LEASE_ADDR      = %q
        RONDO_REPORT_INTERVAL = "250ms"
      }
      resources {
        cpu    = 50
        memory = 32%s
      }
    }`, name, filepath.Join(s.bin, "rondo-trainer"), s.ckpt, s.leaseAddr, dev)
	}
	return fmt.Sprintf(`job %q {
  type = "batch"
  meta = {
    "rondo.vc"         = "research"
    "rondo.model"      = "ResNet-50 (batch size 64)"
    "rondo.steps"      = "%d"
    "rondo.elastic"    = "1:3"
    "rondo.ps"         = "1:2"
    "rondo.ps_group"   = "ps"
    "rondo.epochs"     = "100"
    "rondo.batch_size" = "%d"
  }
  group "train" {
%s
  }
  group "ps" {
%s
  }
}
`, id, steps, dl2TotalBatch, task("train", true), task("ps", false))
}

// groupAllocs returns a job's live allocations of one group by index.
func groupAllocs(c *api.Client, id, group string) map[int]*api.AllocationListStub {
	out := map[int]*api.AllocationListStub{}
	for _, a := range liveAllocs(c, id) {
		if a.TaskGroup != group {
			continue
		}
		i := strings.LastIndexByte(a.Name, '[')
		var n int
		fmt.Sscanf(a.Name[i:], "[%d]", &n)
		out[n] = a
	}
	return out
}

// allRunning reports whether by has exactly indexes 0..n-1, all running.
func allRunning(by map[int]*api.AllocationListStub, n int) bool {
	if len(by) != n {
		return false
	}
	for i := 0; i < n; i++ {
		if a := by[i]; a == nil || a.ClientStatus != "running" {
			return false
		}
	}
	return true
}

// trainerFile is what the fake trainer wrote to its alloc dir about the
// sizes its lease answered (rondo-trainer.json), nil while there is none.
type trainerFile struct {
	Role       string  `json:"role"`
	Index      int     `json:"index"`
	Workers    int     `json:"workers"`
	PS         int     `json:"ps"`
	Batch      int     `json:"batch"`
	TotalBatch int     `json:"total_batch"`
	Steps      float64 `json:"steps"`
}

func readTrainerFile(c *api.Client, allocID string) *trainerFile {
	al, _, err := c.Allocations().Info(allocID, nil)
	if err != nil {
		return nil
	}
	r, err := c.AllocFS().Cat(al, "alloc/rondo-trainer.json", nil)
	if err != nil {
		return nil
	}
	defer r.Close()
	var f trainerFile
	if json.NewDecoder(r).Decode(&f) != nil {
		return nil
	}
	return &f
}

// batchesAre reports whether every running worker of the job read, from its
// lease, the even split of the total batch over n workers, and every
// parameter server the counts (n workers, ps).
func batchesAre(c *api.Client, id string, n, ps int) (bool, string) {
	var got []string
	ok := true
	for i, a := range groupAllocs(c, id, "train") {
		f := readTrainerFile(c, a.ID)
		if f == nil {
			return false, fmt.Sprintf("worker %d: no file yet", i)
		}
		got = append(got, fmt.Sprintf("worker %d: batch %d of %d over %d (%d ps)", i, f.Batch, f.TotalBatch, f.Workers, f.PS))
		ok = ok && f.Role == "worker" && f.Index == i && f.Workers == n && f.PS == ps && f.TotalBatch == dl2TotalBatch &&
			f.Batch == lease.BatchShare(dl2TotalBatch, n, i)
	}
	for i, a := range groupAllocs(c, id, "ps") {
		f := readTrainerFile(c, a.ID)
		if f == nil {
			return false, fmt.Sprintf("ps %d: no file yet", i)
		}
		got = append(got, fmt.Sprintf("ps %d: %d workers, %d ps", i, f.Workers, f.PS))
		ok = ok && f.Role == "ps" && f.Workers == n && f.PS == ps
	}
	return ok, strings.Join(got, "; ")
}

// TestDL2OnNomad: a two-role elastic job (DL2: workers 1..3 of one GPU,
// parameter servers 1..2) in a VC whose policy is "dl2" with the DRF
// baseline as its sizer (dl2 { sizer = "drf" }) on one client with 3 fake V100s and 16 modelled
// cores, 4 s rounds. Admitted alone it runs 2 workers and 2 parameter
// servers (DRF adds a worker and a PS at a time, up to the PS maximum);
// a fixed 2-GPU job arrives and the job shrinks to 1 worker and 1 PS in
// place (worker 0 and PS 0 keep their allocations, progress carries on);
// the fixed job leaves and it grows back to 2 and 2. After each resize
// every worker reads its new share of the batch from the lease API (the
// even split of 255 over the workers) and every PS the counts. Worker 0
// and PS 0 each had exactly one allocation in the whole run; no GPU was
// ever held twice.
func TestDL2OnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	spec := cluster.UniformClient("v100-d", "v100", 3)
	spec.CPUMHz = 17 * hostCoreMHz(t) // 17 cores: the sizer's CPUs never bind here
	s := startStackWith(t, []cluster.ClientSpec{spec}, `round_seconds = 4
vc "research" {
  policy = "dl2"
  dl2 {
    sizer = "drf"
  }
}
`)
	began := time.Now()
	a := s.startAgent("4s")
	c := s.c.API
	s.submitSpec("dl2", s.dl2JobHCL("dl2", 1e9))
	var w0, ps0 string
	s.waitFor(60*time.Second, "the two-role job to run 2 workers and 2 parameter servers", func() (bool, error) {
		w, p := groupAllocs(c, "dl2", "train"), groupAllocs(c, "dl2", "ps")
		if !allRunning(w, 2) || !allRunning(p, 2) {
			return false, nil
		}
		w0, ps0 = w[0].ID, p[0].ID
		return true, nil
	})
	admitted := time.Since(began)
	var got string
	s.waitFor(20*time.Second, "the workers to read their batch at 2 workers", func() (bool, error) {
		ok, g := batchesAre(c, "dl2", 2, 2)
		got = g
		return ok, nil
	})
	t.Logf("2 workers: %s", got)
	st := s.status(a)
	for _, j := range st.Jobs {
		if j.ID == "dl2" && (j.Workers != 2 || j.MinWorkers != 1 || j.MaxWorkers != 3 || j.PS != 2 || j.MinPS != 1 || j.MaxPS != 2) {
			t.Errorf("status: workers %d (%d..%d), ps %d (%d..%d)", j.Workers, j.MinWorkers, j.MaxWorkers, j.PS, j.MinPS, j.MaxPS)
		}
	}

	// A fixed 2-GPU job arrives: the two-role job shrinks to its minimum,
	// 1 worker and 1 PS, in place.
	before := s.checkpointSteps("dl2")
	arrived := time.Now()
	s.submitSpec("fixed", strings.Replace(s.jobHCL("fixed", "ResNet-50 (batch size 64)", 1e9, 1), "count = 1", "count = 2", 1))
	s.waitFor(60*time.Second, "the fixed job to run and the two-role job to shrink to 1 worker and 1 PS", func() (bool, error) {
		f := liveAllocs(c, "fixed")
		return len(f) == 1 && f[0].ClientStatus == "running" && allRunning(groupAllocs(c, "dl2", "train"), 1) &&
			allRunning(groupAllocs(c, "dl2", "ps"), 1), nil
	})
	shrunk := time.Since(arrived)
	if w, p := groupAllocs(c, "dl2", "train"), groupAllocs(c, "dl2", "ps"); w[0].ID != w0 || p[0].ID != ps0 {
		t.Errorf("shrink restarted worker 0 (%s, was %s) or PS 0 (%s, was %s)", w[0].ID, w0, p[0].ID, ps0)
	}
	checkDisjoint(t, c, "dl2", "fixed")
	s.waitFor(20*time.Second, "the worker to read its batch at 1 worker", func() (bool, error) {
		ok, g := batchesAre(c, "dl2", 1, 1)
		got = g
		return ok, nil
	})
	t.Logf("1 worker: %s", got)
	time.Sleep(time.Second)
	if after := s.checkpointSteps("dl2"); !(after > before) {
		t.Errorf("progress did not carry on through the shrink: %.0f steps, %.0f before", after, before)
	}

	// The fixed job leaves: the two-role job grows back to 2 and 2.
	before = s.checkpointSteps("dl2")
	if _, _, err := c.Jobs().Deregister("fixed", true, nil); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	s.waitFor(60*time.Second, "the two-role job to grow back to 2 workers and 2 parameter servers", func() (bool, error) {
		return allRunning(groupAllocs(c, "dl2", "train"), 2) && allRunning(groupAllocs(c, "dl2", "ps"), 2), nil
	})
	grown := time.Since(left)
	s.waitFor(20*time.Second, "the workers to read their batch at 2 workers again", func() (bool, error) {
		ok, g := batchesAre(c, "dl2", 2, 2)
		got = g
		return ok, nil
	})
	t.Logf("2 workers again: %s", got)
	if w, p := groupAllocs(c, "dl2", "train"), groupAllocs(c, "dl2", "ps"); w[0].ID != w0 || p[0].ID != ps0 {
		t.Errorf("grow restarted worker 0 or PS 0")
	}
	if after := s.checkpointSteps("dl2"); !(after > before) {
		t.Errorf("progress did not carry on through the grow: %.0f steps, %.0f before", after, before)
	}
	checkDisjoint(t, c, "dl2")
	// Worker 0 and PS 0 ran exactly once each, in one allocation.
	all, _, err := c.Jobs().Allocations("dl2", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := map[string]int{}
	for _, al := range all {
		if strings.HasSuffix(al.Name, "[0]") {
			zero[al.TaskGroup]++
		}
	}
	if zero["train"] != 1 || zero["ps"] != 1 {
		t.Errorf("allocations of index 0: %v, want one each", zero)
	}
	logs := a.logs()
	for _, want := range []string{"admit: job=dl2", "grow: job=dl2", "shrink: job=dl2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log has no %q line", want)
		}
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "job=dl2") && (strings.Contains(l, "admit:") || strings.Contains(l, "grow:") || strings.Contains(l, "shrink:")) {
			t.Log(l[strings.Index(l, "]")+1:])
		}
	}
	if m := s.get(a, "/metrics"); !strings.Contains(m, `rondo_decisions_total{kind="shrink"}`) ||
		strings.Contains(m, `rondo_decisions_total{kind="shrink"} 0`) { // every kind is there from the start
		t.Errorf("/metrics counts no shrink decision")
	}
	t.Logf("admitted %.1fs after the agent started, shrunk %.1fs after the arrival, grown %.1fs after the departure (4 s rounds); whole test %.1fs",
		admitted.Seconds(), shrunk.Seconds(), grown.Seconds(), time.Since(began).Seconds())
}

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// elasticJobHCL is jobHCL with meta rondo.elastic = "min:max" (one GPU per
// worker).
func (s *stack) elasticJobHCL(id, model string, steps int, speedup float64, minW, maxW int) string {
	spec := s.jobHCL(id, model, steps, speedup)
	return strings.Replace(spec, `"rondo.vc"    = "research"`,
		`"rondo.vc"    = "research"
    "rondo.elastic" = "`+strconv.Itoa(minW)+":"+strconv.Itoa(maxW)+`"`, 1)
}

// allocsByIndex returns a job's live allocations by index in their name.
func allocsByIndex(c *api.Client, id string) map[int]*api.AllocationListStub {
	out := map[int]*api.AllocationListStub{}
	for _, a := range liveAllocs(c, id) {
		i := strings.LastIndexByte(a.Name, '[')
		n, _ := strconv.Atoi(strings.TrimSuffix(a.Name[i+1:], "]"))
		out[n] = a
	}
	return out
}

// TestElasticOnNomad: on one node with 3 V100s, an elastic trainer (1..3
// workers of 1 GPU) grows to all three; a fixed 1-GPU job arrives and gets
// a GPU within a round or two while the elastic job shrinks to 2 workers
// without restarting the workers it keeps; when the fixed job is gone the
// elastic job grows back. No GPU is ever held by two allocations.
func TestElasticOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-e", "v100", 3)}, `round_seconds = 4
vc "research" {
  policy = "max_min_fairness_perf"
}
`)
	a := s.startAgent("4s")
	c := s.c.API
	s.submitSpec("elastic", s.elasticJobHCL("elastic", "ResNet-50 (batch size 64)", 1e9, 1, 1, 3))
	var w0 string
	s.waitFor(90*time.Second, "the elastic job to grow to 3 running workers", func() (bool, error) {
		by := allocsByIndex(c, "elastic")
		if len(by) != 3 {
			return false, nil
		}
		for _, al := range by {
			if al.ClientStatus != "running" {
				return false, nil
			}
		}
		w0 = by[0].ID
		return true, nil
	})
	st := s.status(a)
	for _, j := range st.Jobs {
		if j.ID == "elastic" && (j.Workers != 3 || j.MinWorkers != 1 || j.MaxWorkers != 3) {
			t.Errorf("status workers %d (%d..%d), want 3 (1..3)", j.Workers, j.MinWorkers, j.MaxWorkers)
		}
	}
	// A fixed job arrives: it runs within a round or two, the elastic job
	// shrinks to 2 workers, worker 0 keeps running (same allocation).
	arrived := time.Now()
	s.submit("fixed", "ResNet-50 (batch size 64)", 1e9, 1)
	s.waitFor(60*time.Second, "the fixed job to run and the elastic job to shrink to 2", func() (bool, error) {
		f := liveAllocs(c, "fixed")
		by := allocsByIndex(c, "elastic")
		return len(f) == 1 && f[0].ClientStatus == "running" && len(by) == 2 && by[0] != nil && by[1] != nil, nil
	})
	t.Logf("fixed job running %.1fs after submission (rounds of 4s)", time.Since(arrived).Seconds())
	by := allocsByIndex(c, "elastic")
	if by[0].ID != w0 || by[0].ClientStatus != "running" {
		t.Errorf("elastic worker 0 restarted: %s (%s), was %s", by[0].ID, by[0].ClientStatus, w0)
	}
	checkDisjoint(t, c, "elastic", "fixed")
	// Stays shrunk and stable for a few rounds (no grow/shrink churn while
	// the fixed job runs).
	time.Sleep(10 * time.Second)
	if by2 := allocsByIndex(c, "elastic"); len(by2) != 2 || by2[0].ID != w0 || by2[1].ID != by[1].ID {
		t.Errorf("elastic job changed while nothing else did: %d workers", len(by2))
	}
	checkDisjoint(t, c, "elastic", "fixed")
	// The fixed job leaves: the elastic job grows back to 3, worker 0 still
	// the same allocation.
	if _, _, err := c.Jobs().Deregister("fixed", true, nil); err != nil {
		t.Fatal(err)
	}
	s.waitFor(60*time.Second, "the elastic job to grow back to 3", func() (bool, error) {
		by := allocsByIndex(c, "elastic")
		return len(by) == 3 && by[2] != nil && by[2].ClientStatus == "running", nil
	})
	if by := allocsByIndex(c, "elastic"); by[0].ID != w0 {
		t.Errorf("elastic worker 0 restarted while growing back")
	}
	// Worker 0 ran exactly once, in one allocation.
	all, _, err := c.Jobs().Allocations("elastic", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	for _, al := range all {
		if strings.HasSuffix(al.Name, "[0]") {
			zero++
		}
	}
	if zero != 1 {
		t.Errorf("elastic worker 0 had %d allocations, want 1", zero)
	}
	logs := a.logs()
	for _, want := range []string{"grow", "shrink"} {
		if !strings.Contains(logs, want+": job=elastic") {
			t.Errorf("agent log has no %q line", want)
		}
	}
}

// checkDisjoint fails when two live allocations of the jobs share a GPU.
func checkDisjoint(t *testing.T, c *api.Client, jobs ...string) {
	t.Helper()
	held := map[string]string{}
	for _, id := range jobs {
		for _, al := range liveAllocs(c, id) {
			for _, g := range allocGPUs(al) {
				if other, ok := held[g]; ok {
					t.Errorf("GPU %s held by %s and %s", g, other, al.Name)
				}
				held[g] = al.Name
			}
		}
	}
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/e2e/cluster"
)

// quotaConfig: two VCs without cells, each a share of one V100 and one
// K80 over the whole cluster, each with its own policy.
const quotaConfig = `round_seconds = 4
vc "first" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "fifo_perf"
}
vc "shared" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "max_min_fairness_perf"
}
`

// TestQuotaVCsOnNomad: several quota-only VCs without cells, each with
// its own policy, on a real Nomad (issue 12: before, the agent ran the
// first VC's policy for every job). Three one-GPU jobs per VC on 2 V100 +
// 2 K80: no VC ever holds more than its share of a type; under FIFO the
// two oldest jobs of "first" hold their GPUs throughout and its third
// never runs; under LAS "shared" rotates its three jobs, so its third
// runs within a few rounds; /v1/status shows each job's VC, and FIFO's
// third job waiting over its VC's quota.
func TestQuotaVCsOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("k80-a", "k80", 2)}, quotaConfig)
	c := s.c.API
	vcOf := map[string]string{}
	for _, id := range []string{"q0", "q1", "q2", "s0", "s1", "s2"} {
		vc := "first"
		if id[0] == 's' {
			vc = "shared"
		}
		vcOf[id] = vc
		spec := strings.Replace(s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000000, 1), `"rondo.vc"    = "research"`, `"rondo.vc"    = "`+vc+`"`, 1)
		s.submitSpec(id, spec)
		time.Sleep(1100 * time.Millisecond) // distinct arrival order for FIFO
	}
	a := s.startAgent("4s")
	s.waitFor(90*time.Second, "q0, q1 and two of shared's jobs running", func() (bool, error) {
		n := 0
		for _, id := range []string{"s0", "s1", "s2"} {
			if l := liveAllocs(c, id); len(l) == 1 && l[0].ClientStatus == "running" {
				n++
			}
		}
		for _, id := range []string{"q0", "q1"} {
			if l := liveAllocs(c, id); len(l) != 1 || l[0].ClientStatus != "running" {
				return false, nil
			}
		}
		return n == 2, nil
	})
	firstAlloc := map[string]string{}
	for _, id := range []string{"q0", "q1"} {
		firstAlloc[id] = liveAllocs(c, id)[0].ID
	}
	ran := map[string]bool{}
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		st := s.status(a)
		held := map[string]map[string]int{"first": {}, "shared": {}}
		for _, j := range st.Jobs {
			if j.VC != vcOf[j.ID] {
				t.Fatalf("status: job %s in vc %q, want %q", j.ID, j.VC, vcOf[j.ID])
			}
			if j.State == "running" {
				held[j.VC][j.Type] += len(j.GPUs)
				ran[j.ID] = true
			}
		}
		for vc, h := range held {
			for typ, n := range h {
				if n > 1 {
					t.Fatalf("vc %s holds %d %s GPUs, its share is 1 (%+v)", vc, n, typ, st.Jobs)
				}
			}
		}
		for _, id := range []string{"q0", "q1"} {
			if l := liveAllocs(c, id); len(l) != 1 || l[0].ID != firstAlloc[id] {
				t.Fatalf("FIFO job %s was stopped or moved (allocations %d)", id, len(l))
			}
		}
		if len(liveAllocs(c, "q2")) > 0 {
			t.Fatalf("FIFO VC ran its third job beyond its share")
		}
		time.Sleep(time.Second)
	}
	for _, id := range []string{"s0", "s1", "s2"} {
		if !ran[id] {
			t.Errorf("LAS VC never ran %s in 40 s of 4 s rounds", id)
		}
	}
	// What its user sees (#19): FIFO's third job waits over its VC's quota.
	for _, j := range s.status(a).Jobs {
		if j.ID == "q2" && (j.PendingKind != "over_quota" || j.Pending != "over quota: VC first uses all of its share of k80, v100") {
			t.Errorf("q2: %q (%s), want over quota", j.Pending, j.PendingKind)
		}
	}
}

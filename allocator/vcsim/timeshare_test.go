package vcsim

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/philly"
)

func tsScenario(t *testing.T, seed uint64, jobs int) []philly.Job {
	t.Helper()
	d, err := philly.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := philly.Generate(d, philly.Options{Seed: seed, Jobs: jobs, ClusterGPUs: 32, Load: 0.9, Opportunistic: 0.2,
		MaxDurationS: 12 * 3600, WorkShares: true,
		Tenants: []philly.Tenant{{VC: "small", Share: 3, GPUs: []int{1, 2, 4}}, {VC: "big", Share: 1, GPUs: []int{4, 8}}}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTimeSharingNoAnomaly: with both layers and opportunistic work, every
// guaranteed job starts and finishes exactly when it does on its VC's
// private cluster under the same policy.
func TestTimeSharingNoAnomaly(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		tr := tsScenario(t, seed, 300)
		r, err := CompareTimeSharing(tr, TimeShareOptions{Spec: nodesSpec(4, "small", 3, "big", 1),
			Policies: []string{"max_min_fairness_perf", "fifo"}, Check: !testing.Short()})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range r.VCs {
			t.Logf("seed %d %s: %+v", seed, v.VC, v)
			if v.Guaranteed == 0 || v.AnomalyJobs != 0 || v.Anomaly || v.JCT != v.PrivateJCT || v.Delay != v.PrivateDelay {
				t.Errorf("seed %d: anomaly for %s: %+v", seed, v.VC, v)
			}
		}
		if r.OppShare <= 0 || r.Utilization <= 0 || r.Utilization > 1 || r.Rounds == 0 {
			t.Errorf("seed %d: %+v", seed, r)
		}
	}
}

// TestTimeSharingPolicyMatters: the VC's policy changes how its jobs are
// served: FIFO and LAS give the same trace different delays and JCTs.
func TestTimeSharingPolicyMatters(t *testing.T) {
	tr := tsScenario(t, 1, 300)
	var got [2]TimeShareVC
	for i, p := range []string{"fifo", "max_min_fairness_perf"} {
		r, err := CompareTimeSharing(tr, TimeShareOptions{Spec: nodesSpec(4, "small", 3, "big", 1), Policies: []string{p, p}})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = r.VCs[0]
	}
	if got[0].JCT == got[1].JCT || got[0].Delay == got[1].Delay {
		t.Fatalf("fifo and las serve small alike: %+v / %+v", got[0], got[1])
	}
	// LAS time-shares: jobs start sooner on average than under FIFO.
	if got[1].Delay.Avg >= got[0].Delay.Avg {
		t.Fatalf("las delay %v not below fifo's %v", got[1].Delay.Avg, got[0].Delay.Avg)
	}
}

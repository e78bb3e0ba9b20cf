package sim

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// TestElasticJobUsesIdleGPUs: the same ResNet-50 job, once fixed at 1 GPU
// and once elastic (1..4 GPUs), alone on 4 V100s: the elastic run credits
// the table's 4-GPU throughput and finishes in about T(1)/T(4) of the time;
// with a second, fixed job arriving later both finish and the elastic job
// is never counted as preempted for resizing.
func TestElasticJobUsesIdleGPUs(t *testing.T) {
	run := func(jobs []trace.Job) *Result {
		res, err := Run(&SliceSource{Jobs: jobs}, Options{
			Cluster: Cluster{Types: map[string]int{"v100": 4}, GPUsPerServer: 4},
			Engine:  engine.Config{Policy: "max_min_fairness_perf", RoundS: 360},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	m := "ResNet-50 (batch size 64)"
	fixed := trace.Job{ID: 0, Model: m, ScaleFactor: 1, TotalSteps: 200000, Priority: 1}
	elastic := fixed
	elastic.ElasticMaxGPUs = 4
	rf, re := run([]trace.Job{fixed}), run([]trace.Job{elastic})
	t1, _ := throughputs.Default().Lookup(m, 1, "v100")
	t4, _ := throughputs.Default().Lookup(m, 4, "v100")
	jf, je := rf.Jobs[0].JCTS, re.Jobs[0].JCTS
	want := jf * t1 / t4
	if je > want*1.05+360 || je < want*0.95-360 {
		t.Fatalf("elastic JCT %.0f s, fixed %.0f s: want about %.0f s (T1=%.2f T4=%.2f)", je, jf, want, t1, t4)
	}
	// A fixed 2-GPU job arrives an hour in: the elastic job shrinks to make
	// room, both finish, and no preemption is counted.
	other := trace.Job{ID: 1, Model: m, ScaleFactor: 2, TotalSteps: 50000, Priority: 1, ArrivalS: 3600}
	r2 := run([]trace.Job{elastic, other})
	if !r2.Finished || r2.Preemptions != 0 {
		t.Fatalf("finished=%v preemptions=%d", r2.Finished, r2.Preemptions)
	}
	if r2.Jobs[0].JCTS <= je {
		t.Fatalf("elastic job not slowed by the arrival: %.0f vs %.0f alone", r2.Jobs[0].JCTS, je)
	}
}

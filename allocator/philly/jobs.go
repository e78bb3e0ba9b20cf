package philly

import (
	"fmt"

	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// SimJobs turns a Philly trace into simulator jobs. Each job gets a model
// of Gavel's table measured at its GPU count (its scale factor) on every
// one of types: among those, sorted, the (ID mod n)-th; its steps are its
// duration at that model's isolated throughput on ref (the duration is
// the job's run time alone on ref, the cluster's reference GPU type). VC,
// class and arrival are the Philly draw's. A gang larger than a node is
// split by the scheduler, as any multi-GPU job.
func SimJobs(tr []Job, tb *throughputs.Table, ref string, types []string) ([]trace.Job, error) {
	bySF := map[int][]throughputs.Key{}
	for _, k := range tb.Keys(ref) {
		ok := true
		for _, t := range types {
			if v, has := tb.Isolated(k, t); !has || v <= 0 {
				ok = false
			}
		}
		if v, _ := tb.Isolated(k, ref); ok && v > 0 {
			bySF[k.ScaleFactor] = append(bySF[k.ScaleFactor], k)
		}
	}
	out := make([]trace.Job, 0, len(tr))
	for i, j := range tr {
		if i > 0 && j.ArrivalS < tr[i-1].ArrivalS {
			return nil, fmt.Errorf("philly: job %d arrives before job %d", j.ID, tr[i-1].ID)
		}
		keys := bySF[j.GPUs]
		if len(keys) == 0 {
			return nil, fmt.Errorf("philly: job %d: no model measured at %d GPUs on %s and %v", j.ID, j.GPUs, ref, types)
		}
		k := keys[j.ID%len(keys)]
		tput, _ := tb.Isolated(k, ref)
		out = append(out, trace.Job{ID: j.ID, Model: k.Model, ScaleFactor: j.GPUs, TotalSteps: j.DurationS * tput,
			DurationS: j.DurationS, Priority: 1, ArrivalS: j.ArrivalS, VC: j.VC, Opportunistic: j.Opportunistic})
	}
	return out, nil
}

package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/ledger"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

const faultModel = "ResNet-18 (batch size 64)"

func faultFile(t *testing.T, name string) *faults.Schedule {
	t.Helper()
	s, err := faults.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// timeline is the finish of a job alone on its GPU from start on, with
// rem steps left, the round's arithmetic of mechanism: a start cost in
// the first round, 360 s rounds.
func timeline(start, rem, tput, cost float64) float64 {
	now := start
	for rem > 0 {
		steps := math.Min(math.Floor(tput*(360-cost)), rem)
		now = now + cost + steps/tput
		rem -= steps
		cost = 0
	}
	return now
}

func faultJobs(n int, steps float64) []trace.Job {
	var jobs []trace.Job
	for i := range n {
		jobs = append(jobs, trace.Job{ID: i, Model: faultModel, ScaleFactor: 1, TotalSteps: steps, Priority: 1})
	}
	return jobs
}

// healthyOnly fails the test when a running micro-task holds a GPU the
// round's snapshot saw failed (at the start of a step, s.gpus is that
// snapshot's state: mid-round events are applied after observe).
func healthyOnly(t *testing.T, s *simulator) map[string]bool {
	t.Helper()
	failed := map[string]bool{}
	for _, g := range s.gpus {
		if g.Failed {
			failed[g.ID] = true
		}
	}
	for _, m := range s.running {
		for _, g := range m.gpus {
			if failed[g] {
				t.Errorf("t=%.1f: job %s placed on failed GPU %s", s.now, m.jobs[0].id, g)
			}
		}
	}
	return failed
}

func onGPU(s *simulator, gpu string) *micro {
	for k := range s.running {
		for _, g := range s.running[k].gpus {
			if g == gpu {
				return &s.running[k]
			}
		}
	}
	return nil
}

// TestFaultCutsOneJob: one job alone on v100=2 with a 30 s start cost;
// v100-0 fails at 100 s. The job is cut there (credited 100 s, the steps
// of its 70 s of work), the round ends at the cut, the next round
// recomputes and restarts it on v100-1 (paying the start cost again), and
// its JCT is exactly that timeline's; one preemption, one interruption.
func TestFaultCutsOneJob(t *testing.T) {
	tput, _ := throughputs.Default().Lookup(faultModel, 1, "v100")
	total := math.Floor(tput * 3600)
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2}, GPUsPerServer: 1, PricePerHourUS: DefaultPrices},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, StartCostS: 30}
	base, err := Run(&SliceSource{Jobs: faultJobs(1, total)}, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Faults = faultFile(t, "fault_one.csv")
	var r0 int
	checked := false
	o.observe = func(s *simulator) {
		healthyOnly(t, s)
		if len(s.running) == 0 {
			return
		}
		switch m := s.running[0]; {
		case s.now == 0:
			if len(s.running) != 1 || m.gpus[0] != "v100-0" {
				t.Fatalf("round 0 runs %d micro-tasks, the first on %v: want one on v100-0", len(s.running), m.gpus)
			}
			r0 = s.recomputes
		case !checked:
			checked = true
			js := m.jobs[0]
			if s.now != 100 {
				t.Errorf("the round after the cut starts at %v, want 100 (the cut ends the round)", s.now)
			}
			if want := total - math.Floor(tput*70); js.remaining != want || !reflect.DeepEqual(js.received, ledger.Account{"v100": 100}) {
				t.Errorf("after the cut: remaining %v (want %v), received %v (want v100: 100)", js.remaining, want, js.received)
			}
			if m.gpus[0] != "v100-1" || s.recomputes != r0+1 {
				t.Errorf("after the cut: runs on %v (want v100-1), recomputes %d (want %d)", m.gpus, s.recomputes, r0+1)
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: faultJobs(1, total)}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("no round after the failure")
	}
	// The timeline: cut at 100, then restarted on v100-1 with a start cost.
	now := timeline(100, total-math.Floor(tput*70), tput, 30)
	if res.Jobs[0].JCTS != now || !res.Jobs[0].Done {
		t.Errorf("JCT %v, want %v", res.Jobs[0].JCTS, now)
	}
	if res.Preemptions != 1 || res.FaultInterruptions != 1 || res.GPUFailures != 1 {
		t.Errorf("preemptions %d, interruptions %d, GPU failures %d: want 1, 1, 1", res.Preemptions, res.FaultInterruptions, res.GPUFailures)
	}
	// Arrival, failure, recovery.
	if base.Recomputes != 1 || res.Recomputes != base.Recomputes+2 {
		t.Errorf("recomputes %d, %d without faults: want 3 and 1", res.Recomputes, base.Recomputes)
	}
}

// TestFaultReplacesAndReuses: three jobs on v100=2,k80=2. v100-0 fails
// mid-round (twice: idempotent), the job on it is credited up to the
// failure, the next round recomputes and re-places it on a healthy GPU,
// nothing runs on v100-0 while failed, and after it recovers it is used
// again.
func TestFaultReplacesAndReuses(t *testing.T) {
	tput, _ := throughputs.Default().Lookup(faultModel, 1, "v100")
	total := math.Floor(tput * 3 * 3600)
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2, "k80": 2}, GPUsPerServer: 1, PricePerHourUS: DefaultPrices},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, Faults: faultFile(t, "fault_three.csv")}
	var (
		victim          *jobState
		r0, lastRecomp  int
		checked, reused bool
		recovered       bool
	)
	o.observe = func(s *simulator) {
		failed := healthyOnly(t, s)
		defer func() { lastRecomp = s.recomputes }()
		if len(s.running) == 0 {
			return
		}
		switch {
		case s.now == 0:
			m := onGPU(s, "v100-0")
			if m == nil || len(s.running) != 3 {
				t.Fatalf("round 0: %d micro-tasks, v100-0 used: %v", len(s.running), m != nil)
			}
			if m.finish <= 100 {
				t.Fatalf("round 0: the job on v100-0 ends at %v, before the failure", m.finish)
			}
			victim, r0 = m.jobs[0], s.recomputes
		case !checked:
			checked = true
			if !failed["v100-0"] || s.now < 100 || s.now >= 2000 {
				t.Fatalf("t=%v: v100-0 failed=%v", s.now, failed["v100-0"])
			}
			if !reflect.DeepEqual(victim.received, ledger.Account{"v100": 100}) || victim.done || victim.remaining <= 0 {
				t.Errorf("cut job: received %v (want v100: 100), remaining %v", victim.received, victim.remaining)
			}
			placed := false
			for _, m := range s.running {
				placed = placed || m.jobs[0] == victim
			}
			if !placed || s.recomputes != r0+1 {
				t.Errorf("t=%v: cut job re-placed %v, recomputes %d (want %d)", s.now, placed, s.recomputes, r0+1)
			}
		case s.now >= 2000:
			if !recovered {
				recovered = true
				if failed["v100-0"] || s.recomputes != lastRecomp+1 {
					t.Errorf("t=%v: after the recovery v100-0 failed=%v, recomputes %d (want %d)", s.now, failed["v100-0"], s.recomputes, lastRecomp+1)
				}
			}
			reused = reused || onGPU(s, "v100-0") != nil
		}
	}
	res, err := Run(&SliceSource{Jobs: faultJobs(3, total)}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !checked || !reused {
		t.Fatalf("checked the round after the failure: %v; v100-0 used after its recovery: %v", checked, reused)
	}
	if !res.Finished || res.JobsDone != 3 || res.GPUFailures != 1 || res.FaultInterruptions != 1 || res.Preemptions < 1 {
		t.Fatalf("%+v", res)
	}
}

// TestFaultNodeFail: a node failure fails every GPU of the server (here
// both GPUs of v100-s0) at once and cuts every micro-task on them.
func TestFaultNodeFail(t *testing.T) {
	tput, _ := throughputs.Default().Lookup(faultModel, 1, "v100")
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 4}, GPUsPerServer: 2, PricePerHourUS: DefaultPrices},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, Faults: faultFile(t, "fault_node.csv")}
	onNode, checked := 0, false
	o.observe = func(s *simulator) {
		failed := healthyOnly(t, s)
		if len(s.running) == 0 {
			return
		}
		switch {
		case s.now == 0:
			for _, id := range []string{"v100-0", "v100-1"} {
				if m := onGPU(s, id); m != nil && m.finish > 100 {
					onNode++
				}
			}
		case !checked:
			checked = true
			if !failed["v100-0"] || !failed["v100-1"] || failed["v100-2"] || failed["v100-3"] {
				t.Errorf("t=%v: failed GPUs %v, want v100-0 and v100-1", s.now, failed)
			}
			if len(s.running) != 2 {
				t.Errorf("t=%v: %d jobs running on the other server, want 2", s.now, len(s.running))
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: faultJobs(2, math.Floor(tput*3600))}, o)
	if err != nil {
		t.Fatal(err)
	}
	if onNode != 2 || !checked {
		t.Fatalf("%d jobs on the failing server at t=0, want 2 (placement packs them on v100-s0)", onNode)
	}
	if !res.Finished || res.GPUFailures != 2 || res.FaultInterruptions != 2 || res.Preemptions != 2 {
		t.Fatalf("GPU failures %d, interruptions %d, preemptions %d: want 2, 2, 2 (%+v)", res.GPUFailures, res.FaultInterruptions, res.Preemptions, res)
	}
}

// TestFaultWaitsForRecovery: every GPU of the only type the jobs can use
// (v100; a100 has no throughputs) fails at 100 s, and recovers at 4e6 s,
// after more idle rounds than the "can never run" guard allows: the run
// waits, both jobs restart at the recovery exactly (the clock stops there,
// from idle rounds, or jumping to a later arrival) and finish on the
// timeline from there. Without the recovery the guard fires.
func TestFaultWaitsForRecovery(t *testing.T) {
	tput, _ := throughputs.Default().Lookup(faultModel, 1, "v100")
	total := math.Floor(tput * 3600)
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2, "a100": 2}, GPUsPerServer: 2, PricePerHourUS: DefaultPrices},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, Faults: faultFile(t, "fault_all.csv")}
	const recovery = 4e6 // > 10,000 idle rounds of 360 s
	want := timeline(recovery, total-math.Floor(tput*100), tput, 0)
	late := trace.Job{ID: 2, Model: faultModel, ScaleFactor: 1, TotalSteps: 100, Priority: 1, ArrivalS: 5e6}
	for _, jobs := range [][]trace.Job{faultJobs(2, total), append(faultJobs(2, total), late)} {
		res, err := Run(&SliceSource{Jobs: jobs}, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs[:2] {
			if !j.Done || j.FinishS != want {
				t.Errorf("%d jobs: job %d: done %v, finish %v: want %v, restarted at the recovery", len(jobs), j.ID, j.Done, j.FinishS, want)
			}
		}
		if !res.Finished || res.GPUFailures != 2 || res.FaultInterruptions != 2 {
			t.Fatalf("%+v", res)
		}
	}
	o.Faults = faultFile(t, "fault_all_norecover.csv")
	if _, err := Run(&SliceSource{Jobs: faultJobs(2, math.Floor(tput*3600))}, o); err == nil || !strings.Contains(err.Error(), "can never run") {
		t.Fatalf("no recovery: %v, want the can-never-run error", err)
	}
}

// TestFaultCutJobNotSuspended: a cut job no longer holds GPUs, so when
// the next round does not run it, it is not also counted as suspended.
// Three jobs on v100=2: two run, v100-0 fails at 100; at the next round the
// one healthy GPU goes to the job that never ran, so both others wait: the
// cut counts one preemption and the suspended job on v100-1 one.
func TestFaultCutJobNotSuspended(t *testing.T) {
	tput, _ := throughputs.Default().Lookup(faultModel, 1, "v100")
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2}, GPUsPerServer: 1, PricePerHourUS: DefaultPrices},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, Faults: faultFile(t, "fault_one.csv")}
	var waiting *jobState
	checked := false
	o.observe = func(s *simulator) {
		healthyOnly(t, s)
		switch {
		case len(s.running) == 0:
		case s.now == 0:
			if len(s.running) != 2 {
				t.Fatalf("round 0: %d micro-tasks, want 2", len(s.running))
			}
			for _, js := range s.active {
				if onJob(s, js) == nil {
					waiting = js
				}
			}
		case !checked:
			checked = true
			if len(s.running) != 1 || s.running[0].jobs[0] != waiting || s.preemptions != 2 {
				t.Errorf("t=%v: %d running (want 1, the job that waited), preemptions %d (want 2)", s.now, len(s.running), s.preemptions)
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: faultJobs(3, math.Floor(tput*3600))}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !checked || !res.Finished || res.FaultInterruptions != 1 {
		t.Fatalf("checked %v, %+v", checked, res)
	}
}

func onJob(s *simulator, js *jobState) *micro {
	for k := range s.running {
		for _, j := range s.running[k].jobs {
			if j == js {
				return &s.running[k]
			}
		}
	}
	return nil
}

// TestFaultEmptyScheduleIdentical: a fault file without events gives the
// same Result as no fault file (timings aside), packing included.
func TestFaultEmptyScheduleIdentical(t *testing.T) {
	jobs, err := trace.Generate(trace.Options{Seed: 0, Rate: 3, MultiGPU: true}, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"max_min_fairness_perf", "max_min_fairness_packed"} {
		o := Options{Cluster: Cluster{Types: map[string]int{"v100": 8, "p100": 8, "k80": 8}, GPUsPerServer: 4, PricePerHourUS: DefaultPrices},
			Engine: engine.Config{Policy: policy, RoundS: 360}}
		a, err := Run(&SliceSource{Jobs: jobs}, o)
		if err != nil {
			t.Fatal(err)
		}
		o.Faults = faultFile(t, "fault_empty.csv")
		b, err := Run(&SliceSource{Jobs: jobs}, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*Result{a, b} {
			r.WallS, r.SolveMSP50, r.SolveMSMax = 0, 0, 0
		}
		if !reflect.DeepEqual(a, b) || !a.Finished {
			t.Fatalf("%s: results differ:\n%+v\n%+v", policy, a, b)
		}
	}
}

// TestFaultResolveErrors: a target outside the cluster is an error naming
// the file and line before anything runs; the ideal mechanism refuses
// faults.
func TestFaultResolveErrors(t *testing.T) {
	o := Options{Cluster: Cluster{Types: map[string]int{"v100": 2}, GPUsPerServer: 1},
		Engine: engine.Config{Policy: "max_min_fairness_perf", RoundS: 360}, Faults: faultFile(t, "fault_range.csv")}
	_, err := Run(&SliceSource{Jobs: faultJobs(1, 100)}, o)
	if want := `testdata/fault_range.csv:3: target: "gpu:v100:2": index 2 out of range: v100 has 2 GPUs`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	o.Faults, o.Ideal = faultFile(t, "fault_one.csv"), true
	if _, err := Run(&SliceSource{Jobs: faultJobs(1, 100)}, o); err == nil || !strings.Contains(err.Error(), "round-based") {
		t.Fatalf("ideal with faults: %v", err)
	}
}

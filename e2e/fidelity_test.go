package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// fidelityRoundS is the fidelity test's round length: long enough that the
// per-round enforcement and task start latency (about a second, several on
// a loaded machine) is a small part of a round.
const fidelityRoundS = 20

// fidelityJob is one job of the fidelity trace: a model, its arrival in
// rounds after the agent's first round, and its length in seconds of V100
// time (steps = V100 throughput × seconds).
type fidelityJob struct {
	model      string
	arrRounds  float64
	v100Second float64
}

// fidelityTrace: eight jobs of seven models on 2 V100 + 2 K80, four at the
// first round and one in the middle of each of the next four rounds. The
// lengths were picked with the simulator (not with Nomad) so that for
// every start latency between 1 and 4 s the simulated schedule is the same
// and no job finishes within 0.19 rounds (3.8 s) of a round boundary: a
// finish that close to a boundary would move by a whole round on a jitter
// of a second, which is noise, not fidelity.
var fidelityTrace = []fidelityJob{
	{"ResNet-18 (batch size 64)", 0, 40},
	{"LM (batch size 20)", 0, 25},
	{"Transformer (batch size 64)", 0, 30},
	{"A3C", 0, 25},
	{"CycleGAN", 0.5, 45},
	{"Recommendation (batch size 2048)", 1.5, 35},
	{"ResNet-50 (batch size 64)", 2.5, 30},
	{"ResNet-50 (batch size 16)", 3.5, 50},
}

// fidelityConfig is a cluster config without cells: one engine for the
// whole cluster, as `rondo simulate` runs it.
const fidelityConfig = `round_seconds = %d
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// testFidelity runs the fidelity trace on the Nomad cluster (each job
// submitted at its arrival time, JCT = its last task's finish − submit)
// and in the simulator with the same engine configuration, the arrivals at
// the real submit offsets and the start latency measured on the cluster
// (round start → task running, averaged over every start) as the
// simulator's StartCostS. Gavel's Table 3: average JCT within 5%.
func testFidelity(s *stack) {
	t, c := s.t, s.c.API
	const R = fidelityRoundS
	tb := throughputs.Default()
	type run struct {
		id     string
		steps  float64
		submit time.Time
	}
	jobs := make([]run, len(fidelityTrace))
	for i, fj := range fidelityTrace {
		v, ok := tb.Lookup(fj.model, 1, "v100")
		if !ok {
			t.Fatalf("no V100 throughput for %s", fj.model)
		}
		jobs[i] = run{id: fmt.Sprintf("fid%d", i), steps: math.Round(v * fj.v100Second)}
	}
	// One engine, no cells: write the config and point the agent at it.
	cfg := filepath.Join(t.TempDir(), "fidelity.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(fidelityConfig, R)), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := s.cfgPath
	s.cfgPath = cfg
	defer func() { s.cfgPath = saved }()

	// The jobs arriving at round 0 wait for the agent's first round; their
	// arrival is that round's start.
	for i, fj := range fidelityTrace {
		if fj.arrRounds == 0 {
			s.submit(jobs[i].id, fj.model, int(jobs[i].steps), 1)
		}
	}
	ag := s.startAgent(fmt.Sprintf("%ds", R))
	var t1 time.Time
	s.waitFor(60*time.Second, "the agent's first round", func() (bool, error) {
		st := s.status(ag)
		if st.NextRound.IsZero() {
			return false, nil
		}
		t1 = st.NextRound.Add(-time.Duration(R) * time.Second)
		return true, nil
	})
	for i, fj := range fidelityTrace {
		if fj.arrRounds == 0 {
			jobs[i].submit = t1
			continue
		}
		time.Sleep(time.Until(t1.Add(time.Duration(fj.arrRounds * R * float64(time.Second)))))
		jobs[i].submit = time.Now()
		s.submit(jobs[i].id, fj.model, int(jobs[i].steps), 1)
	}
	// A job is done when its checkpoint holds every step and the task that
	// wrote it has stopped (Nomad records its finish a moment after the
	// checkpoint's last write).
	s.waitFor(300*time.Second, "every fidelity job done", func() (bool, error) {
		for _, j := range jobs {
			ck, err := rnomad.ReadCheckpoint(filepath.Join(s.ckpt, j.id))
			if err != nil || ck.Steps < j.steps {
				return false, nil
			}
			if _, ok := lastTaskEnd(c, j.id); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	ag.stop()

	// JCTs on Nomad, and every task start's latency after its round began
	// (rounds start at t1 + kR: the agent's timer does not drift, checked
	// below from its log).
	roundStart := func(at time.Time) time.Time {
		k := math.Floor(at.Sub(t1).Seconds() / R)
		return t1.Add(time.Duration(k*R) * time.Second)
	}
	var nomadJCT []float64
	var latencies []float64
	nomadMakespan := 0.0
	for i := range jobs {
		finish, ok := lastTaskEnd(c, jobs[i].id)
		if !ok {
			t.Fatalf("job %s: its last task has not finished", jobs[i].id)
		}
		allocs, _, err := c.Jobs().Allocations(jobs[i].id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			al, _, err := c.Allocations().Info(a.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			ts := al.TaskStates["train"]
			if ts == nil || ts.StartedAt.IsZero() {
				continue
			}
			created := time.Unix(0, al.CreateTime)
			latencies = append(latencies, ts.StartedAt.Sub(roundStart(created)).Seconds())
		}
		nomadJCT = append(nomadJCT, finish.Sub(jobs[i].submit).Seconds())
		nomadMakespan = math.Max(nomadMakespan, finish.Sub(t1).Seconds())
		noOverlap(t, c, jobs[i].id)
	}
	startCost := mean(latencies)
	sort.Float64s(latencies)
	t.Logf("task start latency after the round start: mean %.2fs, min %.2fs, max %.2fs over %d starts",
		startCost, latencies[0], latencies[len(latencies)-1], len(latencies))
	t.Logf("agent round timer: %s", roundDrift(ag.logs(), t1, R))

	// The simulator: same engine config, arrivals at the real submit
	// offsets, the measured start latency.
	var tj []trace.Job
	for i, fj := range fidelityTrace {
		tj = append(tj, trace.Job{ID: i, Model: fj.model, ScaleFactor: 1, TotalSteps: jobs[i].steps, Priority: 1,
			ArrivalS: jobs[i].submit.Sub(t1).Seconds()})
	}
	res, err := sim.Run(&sim.SliceSource{Jobs: tj}, sim.Options{StartCostS: startCost,
		Cluster: sim.Cluster{Types: map[string]int{"v100": 2, "k80": 2}, GPUsPerServer: 2},
		Engine:  engine.Config{Policy: "max_min_fairness_perf", RoundS: R}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || len(res.Jobs) != len(jobs) {
		t.Fatalf("simulator: finished %v, %d jobs", res.Finished, len(res.Jobs))
	}
	// For the record: the simulator without the start latency.
	res0, err := sim.Run(&sim.SliceSource{Jobs: tj}, sim.Options{
		Cluster: sim.Cluster{Types: map[string]int{"v100": 2, "k80": 2}, GPUsPerServer: 2},
		Engine:  engine.Config{Policy: "max_min_fairness_perf", RoundS: R}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	simJCT := make([]float64, len(jobs))
	for _, jr := range res.Jobs {
		simJCT[jr.ID] = jr.JCTS
	}
	for i, fj := range fidelityTrace {
		fmt.Fprintf(&b, "\n  %s %-34s arrival %5.1fs  nomad %6.1fs  sim %6.1fs", jobs[i].id, fj.model,
			tj[i].ArrivalS, nomadJCT[i], simJCT[i])
	}
	avgN, avgS := mean(nomadJCT), mean(simJCT)
	diff := math.Abs(avgN-avgS) / avgS
	t.Logf("fidelity (%ds rounds, start cost %.2fs): average JCT nomad %.1fs, simulator %.1fs (%+.1f%%), makespan nomad %.1fs, simulator %.1fs%s",
		R, startCost, avgN, avgS, 100*(avgN-avgS)/avgS, nomadMakespan, res.MakespanS, b.String())
	t.Logf("simulator without the start latency: average JCT %.1fs (%+.1f%% from nomad)", res0.AvgJCTS, 100*(res0.AvgJCTS-avgN)/avgN)
	if diff > 0.05 {
		t.Errorf("average JCT: nomad %.1fs vs simulator %.1fs differ by %.1f%% (> 5%%)", avgN, avgS, 100*diff)
	}
}

// lastTaskEnd is when the job's most recently started task stopped; ok is
// false while it runs (or never ran).
func lastTaskEnd(c *api.Client, id string) (time.Time, bool) {
	allocs, _, err := c.Jobs().Allocations(id, true, nil)
	if err != nil {
		return time.Time{}, false
	}
	var last *api.TaskState
	for _, a := range allocs {
		al, _, err := c.Allocations().Info(a.ID, nil)
		if err != nil {
			return time.Time{}, false
		}
		ts := al.TaskStates["train"]
		if ts == nil || ts.StartedAt.IsZero() {
			continue
		}
		if last == nil || ts.StartedAt.After(last.StartedAt) {
			last = ts
		}
	}
	if last == nil || last.State != "dead" || last.FinishedAt.IsZero() {
		return time.Time{}, false
	}
	return last.FinishedAt, true
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// roundDrift compares the agent's logged round times with t1 + kR.
func roundDrift(logs string, t1 time.Time, R float64) string {
	var worst float64
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "rondo: round:") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", f[0])
		if err != nil {
			continue
		}
		off := at.Sub(t1).Seconds()
		k := math.Round(off / R)
		worst = math.Max(worst, off-k*R)
		n++
	}
	return fmt.Sprintf("%d round log lines, the latest %.2fs after t1 + kR (decision time; no drift accumulates)", n, worst)
}

package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// fidelityRoundS is the fidelity test's round length: long enough that the
// per-round enforcement and task start latency (about a second, several on
// a loaded machine) is a small part of a round.
const fidelityRoundS = 20

// fidelityScale compresses Gavel's trace in time: durations (V100 time)
// and arrival gaps are divided by it, and a job's V100 time is capped at
// fidelityCapS, so that a trace of tens of jobs runs in minutes.
const (
	fidelityScale = 120.0
	fidelityCapS  = 120.0
)

// fidelityConfig: two quota-only VCs (no cells), each a share of two GPUs
// of each type on a cluster of three 4-GPU machines (V100, P100, K80),
// with different policies: las and fifo name them.
func fidelityConfig(las, fifo string) string {
	return fmt.Sprintf(`round_seconds = %d
vc "las" {
  gpus   = { v100 = 2, p100 = 2, k80 = 2 }
  policy = %q
}
vc "fifo" {
  gpus   = { v100 = 2, p100 = 2, k80 = 2 }
  policy = %q
}
`, fidelityRoundS, las, fifo)
}

// fidelityClients: one machine of four GPUs per type.
func fidelityClients() []cluster.ClientSpec {
	return []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 4), cluster.UniformClient("p100-a", "p100", 4),
		cluster.UniformClient("k80-a", "k80", 4)}
}

// fidelityTrace draws n jobs from Gavel's trace generator (multi-GPU,
// Poisson arrivals at rate jobs/hour, the seed), keeps those of at most 2
// GPUs (a VC's share holds 2 of each type: larger jobs could never run),
// compresses it by fidelityScale, caps durations at fidelityCapS and puts
// jobs in the VCs alternately.
func fidelityTrace(t *testing.T, n int, seed int64, rate float64) []trace.Job {
	g, err := trace.NewGenerator(trace.Options{Seed: seed, Rate: rate, MultiGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	tb := throughputs.Default()
	var out []trace.Job
	for len(out) < n {
		j, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if j.ScaleFactor > 2 {
			continue
		}
		v, ok := tb.Lookup(j.Model, j.ScaleFactor, "v100")
		if !ok {
			t.Fatalf("no V100 throughput for %s at %d GPUs", j.Model, j.ScaleFactor)
		}
		d := math.Min(j.DurationS/fidelityScale, fidelityCapS)
		out = append(out, trace.Job{ID: len(out), Model: j.Model, ScaleFactor: j.ScaleFactor, Priority: 1,
			TotalSteps: math.Round(v * d), DurationS: d, ArrivalS: j.ArrivalS / fidelityScale, VC: []string{"las", "fifo"}[len(out)%2]})
	}
	return out
}

// fidelityJobHCL is a job of the fidelity trace: its VC, its GPUs.
func (s *stack) fidelityJobHCL(j trace.Job) string {
	spec := s.jobHCL(fmt.Sprintf("fid%02d", j.ID), j.Model, int(j.TotalSteps), 1)
	spec = strings.Replace(spec, `"rondo.vc"    = "research"`, fmt.Sprintf(`"rondo.vc"    = %q`, j.VC), 1)
	return strings.Replace(spec, "count = 1", fmt.Sprintf("count = %d", j.ScaleFactor), 1)
}

// TestFidelity is the short fidelity check in make test: 12 jobs.
func TestFidelity(t *testing.T) {
	testFidelity(t, fidelityClients(), fidelityConfig("max_min_fairness_perf", "fifo_perf"), 12, 0, false)
}

// TestLongFidelity is the full one (make test-long): 32 jobs.
func TestLongFidelity(t *testing.T) {
	if os.Getenv("RONDO_LONG") == "" {
		t.Skip("long: set RONDO_LONG=1 (make test-long)")
	}
	testFidelity(t, fidelityClients(), fidelityConfig("max_min_fairness_perf", "fifo_perf"), 32, 1, false)
}

// TestLongSpaceSharingFidelity (make test-long; issue 13): the fidelity
// run with space sharing: every GPU also advertises two MPS shares, both
// VCs pack (LAS and FIFO), 32 jobs. Besides the fidelity bounds, pairs
// must run on shares of one GPU, and no poll of Nomad's allocations may
// see a GPU held exclusively and shared at once. The short version in
// make test is TestSpaceSharingOnNomad.
func TestLongSpaceSharingFidelity(t *testing.T) {
	if os.Getenv("RONDO_LONG") == "" {
		t.Skip("long: set RONDO_LONG=1 (make test-long)")
	}
	clients := fidelityClients()
	for i := range clients {
		clients[i].MPSShares = 2
	}
	testFidelity(t, clients, fidelityConfig("max_min_fairness_packed", "fifo_packed"), 32, 1, true)
}

// testFidelity: the same trace on the Nomad cluster and in `rondo
// simulate` (Gavel's Table 3 compares the two):
//
//  1. Calibration, a separate run on the same cluster: 14 one-GPU jobs
//     rotate on the 12 GPUs for a few rounds; the start latency (round
//     start → task running, every start) is the simulator's --start-cost.
//     Nothing is fitted on the run compared.
//  2. The trace: n jobs from Gavel's generator (mixed scale factors), in two
//     quota-only VCs with different policies, on three GPU types, each job
//     submitted at its arrival time; JCT = its last task's finish − submit.
//  3. `rondo simulate --vc-config` on the same config and trace (arrivals at
//     the real submit offsets), the calibrated start cost.
//
// It reports per-job JCT differences (median, p90, max) and the average
// JCTs, checks that preemptions happened, and asserts the average JCT
// within 5% and the p90 of per-job differences within 15%. With sharing,
// it also polls Nomad's allocations (checkSharing) while the trace runs:
// pairs must run, and the sharing invariant must hold on every poll.
func testFidelity(t *testing.T, clients []cluster.ClientSpec, config string, n int, seed int64, sharing bool) {
	s := startStackWith(t, clients, config)
	c := s.c.API
	const R = fidelityRoundS
	startCost := s.calibrateStartCost(R, 4)
	s.reset()

	jobs := fidelityTrace(t, n, seed, 6)
	submit := make([]time.Time, len(jobs))
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = fmt.Sprintf("fid%02d", j.ID)
		if j.ArrivalS == 0 {
			s.submitSpec(ids[i], s.fidelityJobHCL(j))
		}
	}
	ag := s.startAgent(fmt.Sprintf("%ds", R))
	var watch *sharingWatch
	if sharing {
		watch = watchSharing(c)
	}
	t1 := s.firstRound(ag, R)
	for i, j := range jobs {
		if j.ArrivalS == 0 {
			submit[i] = t1
			continue
		}
		time.Sleep(time.Until(t1.Add(time.Duration(j.ArrivalS * float64(time.Second)))))
		submit[i] = time.Now()
		s.submitSpec(ids[i], s.fidelityJobHCL(j))
	}
	s.waitTrained(30*time.Minute, "every fidelity job done", ids, jobs)
	ag.stop()
	if watch != nil {
		paired, violations := watch.stop()
		t.Logf("pairs seen on shares of one GPU: %v", paired)
		if len(paired) == 0 {
			t.Error("no two jobs ever ran on shares of one GPU")
		}
		if len(violations) > 0 {
			t.Errorf("a GPU held exclusively and shared at once (or a share twice): %s", strings.Join(violations, "; "))
		}
	}
	nomadJCT := make([]float64, len(jobs))
	restarts := 0
	for i, id := range ids {
		finish, _ := lastTaskEnd(c, id)
		nomadJCT[i] = finish.Sub(submit[i]).Seconds()
		restarts += noOverlap(t, c, id) - 1
	}

	// The simulator, through the CLI: the same config, the trace with the
	// real submit offsets, the calibrated start cost.
	dir := t.TempDir()
	var tr bytes.Buffer
	for i := range jobs {
		jobs[i].ArrivalS = submit[i].Sub(t1).Seconds()
	}
	if err := trace.WriteJSONL(&tr, jobs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.jsonl"), tr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(s.bin, "rondo"), "simulate", "--vc-config", s.cfgPath, "--trace", filepath.Join(dir, "trace.jsonl"),
		"--cluster", "v100=4,p100=4,k80=4", "--gpus-per-server", "4", "--round", fmt.Sprint(R),
		"--start-cost", fmt.Sprintf("%.3f", startCost), "--opportunistic", "0", "--json", "--out", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("rondo simulate: %v\n%s", err, out)
	}
	var res struct {
		AvgJCTS     float64 `json:"avg_jct_s"`
		Preemptions int     `json:"preemptions"`
		Finished    bool    `json:"finished"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.Finished {
		t.Fatalf("rondo simulate: %v, finished %v\n%s", err, res.Finished, out)
	}
	simJCT := readJobsCSV(t, filepath.Join(dir, "jobs.csv"), len(jobs))
	if keep := os.Getenv("RONDO_E2E_LOGS"); keep != "" {
		// The agent's log (its round plans) and the simulator's inputs,
		// to replay the run and compare the two round by round.
		name := strings.ReplaceAll(t.Name(), "/", "_")
		os.WriteFile(filepath.Join(keep, name+".log"), []byte(ag.logs()), 0o644)
		os.WriteFile(filepath.Join(keep, name+".trace.jsonl"), tr.Bytes(), 0o644)
		if cfg, err := os.ReadFile(s.cfgPath); err == nil {
			os.WriteFile(filepath.Join(keep, name+".hcl"), cfg, 0o644)
		}
		os.WriteFile(filepath.Join(keep, name+".start-cost"), []byte(fmt.Sprintf("%.3f\n", startCost)), 0o644)
	}

	var b strings.Builder
	var diffs []float64
	for i, j := range jobs {
		d := math.Abs(nomadJCT[i]-simJCT[i]) / simJCT[i]
		diffs = append(diffs, d)
		fmt.Fprintf(&b, "\n  %s %-4s %d GPU %-34s arrival %6.1fs  nomad %6.1fs  sim %6.1fs  %+6.1f%%", ids[i], j.VC, j.ScaleFactor, j.Model,
			j.ArrivalS, nomadJCT[i], simJCT[i], 100*(nomadJCT[i]-simJCT[i])/simJCT[i])
	}
	sort.Float64s(diffs)
	avgN, avgS := mean(nomadJCT), mean(simJCT)
	p90 := sim.Percentile(diffs, 90)
	t.Logf("fidelity, %d jobs (%ds rounds, calibrated start cost %.2fs): average JCT nomad %.1fs, simulator %.1fs (%+.1f%%); "+
		"per-job |difference| median %.1f%%, p90 %.1f%%, max %.1f%%; restarts on nomad %d, preemptions in the simulator %d%s",
		len(jobs), R, startCost, avgN, avgS, 100*(avgN-avgS)/avgS, 100*sim.Percentile(diffs, 50), 100*p90, 100*diffs[len(diffs)-1],
		restarts, res.Preemptions, b.String())
	if restarts == 0 || res.Preemptions == 0 {
		t.Errorf("no preemption happened (nomad restarts %d, simulator %d): the trace does not exercise them", restarts, res.Preemptions)
	}
	if d := math.Abs(avgN-avgS) / avgS; d > 0.05 {
		t.Errorf("average JCT: nomad %.1fs vs simulator %.1fs differ by %.1f%% (> 5%%)", avgN, avgS, 100*d)
	}
	if p90 > 0.15 {
		t.Errorf("p90 of per-job JCT differences %.1f%% (> 15%%)", 100*p90)
	}
}

// calibrateStartCost measures the cluster's start latency on a run of its
// own: 14 one-GPU jobs under one LAS engine rotate for the given rounds
// (four on the fidelity cluster's 12 GPUs: enough for 14 starts); each
// task start's delay after its round began is averaged.
func (s *stack) calibrateStartCost(R, rounds int) float64 {
	t, c := s.t, s.c.API
	saved := s.cfgPath
	s.cfgPath = filepath.Join(t.TempDir(), "calibrate.hcl")
	defer func() { s.cfgPath = saved }()
	if err := os.WriteFile(s.cfgPath, []byte(fmt.Sprintf("round_seconds = %d\nvc \"research\" {\n  policy = \"max_min_fairness_perf\"\n}\n", R)), 0o644); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 14; i++ {
		ids = append(ids, fmt.Sprintf("cal%02d", i))
		s.submit(ids[i], "ResNet-18 (batch size 64)", 1000000000, 1)
	}
	ag := s.startAgent(fmt.Sprintf("%ds", R))
	t1 := s.firstRound(ag, R)
	time.Sleep(time.Until(t1.Add(time.Duration(rounds*R)*time.Second + time.Duration(R)*time.Second/2)))
	ag.stop()
	roundStart := func(at time.Time) time.Time {
		k := math.Floor(at.Sub(t1).Seconds() / float64(R))
		return t1.Add(time.Duration(k*float64(R)) * time.Second)
	}
	var lat []float64
	for _, id := range ids {
		allocs, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			al, _, err := c.Allocations().Info(a.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ts := al.TaskStates["train"]; ts != nil && !ts.StartedAt.IsZero() {
				lat = append(lat, ts.StartedAt.Sub(roundStart(time.Unix(0, al.CreateTime))).Seconds())
			}
		}
	}
	if len(lat) < 14 {
		t.Fatalf("calibration: %d starts measured, want at least 14", len(lat))
	}
	sort.Float64s(lat)
	m := mean(lat)
	t.Logf("calibration: task start latency after the round start: mean %.2fs, median %.2fs, min %.2fs, max %.2fs over %d starts",
		m, sim.Percentile(lat, 50), lat[0], lat[len(lat)-1], len(lat))
	return m
}

// waitTrained waits until every job ids[i] checkpointed jobs[i]'s steps
// and Nomad recorded its last task's end.
func (s *stack) waitTrained(timeout time.Duration, what string, ids []string, jobs []trace.Job) {
	s.waitFor(timeout, what, func() (bool, error) {
		for i, id := range ids {
			ck, err := rnomad.ReadCheckpoint(filepath.Join(s.ckpt, id))
			if err != nil || ck.Steps < jobs[i].TotalSteps {
				return false, nil
			}
			if _, ok := lastTaskEnd(s.c.API, id); !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// firstRound waits for the agent's first round and returns its start.
func (s *stack) firstRound(ag *agentProc, R int) time.Time {
	var t1 time.Time
	s.waitFor(60*time.Second, "the agent's first round", func() (bool, error) {
		st := s.status(ag)
		if st.NextRound.IsZero() {
			return false, nil
		}
		t1 = st.NextRound.Add(-time.Duration(R) * time.Second)
		return true, nil
	})
	return t1
}

// readJobsCSV reads per-job JCTs from `rondo simulate --out`'s jobs.csv.
func readJobsCSV(t *testing.T, path string, n int) []float64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: %v (%d rows)", path, err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	id, okID := col["id"]
	jct, okJCT := col["jct_s"]
	if !okID || !okJCT {
		t.Fatalf("%s: no id or jct_s column in %v", path, rows[0])
	}
	out := make([]float64, n)
	for _, r := range rows[1:] {
		i, err1 := strconv.Atoi(r[id])
		v, err2 := strconv.ParseFloat(r[jct], 64)
		if err1 != nil || err2 != nil || i < 0 || i >= n {
			t.Fatalf("%s: bad row %v", path, r)
		}
		out[i] = v
	}
	return out
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

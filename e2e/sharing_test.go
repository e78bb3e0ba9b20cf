package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// sharingRoundS is the space-sharing test's round length.
const sharingRoundS = 10

// sharingModels: one-GPU models whose pairs Gavel measured on V100, so
// that packing them helps.
var sharingModels = []string{"ResNet-18 (batch size 64)", "Recommendation (batch size 512)", "ResNet-18 (batch size 32)",
	"ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)", "ResNet-18 (batch size 128)"}

// TestSpaceSharingOnNomad (issue 13): on one client of two fake V100s
// advertised also as two MPS shares each, six one-GPU jobs arrive at once
// (three per GPU: packing helps only when oversubscribed). The same jobs
// run under max_min_fairness_packed and under max_min_fairness_perf:
//
//   - the packed run places pairs on the two shares of one GPU, and on
//     every poll of Nomad's allocations no GPU is held exclusively and
//     shared at once, nor a share twice;
//   - the packed run's average JCT is lower than the unpacked run's, on
//     Nomad and in `rondo simulate` on the same trace;
//   - Nomad and the simulator agree on the packed run as the fidelity test
//     asks: average JCT within 5%, p90 of per-job differences within 15%
//     (the start cost from a separate calibration run).
func TestSpaceSharingOnNomad(t *testing.T) {
	client := cluster.UniformClient("v100-a", "v100", 2)
	client.MPSShares = 2
	s := startStackWith(t, []cluster.ClientSpec{client}, sharingConfig("max_min_fairness_packed"))
	const R = sharingRoundS
	startCost := s.calibrateStartCost(R, 9) // 2 GPUs: about two starts a round
	s.reset()

	tb := throughputs.Default()
	var jobs []trace.Job
	for i, m := range sharingModels {
		v, _ := tb.Lookup(m, 1, "v100")
		d := 40.0 + 10*float64(i%3) // seconds alone on a V100
		jobs = append(jobs, trace.Job{ID: i, Model: m, ScaleFactor: 1, Priority: 1, TotalSteps: math.Round(v * d), DurationS: d})
	}
	type run struct{ nomad, sim []float64 }
	results := map[string]run{}
	for _, pol := range []string{"max_min_fairness_packed", "max_min_fairness_perf"} {
		if err := os.WriteFile(s.cfgPath, []byte(sharingConfig(pol)), 0o644); err != nil {
			t.Fatal(err)
		}
		prefix := map[bool]string{true: "pk", false: "pf"}[strings.HasSuffix(pol, "_packed")]
		nomadJCT, paired, violations := s.runSharing(prefix, jobs, R)
		if len(violations) > 0 {
			t.Errorf("%s: a GPU held exclusively and shared at once (or a share twice): %s", pol, strings.Join(violations, "; "))
		}
		if pol == "max_min_fairness_packed" && len(paired) == 0 {
			t.Errorf("%s: no two jobs ever ran on shares of one GPU", pol)
		}
		if pol != "max_min_fairness_packed" && len(paired) > 0 {
			t.Errorf("%s: jobs shared a GPU under an unpacked policy: %v", pol, paired)
		}
		t.Logf("%s: pairs seen on shares of one GPU: %v", pol, paired)
		results[pol] = run{nomadJCT, s.simulateSharing(pol, jobs, R, startCost)}
		s.reset()
	}
	pk, pf := results["max_min_fairness_packed"], results["max_min_fairness_perf"]
	var b strings.Builder
	var diffs []float64
	for i, j := range jobs {
		d := math.Abs(pk.nomad[i]-pk.sim[i]) / pk.sim[i]
		diffs = append(diffs, d)
		fmt.Fprintf(&b, "\n  %d %-34s packed: nomad %6.1fs sim %6.1fs (%+6.1f%%)   perf: nomad %6.1fs sim %6.1fs", j.ID, j.Model,
			pk.nomad[i], pk.sim[i], 100*(pk.nomad[i]-pk.sim[i])/pk.sim[i], pf.nomad[i], pf.sim[i])
	}
	sort.Float64s(diffs)
	p90 := sim.Percentile(diffs, 90)
	nPk, sPk, nPf, sPf := mean(pk.nomad), mean(pk.sim), mean(pf.nomad), mean(pf.sim)
	t.Logf("space sharing, %d jobs on 2 V100 (%ds rounds, calibrated start cost %.2fs): average JCT packed nomad %.1fs / sim %.1fs (%+.1f%%), "+
		"perf nomad %.1fs / sim %.1fs; packing lowers it by %.1f%% on nomad, %.1f%% in the simulator; packed per-job |difference| "+
		"median %.1f%%, p90 %.1f%%, max %.1f%%%s", len(jobs), R, startCost, nPk, sPk, 100*(nPk-sPk)/sPk, nPf, sPf,
		100*(1-nPk/nPf), 100*(1-sPk/sPf), 100*sim.Percentile(diffs, 50), 100*p90, 100*diffs[len(diffs)-1], b.String())
	if nPk >= nPf || sPk >= sPf {
		t.Errorf("packing did not lower the average JCT: nomad %.1fs vs %.1fs, simulator %.1fs vs %.1fs", nPk, nPf, sPk, sPf)
	}
	if d := math.Abs(nPk-sPk) / sPk; d > 0.05 {
		t.Errorf("packed average JCT: nomad %.1fs vs simulator %.1fs differ by %.1f%% (> 5%%)", nPk, sPk, 100*d)
	}
	if p90 > 0.15 {
		t.Errorf("packed: p90 of per-job JCT differences %.1f%% (> 15%%)", 100*p90)
	}
}

func sharingConfig(policy string) string {
	return fmt.Sprintf("round_seconds = %d\nvc \"research\" {\n  policy = %q\n}\n", sharingRoundS, policy)
}

// runSharing submits the jobs at once (ids prefix + index), runs the agent
// until all are done and returns their JCTs (last task end − the first
// round's start, the simulator's time 0), the
// pairs seen running on shares of one GPU, and the violations of the
// sharing invariant seen on any poll of Nomad's allocations.
func (s *stack) runSharing(prefix string, jobs []trace.Job, R int) (jct []float64, paired []string, violations []string) {
	c := s.c.API
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = fmt.Sprintf("%s%d", prefix, j.ID)
		s.submitSpec(ids[i], s.jobHCL(ids[i], j.Model, int(j.TotalSteps), 1))
	}
	watch := watchSharing(c)
	ag := s.startAgent(fmt.Sprintf("%ds", R))
	submit := s.firstRound(ag, R) // the simulator's time 0: every job has arrived
	s.waitTrained(15*time.Minute, prefix+" jobs done", ids, jobs)
	ag.stop()
	paired, violations = watch.stop()
	if dir := os.Getenv("RONDO_E2E_LOGS"); dir != "" {
		// Keep the agent's log (its decisions) for a look after the test.
		os.WriteFile(filepath.Join(dir, "sharing-"+prefix+".log"), []byte(ag.logs()), 0o644)
	}
	for _, id := range ids {
		end, _ := lastTaskEnd(c, id)
		jct = append(jct, end.Sub(submit).Seconds())
	}
	return jct, paired, violations
}

// sharingWatch polls Nomad's allocations (checkSharing) every 250 ms until
// stopped.
type sharingWatch struct {
	done       chan struct{}
	wg         sync.WaitGroup
	paired     []string // distinct pairs seen running, in order
	violations []string
}

func watchSharing(c *api.Client) *sharingWatch {
	w := &sharingWatch{done: make(chan struct{})}
	seen := map[string]bool{}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			p, v := checkSharing(c)
			for _, x := range p {
				if !seen[x] {
					seen[x] = true
					w.paired = append(w.paired, x)
				}
			}
			w.violations = append(w.violations, v...)
		}
	}()
	return w
}

// stop ends the polling and returns what it saw.
func (w *sharingWatch) stop() (paired, violations []string) {
	close(w.done)
	w.wg.Wait()
	return w.paired, w.violations
}

// checkSharing reads every live allocation's devices once: the pairs of
// jobs running on shares of one GPU, and violations (a GPU held
// exclusively while some allocation holds one of its shares, a device
// instance held twice).
func checkSharing(c *api.Client) (pairs, violations []string) {
	allocs, _, err := c.Allocations().List(&api.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil {
		return nil, nil // Nomad busy: the next poll checks
	}
	holder := map[string]string{}      // device instance -> job
	exclusive := map[string]string{}   // GPU -> job
	sharers := map[string][]string{}   // GPU -> running jobs on its shares
	shareHeld := map[string][]string{} // GPU -> jobs holding its shares
	for _, a := range allocs {
		if a.DesiredStatus != "run" || (a.ClientStatus != "pending" && a.ClientStatus != "running") || a.AllocatedResources == nil {
			continue
		}
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				for _, id := range d.DeviceIDs {
					if j, dup := holder[id]; dup {
						violations = append(violations, fmt.Sprintf("%s held by %s and %s", id, j, a.JobID))
					}
					holder[id] = a.JobID
					g, _, share := strings.Cut(id, "/")
					if !share {
						exclusive[g] = a.JobID
						continue
					}
					shareHeld[g] = append(shareHeld[g], a.JobID)
					if a.ClientStatus == "running" {
						sharers[g] = append(sharers[g], a.JobID)
					}
				}
			}
		}
	}
	for g, js := range shareHeld {
		if j, ok := exclusive[g]; ok {
			violations = append(violations, fmt.Sprintf("GPU %s held by %s and shared by %v", g, j, js))
		}
	}
	for _, js := range sharers {
		if len(js) == 2 && js[0] != js[1] {
			sort.Strings(js)
			pairs = append(pairs, js[0]+"+"+js[1])
		}
	}
	return pairs, violations
}

// simulateSharing runs `rondo simulate` on the same jobs (all arriving at
// 0) and cluster under the policy, with the calibrated start cost, and
// returns the per-job JCTs.
func (s *stack) simulateSharing(policy string, jobs []trace.Job, R int, startCost float64) []float64 {
	t := s.t
	dir := t.TempDir()
	var tr bytes.Buffer
	if err := trace.WriteJSONL(&tr, jobs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.jsonl"), tr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(s.bin, "rondo"), "simulate", "--policy", policy, "--trace", filepath.Join(dir, "trace.jsonl"),
		"--cluster", "v100=2", "--gpus-per-server", "2", "--round", fmt.Sprint(R),
		"--start-cost", fmt.Sprintf("%.3f", startCost), "--json", "--out", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("rondo simulate: %v\n%s", err, out)
	}
	var res struct {
		Finished bool `json:"finished"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.Finished {
		t.Fatalf("rondo simulate: %v, finished %v\n%s", err, res.Finished, out)
	}
	return readJobsCSV(t, filepath.Join(dir, "jobs.csv"), len(jobs))
}

// TestPairProfilingOnNomad (issue 13): a packed policy works on a model
// absent from Gavel's table. On two fake V100s with two MPS shares each,
// four jobs of table models and one of a model the table lacks arrive at
// once under max_min_fairness_packed. The new job is first measured alone;
// the round then plans its profiling runs (round.PairEstimates), so it
// runs on shares of one GPU next to at least estimator.DefaultProfiles
// jobs of distinct reference models (their pair reports reach the round
// through the lease API); every job finishes and no GPU is ever held
// exclusively and shared at once.
func TestPairProfilingOnNomad(t *testing.T) {
	t.Parallel()
	client := cluster.UniformClient("v100-a", "v100", 2)
	client.MPSShares = 2
	s := startStackWith(t, []cluster.ClientSpec{client}, sharingConfig("max_min_fairness_packed"))
	const R = sharingRoundS
	tb := throughputs.Default()
	const unknown = "Mystery (batch size 8)" // the fake trainer runs it at 1 step/s alone, half that in a pair
	if _, ok := tb.Lookup(unknown, 1, "v100"); ok {
		t.Fatalf("%s is in the table", unknown)
	}
	var jobs []trace.Job
	for i, m := range sharingModels[:4] {
		v, _ := tb.Lookup(m, 1, "v100")
		d := 90.0 + 10*float64(i) // seconds alone on a V100
		jobs = append(jobs, trace.Job{ID: i, Model: m, ScaleFactor: 1, Priority: 1, TotalSteps: math.Round(v * d), DurationS: d})
	}
	jobs = append(jobs, trace.Job{ID: 4, Model: unknown, ScaleFactor: 1, Priority: 1, TotalSteps: 120, DurationS: 120})
	_, paired, violations := s.runSharing("pr", jobs, R)
	if len(violations) > 0 {
		t.Errorf("a GPU held exclusively and shared at once (or a share twice): %s", strings.Join(violations, "; "))
	}
	partners := map[string]bool{}
	for _, p := range paired {
		a, b, _ := strings.Cut(p, "+")
		switch {
		case a == "pr4":
			partners[b] = true
		case b == "pr4":
			partners[a] = true
		}
	}
	t.Logf("pairs seen on shares of one GPU: %v; the new model's partners: %d", paired, len(partners))
	if len(partners) < estimator.DefaultProfiles {
		t.Errorf("the job of a model the table lacks ran next to %d distinct reference jobs, want its %d profiling runs",
			len(partners), estimator.DefaultProfiles)
	}
}

// sharingCellsConfig: two V100 nodes as two node cells, one per VC; both
// VCs pack, prod turns space sharing off.
const sharingCellsConfig = `round_seconds = 10
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 2
  node  = true
}
cell "v100-node" "a" {
  nomad_node = "v100-a"
}
cell "v100-node" "b" {
  nomad_node = "v100-b"
}
vc "research" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_packed"
}
vc "prod" {
  quota         = { "v100-node" = 1 }
  policy        = "max_min_fairness_packed"
  space_sharing = false
}
`

// TestSpaceSharingUnderCellsOnNomad (issue 13): VCs over HiveD cells on
// two nodes of two fake V100s with two MPS shares each. Six jobs of VC
// research (packing, three per GPU of its cell) and three of VC prod
// (packing policy, space_sharing = false) arrive at once. Pairs run, each
// of two research jobs; no prod job ever shares a GPU; the two VCs' jobs
// never run on one node (each VC on its own cell's node); no GPU is held
// exclusively and shared at once; every job finishes.
func TestSpaceSharingUnderCellsOnNomad(t *testing.T) {
	t.Parallel()
	var clients []cluster.ClientSpec
	for _, n := range []string{"v100-a", "v100-b"} {
		c := cluster.UniformClient(n, "v100", 2)
		c.MPSShares = 2
		clients = append(clients, c)
	}
	s := startStackWith(t, clients, sharingCellsConfig)
	c := s.c.API
	tb := throughputs.Default()
	var ids []string
	var jobs []trace.Job
	vcOf := map[string]string{}
	add := func(id, vc, model string, d float64) {
		v, _ := tb.Lookup(model, 1, "v100")
		j := trace.Job{ID: len(jobs), Model: model, ScaleFactor: 1, Priority: 1, TotalSteps: math.Round(v * d), DurationS: d}
		spec := strings.Replace(s.jobHCL(id, model, int(j.TotalSteps), 1), `"rondo.vc"    = "research"`, fmt.Sprintf(`"rondo.vc"    = %q`, vc), 1)
		s.submitSpec(id, spec)
		ids, jobs, vcOf[id] = append(ids, id), append(jobs, j), vc
	}
	for i, m := range sharingModels {
		add(fmt.Sprintf("r%d", i), "research", m, 40+10*float64(i%3))
	}
	for i, m := range sharingModels[:3] {
		add(fmt.Sprintf("p%d", i), "prod", m, 40)
	}
	watch := watchSharing(c)
	ag := s.startAgent("10s")
	s.waitTrained(10*time.Minute, "every job done", ids, jobs)
	ag.stop()
	paired, violations := watch.stop()
	t.Logf("pairs seen on shares of one GPU: %v", paired)
	if len(violations) > 0 {
		t.Errorf("a GPU held exclusively and shared at once (or a share twice): %s", strings.Join(violations, "; "))
	}
	if len(paired) == 0 {
		t.Error("no two research jobs ever ran on shares of one GPU")
	}
	for _, p := range paired {
		a, b, _ := strings.Cut(p, "+")
		if vcOf[a] != "research" || vcOf[b] != "research" {
			t.Errorf("pair %s: only research packs (prod has space_sharing = false)", p)
		}
	}
	nodes := map[string]map[string]bool{} // VC -> nodes its jobs ran on
	for _, id := range ids {
		allocs, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range allocs {
			if nodes[vcOf[id]] == nil {
				nodes[vcOf[id]] = map[string]bool{}
			}
			nodes[vcOf[id]][al.NodeName] = true
		}
	}
	t.Logf("nodes per VC: %v", nodes)
	for n := range nodes["research"] {
		if nodes["prod"][n] {
			t.Errorf("research and prod both ran on %s: a VC left its cell", n)
		}
	}
}

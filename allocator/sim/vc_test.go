package sim

import (
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/trace"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// vcJobs is a Gavel continuous trace with multi-GPU jobs up to maxSF GPUs
// (larger ones dropped, ids renumbered), durations divided by 10 to keep
// the runs short and arrivals 4 times as dense to load the VCs, given VCs in turn and every fifth job opportunistic.
func vcJobs(t *testing.T, n, maxSF int, vcs []string) []trace.Job {
	t.Helper()
	all, err := trace.Generate(trace.Options{Seed: 3, Rate: 6, MultiGPU: true}, 3*n)
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.Job
	for _, j := range all {
		if j.ScaleFactor > maxSF || len(out) == n {
			continue
		}
		j.ID = len(out)
		j.TotalSteps = float64(int(j.TotalSteps/10) + 1)
		j.ArrivalS /= 4
		j.VC = vcs[j.ID%len(vcs)]
		j.Opportunistic = j.ID%5 == 4
		out = append(out, j)
	}
	return out
}

// TestVCQuotaHetero: quota-only VCs of different policies on a 3-type
// cluster, through round.Quota: in every round each VC's guaranteed jobs
// hold at most its share of each type, while its demand exceeds its share
// at times (the bound binds); every job finishes and the per-VC metrics
// count each VC's jobs.
func TestVCQuotaHetero(t *testing.T) {
	shares := map[string]map[string]int{
		"a": {"v100": 4, "p100": 2, "k80": 2},
		"b": {"v100": 2, "p100": 4, "k80": 4},
	}
	dec, err := round.NewQuota([]round.QuotaVC{
		{Name: "a", Policy: "max_min_fairness_perf", GPUs: shares["a"]},
		{Name: "b", Policy: "fifo", GPUs: shares["b"]},
	}, rhcl.DefaultVCPolicy, 360, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := vcJobs(t, 60, 4, []string{"a", "b"})
	nodes := ServerNodes(map[string]int{"v100": 8, "p100": 8, "k80": 8}, 4)
	if len(nodes) != 6 || nodes[0].Name != "k80-s0" || nodes[0].GPUs["k80"] != 4 {
		t.Fatalf("nodes %+v", nodes)
	}
	over := map[string]bool{}
	rounds := 0
	o := Options{Nodes: nodes, Decider: dec, Engine: engine.Config{Policy: "quota", RoundS: 360}}
	o.observe = func(s *simulator) {
		if len(s.running) == 0 {
			return
		}
		rounds++
		held := map[string]map[string]int{"a": {}, "b": {}}
		for _, m := range s.running {
			for _, js := range m.jobs {
				if !js.tj.Opportunistic {
					held[js.tj.VC][m.typ] += len(m.gpus)
				}
			}
		}
		for vc, byType := range held {
			for typ, n := range byType {
				if n > shares[vc][typ] {
					t.Errorf("t=%.0f: vc %s holds %d %s GPUs, its share is %d", s.now, vc, n, typ, shares[vc][typ])
				}
			}
		}
		demand := map[string]int{}
		for _, js := range s.active {
			if !js.tj.Opportunistic {
				demand[js.tj.VC] += js.tj.ScaleFactor
			}
		}
		for vc, d := range demand {
			if d > shares[vc]["v100"]+shares[vc]["p100"]+shares[vc]["k80"] {
				over[vc] = true
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.JobsDone != len(jobs) || rounds == 0 {
		t.Fatalf("finished %v, %d/%d done, %d rounds", res.Finished, res.JobsDone, len(jobs), rounds)
	}
	if !over["a"] || !over["b"] {
		t.Errorf("a VC's demand never exceeded its share (%v): the bound was never tested", over)
	}
	checkVCCounts(t, res, jobs)
}

// checkVCCounts: the per-VC metrics count each VC's guaranteed jobs and
// the opportunistic ones, all done.
func checkVCCounts(t *testing.T, res *Result, jobs []trace.Job) {
	t.Helper()
	want := map[string]int{}
	opp := 0
	for _, j := range jobs {
		if j.Opportunistic {
			opp++
		} else {
			want[j.VC]++
		}
	}
	if len(res.VCs) != len(want) {
		t.Fatalf("vcs %+v, want %v", res.VCs, want)
	}
	for _, v := range res.VCs {
		if v.Jobs != want[v.Name] || v.JobsDone != v.Jobs || !(v.AvgJCTS > 0) || v.P95JCTS < v.P50JCTS {
			t.Errorf("vc %+v, want %d jobs", v, want[v.Name])
		}
	}
	if o := res.Opportunistic; o == nil || o.Jobs != opp || o.JobsDone != opp {
		t.Errorf("opportunistic %+v, want %d jobs", o, opp)
	}
}

// cellsSetup loads the 3-type cells config of the docs and lays out its
// nodes (one per node-level cell, named by nomad_node) and the decider,
// as the agent builds it (cmd/rondo vcDecider: selectors by node name).
func cellsSetup(t *testing.T) (*rhcl.Config, []Node, *round.Cells) {
	t.Helper()
	cfg, diags := rhcl.LoadPath("../../docs/vc-demo/hetero-cells.hcl")
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	leaf := map[string]string{}
	for _, ct := range cfg.CellTypes {
		if ct.GPUType != "" {
			leaf[ct.Name+"-node"] = ct.GPUType
		}
	}
	var nodes []Node
	var sels []round.Selector
	for _, c := range cfg.Cells {
		nodes = append(nodes, Node{Name: c.NomadNode, GPUs: map[string]int{leaf[c.Type]: 8}})
		sels = append(sels, round.Selector{Cell: c.Name, Nodes: []string{c.NomadNode}})
	}
	var pols []string
	for _, v := range cfg.VCs {
		pols = append(pols, v.Policy)
	}
	dec, err := round.NewCells(round.CellsConfig{Spec: cfg.CellSpec(), Selectors: sels, Policies: pols,
		OppPolicy: rhcl.DefaultVCPolicy, RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, nodes, dec
}

// TestVCCellsHetero: VCs of cells on 3 types (two 8-GPU nodes each;
// prod's quota one node of each type, research's one v100 and one p100
// node) through round.Cells: every job finishes, and in every round a VC's
// guaranteed jobs lie on at most as many nodes of a type as its quota has
// node cells of that type (none for research's k80), never on a node
// where the other VC's guaranteed jobs run.
func TestVCCellsHetero(t *testing.T) {
	cfg, nodes, dec := cellsSetup(t)
	quota := map[string]map[string]int{}
	for _, v := range cfg.VCs {
		quota[v.Name] = map[string]int{}
		for _, q := range v.Quota {
			quota[v.Name][strings.TrimSuffix(q.Type, "-node")] = q.Count
		}
	}
	if quota["research"]["k80"] != 0 || quota["prod"]["k80"] != 1 {
		t.Fatalf("quota %v", quota)
	}
	jobs := vcJobs(t, 60, 8, []string{"prod", "research"})
	rounds := 0
	o := Options{Nodes: nodes, Decider: dec, Engine: engine.Config{Policy: "cells", RoundS: 360}}
	o.observe = func(s *simulator) {
		if len(s.running) == 0 {
			return
		}
		rounds++
		gpuNode := map[string]string{}
		for _, g := range s.gpus {
			gpuNode[g.ID] = g.Server
		}
		on := map[string]map[string]map[string]bool{} // vc -> type -> nodes
		owner := map[string]string{}                  // node -> vc
		for _, m := range s.running {
			for _, js := range m.jobs {
				if js.tj.Opportunistic {
					continue
				}
				vc := js.tj.VC
				if on[vc] == nil {
					on[vc] = map[string]map[string]bool{}
				}
				if on[vc][m.typ] == nil {
					on[vc][m.typ] = map[string]bool{}
				}
				for _, g := range m.gpus {
					n := gpuNode[g]
					on[vc][m.typ][n] = true
					if o, ok := owner[n]; ok && o != vc {
						t.Errorf("t=%.0f: node %s runs guaranteed jobs of %s and %s", s.now, n, o, vc)
					}
					owner[n] = vc
				}
			}
		}
		for vc, byType := range on {
			for typ, ns := range byType {
				if len(ns) > quota[vc][typ] {
					t.Errorf("t=%.0f: vc %s's guaranteed jobs on %d %s nodes %v, its quota is %d", s.now, vc, len(ns), typ, ns, quota[vc][typ])
				}
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.JobsDone != len(jobs) || rounds == 0 {
		t.Fatalf("finished %v, %d/%d done, %d rounds", res.Finished, res.JobsDone, len(jobs), rounds)
	}
	checkVCCounts(t, res, jobs)
}

// TestVCCellsFaults: in VC mode fault targets name nodes: v100-0 (all
// eight GPUs) fails at 100 s while jobs run on it and recovers at 20000 s.
// No job runs on a failed GPU, the jobs cut at the failure run again
// elsewhere before the recovery, every job finishes and the eight failures
// are counted. A target in the plain simulator's syntax is refused.
func TestVCCellsFaults(t *testing.T) {
	_, nodes, dec := cellsSetup(t)
	const failS, recoverS = 100.0, 20000.0
	sched, err := faults.Parse("vc-faults.csv", strings.NewReader(
		"time_s,kind,target\n100,node-fail,node:v100-0\n20000,node-recover,node:v100-0\n"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := vcJobs(t, 40, 8, []string{"prod", "research"})
	for i := range jobs {
		jobs[i].ArrivalS = 0 // all there when v100-0 fails
	}
	victims := map[*jobState]bool{}
	replaced := false
	o := Options{Nodes: nodes, Decider: dec, Engine: engine.Config{Policy: "cells", RoundS: 360}, Faults: sched}
	o.observe = func(s *simulator) {
		healthyOnly(t, s)
		for _, m := range s.running {
			if m.begin < failS && failS < m.finish && strings.HasPrefix(m.gpus[0], "v100-0:") {
				for _, js := range m.jobs {
					victims[js] = true
				}
			}
			if s.now >= failS && s.now < recoverS && m.begin >= failS {
				for _, js := range m.jobs {
					replaced = replaced || victims[js]
				}
			}
		}
	}
	res, err := Run(&SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.JobsDone != len(jobs) {
		t.Fatalf("finished %v, %d/%d done", res.Finished, res.JobsDone, len(jobs))
	}
	if res.GPUFailures != 8 || res.FaultInterruptions < 1 || len(victims) == 0 || !replaced {
		t.Errorf("%d failures, %d interruptions, %d victims, re-placed %v", res.GPUFailures, res.FaultInterruptions, len(victims), replaced)
	}

	bad, err := faults.Parse("bad.csv", strings.NewReader("time_s,kind,target\n100,node-fail,node:v100:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, dec = cellsSetup(t)
	_, err = Run(&SliceSource{Jobs: jobs}, Options{Nodes: nodes, Decider: dec, Engine: engine.Config{RoundS: 360}, Faults: bad})
	if err == nil || !strings.Contains(err.Error(), `bad.csv:2: target: "node:v100:0"`) {
		t.Errorf("plain-syntax target under VC mode: %v", err)
	}
}

// TestVCPacking: space sharing inside VCs (issue 13). Two quota-only VCs
// on one V100 type, heavily loaded, one packed; with Options.Pairs the
// packed VC's engine colocates its own jobs (some micro-task runs two jobs,
// both of that VC, never the other's) and its jobs finish sooner than
// under the same VC with max_min_fairness_perf, while the unpacked VC's
// jobs are unaffected (each VC is its own private cluster; rounds on the
// grid, so that VC a's micro-tasks do not move round ends).
func TestVCPacking(t *testing.T) {
	run := func(policy string) (map[string]float64, int) {
		dec, err := round.NewQuota([]round.QuotaVC{
			{Name: "a", Policy: policy, GPUs: map[string]int{"v100": 4}},
			{Name: "b", Policy: "max_min_fairness_perf", GPUs: map[string]int{"v100": 4}},
		}, rhcl.DefaultVCPolicy, 360, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var jobs []trace.Job
		for _, j := range vcJobs(t, 80, 1, []string{"a", "b"}) {
			j.Opportunistic = false
			jobs = append(jobs, j)
		}
		pairs := 0
		o := Options{Nodes: ServerNodes(map[string]int{"v100": 8}, 4), Decider: dec, Pairs: true, RoundGrid: true,
			Engine: engine.Config{Policy: "quota", RoundS: 360}}
		o.observe = func(s *simulator) {
			for _, m := range s.running {
				if len(m.jobs) == 2 {
					pairs++
					if m.jobs[0].tj.VC != "a" || m.jobs[1].tj.VC != "a" {
						t.Fatalf("pair of VCs %s and %s", m.jobs[0].tj.VC, m.jobs[1].tj.VC)
					}
				}
			}
		}
		res, err := Run(&SliceSource{Jobs: jobs}, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, v := range res.VCs {
			out[v.Name] = v.AvgJCTS
		}
		return out, pairs
	}
	packed, np := run("max_min_fairness_packed")
	perf, nq := run("max_min_fairness_perf")
	t.Logf("VC a avg JCT: packed %.0f s (%d paired micro-tasks), perf %.0f s; VC b %.0f / %.0f s", packed["a"], np, perf["a"], packed["b"], perf["b"])
	if np == 0 || nq != 0 {
		t.Fatalf("paired micro-tasks: packed %d, perf %d", np, nq)
	}
	if packed["a"] >= perf["a"] {
		t.Errorf("packing did not help VC a: %.0f s vs %.0f s", packed["a"], perf["a"])
	}
	if packed["b"] != perf["b"] {
		t.Errorf("VC b changed with VC a's policy: %.0f s vs %.0f s", packed["b"], perf["b"])
	}
}

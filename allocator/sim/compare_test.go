package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/philly"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// nodesSpec is nodes 8-GPU V100 nodes (GPU, pair, quad, node) and VCs with
// quotas in whole nodes: name, count, name, count, ...
func nodesSpec(nodes int, quotas ...any) cells.Spec {
	s := cells.Spec{Types: []cells.CellType{
		{Name: "gpu", GPUType: "v100"},
		{Name: "pair", Child: "gpu", Count: 2},
		{Name: "quad", Child: "pair", Count: 2},
		{Name: "node", Child: "quad", Count: 2, Node: true},
	}}
	for i := 0; i < nodes; i++ {
		s.Cells = append(s.Cells, cells.TopCell{Name: fmt.Sprintf("n%d", i), Type: "node"})
	}
	for i := 0; i+1 < len(quotas); i += 2 {
		s.VCs = append(s.VCs, cells.VC{Name: quotas[i].(string), Quota: []cells.Quota{{Type: "node", Count: quotas[i+1].(int)}}})
	}
	return s
}

// setups builds the comparison's systems from a spec of whole-node top
// cells, as the CLI does from a config: one node per top cell, named by
// it; the cells decider (round.Cells) and the quota-only one (round.Quota on
// round.CellShares), every VC under policy.
func setups(t *testing.T, spec cells.Spec, policy string) CompareOptions {
	t.Helper()
	shares, err := round.CellShares(spec)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(spec cells.Spec) (func() (Setup, error), func() (Setup, error)) {
		var nodes []Node
		var sels []round.Selector
		for _, c := range spec.Cells {
			nodes = append(nodes, Node{Name: c.Name, GPUs: map[string]int{"v100": 8}})
			sels = append(sels, round.Selector{Cell: c.Name, Nodes: []string{c.Name}})
		}
		var pols []string
		var qs []round.QuotaVC
		for _, v := range spec.VCs {
			pols = append(pols, policy)
			qs = append(qs, round.QuotaVC{Name: v.Name, Policy: policy, GPUs: shares[v.Name]})
		}
		cellsSetup := func() (Setup, error) {
			d, err := round.NewCells(round.CellsConfig{Spec: spec, Selectors: sels, Policies: pols, OppPolicy: rhcl.DefaultVCPolicy, RoundS: 360})
			return Setup{Nodes: nodes, Decider: d}, err
		}
		quotaSetup := func() (Setup, error) {
			d, err := round.NewQuota(qs, rhcl.DefaultVCPolicy, 360, false, nil)
			return Setup{Nodes: nodes, Decider: d}, err
		}
		return cellsSetup, quotaSetup
	}
	o := CompareOptions{Base: Options{Engine: engine.Config{RoundS: 360, Policy: "compare"}}}
	o.Cells, o.Quota = mk(spec)
	for _, v := range spec.VCs {
		ps := cells.Spec{Types: spec.Types, VCs: []cells.VC{v}}
		for _, q := range v.Quota {
			for range q.Count {
				ps.Cells = append(ps.Cells, cells.TopCell{Name: fmt.Sprintf("%s-p%d", v.Name, len(ps.Cells)), Type: q.Type})
			}
		}
		pc, pq := mk(ps)
		n := 0
		for _, g := range shares[v.Name] {
			n += g
		}
		o.VCs = append(o.VCs, CompareVC{Name: v.Name, QuotaGPUs: n, PrivateCells: pc, PrivateQuota: pq})
	}
	return o
}

func phillyJobs(t *testing.T, seed uint64, n int, tenants []philly.Tenant, gpus int, load float64) []trace.Job {
	t.Helper()
	d, err := philly.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := philly.Generate(d, philly.Options{Seed: seed, Jobs: n, ClusterGPUs: gpus, Load: load, Opportunistic: 0.2,
		MaxDurationS: 12 * 3600, WorkShares: true, Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	js, err := philly.SimJobs(tr, throughputs.Default(), "v100", []string{"v100"})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func compareVC(t *testing.T, r *CompareResult, name string) CompareVCResult {
	t.Helper()
	for _, v := range r.VCs {
		if v.VC == name {
			return v
		}
	}
	t.Fatalf("no vc %s", name)
	return CompareVCResult{}
}

// TestCompareSharingSafety: a seeded Philly trace (300 jobs at load 1.2, one VC
// of 1-2 GPU jobs beside one of 8-GPU gangs, 20% opportunistic) on four nodes:
// the three systems finish, and under cells every VC's guaranteed jobs
// start and finish exactly when they do on its private cluster (the VC's
// plans are its private cluster's: sharing safety), so no anomaly; the
// quota-only decider (round.Quota) holds each VC's share as a fixed set of
// GPUs, so its VCs see their private cluster too. Opportunistic work ran
// and was preempted for guaranteed work.
func TestCompareSharingSafety(t *testing.T) {
	spec := nodesSpec(4, "small", 3, "big", 1)
	jobs := phillyJobs(t, 3, 300, []philly.Tenant{{VC: "small", Share: 3, GPUs: []int{1, 2}}, {VC: "big", Share: 1, GPUs: []int{8}}}, 32, 1.2)
	r, err := Compare(jobs, setups(t, spec, "fifo"))
	if err != nil {
		t.Fatal(err)
	}
	if r.GPUs != 32 || r.Jobs != 300 {
		t.Fatalf("%d GPUs, %d jobs", r.GPUs, r.Jobs)
	}
	for _, v := range r.VCs {
		t.Logf("%s: private %+v cells %+v quota %+v", v.VC, v.PrivateCells, v.Cells, v.Quota)
		if v.Guaranteed == 0 {
			t.Errorf("%s: no guaranteed jobs", v.VC)
		}
		if v.CellsAnomalyJobs != 0 || v.CellsAnomaly || v.Cells != v.PrivateCells || v.CellsJCT != v.PrivateCellsJCT {
			t.Errorf("cells: %s differs from its private cluster: %+v", v.VC, v)
		}
		if v.QuotaAnomalyJobs != 0 || v.Quota != v.PrivateQuota || v.QuotaJCT != v.PrivateQuotaJCT {
			t.Errorf("quota-only: %s differs from its private cluster: %+v", v.VC, v)
		}
	}
	if big := compareVC(t, r, "big"); big.Cells.Max < 3600 {
		t.Errorf("big never waited an hour: the trace does not load its quota")
	}
	for name, s := range map[string]System{"cells": r.Cells, "quota": r.Quota} {
		if !(s.Utilization > 0.3 && s.Utilization <= 1) || !(s.OppShare > 0.05 && s.OppShare < 0.5) || s.Preemptions == 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

// TestHandScenario: on two nodes, B's 4-GPU job and A's eight 1-GPU jobs;
// B's 8-GPU gang arrives when its first job has ended. Under cells it
// starts at the first round on B's private node and shared alike. (The
// old event-driven quota baseline, which counted quotas over the whole
// cluster, made it wait 900 s for A's jobs scattered over both nodes;
// round.Quota holds B's share as B's GPUs, so it does not wait either.)
func TestHandScenario(t *testing.T) {
	tr := []trace.Job{{ID: 0, VC: "b", ArrivalS: 0, DurationS: 100, ScaleFactor: 4}}
	for i := 0; i < 8; i++ {
		tr = append(tr, trace.Job{ID: 1 + i, VC: "a", ArrivalS: float64(i / 4), DurationS: 1000, ScaleFactor: 1})
	}
	tr = append(tr, trace.Job{ID: 9, VC: "b", ArrivalS: 101, DurationS: 50, ScaleFactor: 8})
	tb := throughputs.Default()
	for i := range tr {
		keys := map[int]throughputs.Key{}
		for _, k := range tb.Keys("v100") {
			if _, ok := keys[k.ScaleFactor]; !ok {
				keys[k.ScaleFactor] = k
			}
		}
		k := keys[tr[i].ScaleFactor]
		v, _ := tb.Isolated(k, "v100")
		tr[i].Model, tr[i].TotalSteps, tr[i].Priority = k.Model, tr[i].DurationS*v, 1
	}
	r, err := Compare(tr, setups(t, nodesSpec(2, "a", 1, "b", 1), "fifo"))
	if err != nil {
		t.Fatal(err)
	}
	b := compareVC(t, r, "b")
	// Job 9 arrives at 101 and starts at the next round, 360: 259 s.
	if b.Cells.Max != 259 || b.Cells != b.PrivateCells || b.Quota != b.PrivateQuota {
		t.Errorf("b: %+v", b)
	}
	for _, v := range r.VCs {
		if v.CellsAnomalyJobs != 0 || v.QuotaAnomalyJobs != 0 {
			t.Errorf("%s: anomalies %+v", v.VC, v)
		}
	}
}

// TestRoundGridAndClassBusy: with RoundGrid every round starts on k × 360
// s, even after an idle stretch or a round whose jobs all finish early;
// the per-class busy time adds up to the run's utilization.
func TestRoundGridAndClassBusy(t *testing.T) {
	spec := nodesSpec(1, "a", 1)
	o := setups(t, spec, "fifo")
	su, err := o.Cells()
	if err != nil {
		t.Fatal(err)
	}
	jobs := phillyJobs(t, 1, 40, []philly.Tenant{{VC: "a", Share: 1}}, 8, 0.9)
	opt := o.Base
	opt.Nodes, opt.Decider, opt.RoundGrid, opt.BusyWindowS = su.Nodes, su.Decider, true, jobs[len(jobs)-1].ArrivalS
	off := 0
	opt.observe = func(s *simulator) {
		if len(s.running) > 0 && s.now != float64(int(s.now/360))*360 {
			off++
		}
	}
	r, err := Run(&SliceSource{Jobs: jobs}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if off != 0 || !r.Finished {
		t.Fatalf("%d rounds off the grid, finished %v", off, r.Finished)
	}
	b := r.ClassBusy
	total := b.Guaranteed + b.Opportunistic
	if want := r.Utilization * 8 * r.EndS; b == nil || total <= 0 || total-want > 1e-6*want || want-total > 1e-6*want ||
		b.GuaranteedWindow > b.Guaranteed || b.OpportunisticWindow > b.Opportunistic || b.Opportunistic == 0 {
		t.Fatalf("class busy %+v, run busy %g", b, want)
	}
}

func TestCompareErrorsSummaryMarkdown(t *testing.T) {
	spec := nodesSpec(4, "small", 3, "big", 1)
	o := setups(t, spec, "fifo")
	if _, err := Compare([]trace.Job{{ID: 0, VC: "zz", ScaleFactor: 1, TotalSteps: 1, Model: "x"}}, o); err == nil ||
		!strings.Contains(err.Error(), "unknown vc") {
		t.Errorf("unknown vc: %v", err)
	}
	// A guaranteed 16-GPU job never fits a one-node quota: an error, not
	// a result.
	big := phillyJobs(t, 1, 1, []philly.Tenant{{VC: "a", Share: 1, GPUs: []int{8}}}, 16, 0.9)
	big[0].ScaleFactor = 16
	if _, err := Compare(big, setups(t, nodesSpec(2, "a", 1), "fifo")); err == nil {
		t.Error("a job larger than its quota was accepted")
	} else {
		t.Log(err)
	}
	var rs []*CompareResult
	for _, seed := range []uint64{1, 2} {
		r, err := Compare(phillyJobs(t, seed, 120, []philly.Tenant{{VC: "small", Share: 3}, {VC: "big", Share: 1, GPUs: []int{8}}}, 32, 0.9), o)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	s, err := Summarize(rs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seeds != 2 || len(s.VCs) != 2 || s.VCs[0].Guaranteed != rs[0].VCs[0].Guaranteed+rs[1].VCs[0].Guaranteed {
		t.Fatalf("%+v", s)
	}
	if want := (rs[0].VCs[1].Quota.Avg + rs[1].VCs[1].Quota.Avg) / 2; s.VCs[1].Quota.Avg != want {
		t.Fatalf("mean %g, want %g", s.VCs[1].Quota.Avg, want)
	}
	if s.Cells.Preemptions != rs[0].Cells.Preemptions+rs[1].Cells.Preemptions {
		t.Fatalf("preemptions %+v", s.Cells)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| big | 8 |") || !strings.Contains(b.String(), "| cells |") {
		t.Fatal(b.String())
	}
}

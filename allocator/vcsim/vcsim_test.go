package vcsim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/philly"
)

// nodesSpec is nodes 8-GPU nodes (GPU, pair, quad, node) and VCs with
// quotas in whole nodes.
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

func vcByName(t *testing.T, r *Result, name string) VCResult {
	t.Helper()
	for _, v := range r.VCs {
		if v.VC == name {
			return v
		}
	}
	t.Fatalf("no vc %s", name)
	return VCResult{}
}

// TestHandScenario: on two nodes, B's 4-GPU job and A's eight 1-GPU jobs
// leave 4 free GPUs on each node when B's job ends; B's 8-GPU gang then
// waits for A under the quota baseline although B's quota is idle, and
// starts at once on B's private node and with cells.
func TestHandScenario(t *testing.T) {
	tr := []philly.Job{
		{ID: 0, VC: "b", ArrivalS: 0, DurationS: 100, GPUs: 4},
	}
	for i := 0; i < 4; i++ {
		tr = append(tr, philly.Job{ID: 1 + i, VC: "a", ArrivalS: 0, DurationS: 1000, GPUs: 1})
	}
	for i := 0; i < 4; i++ {
		tr = append(tr, philly.Job{ID: 5 + i, VC: "a", ArrivalS: 1, DurationS: 1000, GPUs: 1})
	}
	tr = append(tr, philly.Job{ID: 9, VC: "b", ArrivalS: 101, DurationS: 50, GPUs: 8})
	for _, ff := range []bool{false, true} {
		r, err := Compare(tr, Options{Spec: nodesSpec(2, "a", 1, "b", 1), FirstFit: ff, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		b := vcByName(t, r, "b")
		if b.QuotaAnomalyJobs != 1 || !b.QuotaAnomaly || b.Quota.Max < 899 {
			t.Errorf("first fit %v: quota baseline shows no anomaly for b: %+v", ff, b)
		}
		for _, v := range r.VCs {
			if v.CellsAnomalyJobs != 0 || v.CellsAnomaly || v.Cells != v.PrivateCells {
				t.Errorf("first fit %v: cells anomaly for %s: %+v", ff, v.VC, v)
			}
		}
		if b.Cells.Max != 0 {
			t.Errorf("cells: b waited %g s", b.Cells.Max)
		}
	}
}

// fragScenario is a seeded trace where one VC runs many small jobs and
// another only 8-GPU gangs.
func fragScenario(seed uint64) ([]philly.Job, cells.Spec) {
	d, _ := philly.Embedded()
	spec := nodesSpec(4, "small", 3, "big", 1)
	tr, err := philly.Generate(d, philly.Options{Seed: seed, Jobs: 1500, ClusterGPUs: 32, Load: 0.9, Opportunistic: 0.1,
		MaxDurationS: 24 * 3600, WorkShares: true,
		Tenants: []philly.Tenant{{VC: "small", Share: 3, GPUs: []int{1, 2}}, {VC: "big", Share: 1, GPUs: []int{8}}}})
	if err != nil {
		panic(err)
	}
	return tr, spec
}

func TestSeededFragmentationScenario(t *testing.T) {
	tr, spec := fragScenario(3)
	r, err := Compare(tr, Options{Spec: spec, Check: !testing.Short()})
	if err != nil {
		t.Fatal(err)
	}
	big := vcByName(t, r, "big")
	t.Logf("big: private %+v quota %+v (%d anomalous jobs), cells %+v", big.PrivateQuota, big.Quota, big.QuotaAnomalyJobs, big.Cells)
	if !big.QuotaAnomaly || big.QuotaAnomalyJobs == 0 {
		t.Errorf("quota baseline: no anomaly for big: %+v", big)
	}
	for _, v := range r.VCs {
		if v.CellsAnomaly || v.CellsAnomalyJobs != 0 || v.Cells != v.PrivateCells {
			t.Errorf("cells: anomaly for %s: %+v", v.VC, v)
		}
	}
	if r.Cells.OppShare <= 0 || r.Cells.Utilization <= 0 || r.Cells.Utilization > 1 || r.Quota.Utilization > 1 {
		t.Errorf("systems: %+v %+v", r.Cells, r.Quota)
	}
}

func TestQuotaPlacer(t *testing.T) {
	mk := func(id, vc, g int, opp bool) *job {
		return &job{Job: philly.Job{ID: id, GPUs: g, Opportunistic: opp}, vc: vc, members: members(g, 8)}
	}
	for _, ff := range []bool{false, true} {
		p := newQuotaPlacer([]int{8, 8, 8}, []int{8, 16}, ff)
		must := func(j *job, wantOK bool, wantVictims []int) {
			t.Helper()
			v, ok, err := p.place(j)
			if err != nil || ok != wantOK || fmt.Sprint(v) != fmt.Sprint(wantVictims) {
				t.Fatalf("first fit %v: job %d: ok %v victims %v err %v; want %v %v", ff, j.ID, ok, v, err, wantOK, wantVictims)
			}
		}
		must(mk(0, 0, 4, false), true, nil)  // machine 0
		must(mk(1, 0, 4, false), true, nil)  // best fit: 0 again; first fit: 0
		must(mk(2, 0, 1, false), false, nil) // vc 0 at quota
		must(mk(3, 1, 2, false), true, nil)  // machine 1
		must(mk(4, 1, 2, false), true, nil)  // best fit: machine 1 (6 free)
		must(mk(5, -1, 4, true), true, nil)  // opportunistic: machine 1 (4 free)
		must(mk(6, -1, 8, true), true, nil)  // machine 2
		// vc 1 (12 GPUs left) asks 8: no node has 8 free; machine 1 cannot
		// make room (guaranteed work), so the gang on machine 2 goes.
		must(mk(7, 1, 8, false), true, []int{6})
		if err := p.release(6); err == nil {
			t.Fatal("released a preempted job")
		}
		if err := p.release(0); err != nil {
			t.Fatal(err)
		}
		must(mk(8, 0, 4, false), true, nil)
		if got := fmt.Sprint(p.free, p.used); got != "[0 0 0] [8 12]" {
			t.Fatalf("first fit %v: free, used = %s", ff, got)
		}
	}
	// First fit vs best fit differ: machines 8 free, 2 free; a 2-GPU job.
	for _, tc := range []struct {
		ff   bool
		want string
	}{{false, "[8 0]"}, {true, "[6 2]"}} {
		p := newQuotaPlacer([]int{8, 2}, []int{10}, tc.ff)
		if _, ok, _ := p.place(mk(0, 0, 2, false)); !ok || fmt.Sprint(p.free) != tc.want {
			t.Errorf("first fit %v: free %v, want %s", tc.ff, p.free, tc.want)
		}
	}
}

// TestPreemptedKeepProgress: an opportunistic job preempted by a guaranteed
// one resumes with its remaining work; GPU time adds up to the trace's.
func TestPreemptedKeepProgress(t *testing.T) {
	tr := []philly.Job{
		{ID: 0, VC: "b", ArrivalS: 0, DurationS: 1000, GPUs: 8, Opportunistic: true},
		{ID: 1, VC: "a", ArrivalS: 100, DurationS: 500, GPUs: 8},
	}
	spec := nodesSpec(1, "a", 1, "b", 0)
	c, err := newCluster(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]placer{"quota": newQuotaPlacer(c.machines, c.quota, false), "cells": mustCells(t, spec)} {
		r, err := simulate(tr, c.vcIdx, 2, 8, 8, p)
		if err != nil {
			t.Fatal(err)
		}
		o := r.jobs[0]
		if r.preemptions != 1 || o.preempted != 1 || o.finish != 1500 || r.jobs[1].start != 100 {
			t.Errorf("%s: preemptions %d, opportunistic finish %g, guaranteed start %g", name, r.preemptions, o.finish, r.jobs[1].start)
		}
		if r.busy[0] != 8*500 || r.busy[1] != 8*1000 {
			t.Errorf("%s: busy %v", name, r.busy)
		}
	}
}

func mustCells(t *testing.T, spec cells.Spec) *cellsPlacer {
	t.Helper()
	p, err := newCellsPlacer(spec, true)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMembersAndErrors(t *testing.T) {
	if got := fmt.Sprint(members(4, 8), members(8, 8), members(20, 8)); got != "[4] [8] [8 8 4]" {
		t.Fatal(got)
	}
	spec := nodesSpec(2, "a", 1)
	spec.Cells[0].Bad = []string{"0/0/0"}
	if _, err := Compare([]philly.Job{{VC: "a", GPUs: 1, DurationS: 1}}, Options{Spec: spec}); err == nil {
		t.Error("bad cells accepted")
	}
	if _, err := Compare([]philly.Job{{VC: "zz", GPUs: 1, DurationS: 1}}, Options{Spec: nodesSpec(1, "a", 1)}); err == nil {
		t.Error("unknown vc accepted")
	}
	// A guaranteed 16-GPU job never fits a one-node quota.
	if _, err := Compare([]philly.Job{{VC: "a", GPUs: 16, DurationS: 1}}, Options{Spec: nodesSpec(2, "a", 1)}); err == nil {
		t.Error("job larger than its quota accepted")
	}
}

func TestSummarizeAndMarkdown(t *testing.T) {
	tr, spec := fragScenario(3)
	var rs []*Result
	for _, ff := range []bool{false, true} {
		r, err := Compare(tr[:400], Options{Spec: spec, FirstFit: ff})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	s, err := Summarize(rs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seeds != 2 || len(s.VCs) != 2 || s.VCs[0].Guaranteed != 2*rs[0].VCs[0].Guaranteed {
		t.Fatalf("%+v", s)
	}
	if want := (rs[0].VCs[1].Quota.Avg + rs[1].VCs[1].Quota.Avg) / 2; s.VCs[1].Quota.Avg != want {
		t.Fatalf("mean %g, want %g", s.VCs[1].Quota.Avg, want)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| big | 8 |") || !strings.Contains(b.String(), "| cells |") {
		t.Fatal(b.String())
	}
}

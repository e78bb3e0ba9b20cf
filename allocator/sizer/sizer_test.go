package sizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// cluster is n servers of g GPUs each (ids s<i>:<k>).
func cluster(n, g int) []engine.GPU {
	var out []engine.GPU
	for i := range n {
		for k := range g {
			out = append(out, engine.GPU{ID: fmt.Sprintf("s%d:%d", i, k), Type: "v100", Server: fmt.Sprintf("s%d", i)})
		}
	}
	return out
}

// twoRole is a DL2 job: 1..maxW workers of one GPU and 2 cores, 1..maxPS
// PSs of 2 cores, 10 epochs left of 10.
func twoRole(id string, maxW, maxPS int) engine.Job {
	return engine.Job{ID: id, ScaleFactor: 1, Model: "m", TotalSteps: 10, RemainingSteps: 10, ArrivalS: 0,
		Elastic: &engine.Elastic{StepGPUs: 1, MaxGPUs: maxW, WorkerCores: 2, Batch: 64,
			PS: &engine.PSGroup{Min: 1, Max: maxPS, Cores: 1.5}}}
}

func newMech(t *testing.T, sz dl2.Sizer, onSlot func([]dl2.Server, []string, *dl2.Slot)) *Mechanism {
	t.Helper()
	m, err := New(Options{Sizer: sz, CPUsPerServer: 16, OnSlot: onSlot})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func intentOf(p *engine.Plan, job string) engine.JobIntent {
	for _, in := range p.Intents {
		if in.Job == job {
			return in
		}
	}
	return engine.JobIntent{}
}

func assignmentOf(p *engine.Plan, job string) *engine.Assignment {
	for i := range p.Assignments {
		if slices.Contains(p.Assignments[i].Jobs, job) {
			return &p.Assignments[i]
		}
	}
	return nil
}

// checkPlan: no GPU twice, every GPU healthy and of the snapshot, each
// server's CPUs and GPUs within capacity, every job within its bounds.
func checkPlan(t *testing.T, s *engine.Snapshot, p *engine.Plan, cpus int) {
	t.Helper()
	srvOf := map[string]string{}
	for _, g := range s.GPUs {
		if !g.Failed {
			srvOf[g.ID] = g.Server
		}
	}
	jobs := map[string]*engine.Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	used := map[string]bool{}
	cpu := map[string]int{}
	for _, a := range p.Assignments {
		j := jobs[a.Jobs[0]]
		dj := JobOf(j, 0)
		for _, g := range a.GPUs {
			if used[g] || srvOf[g] == "" {
				t.Fatalf("GPU %s used twice or not healthy: %+v", g, a)
			}
			used[g] = true
		}
		step := dj.Demand.WorkerGPUs
		w := len(a.GPUs) / step
		if len(a.GPUs)%step != 0 || w < dj.Bounds.MinWorkers || w > dj.Bounds.MaxWorkers ||
			a.PS < dj.Bounds.MinPS || a.PS > dj.Bounds.MaxPS || len(a.PSServers) != a.PS {
			t.Fatalf("job %s outside its bounds %+v: %+v", j.ID, dj.Bounds, a)
		}
		for k := 0; k < len(a.GPUs); k += step {
			for _, g := range a.GPUs[k : k+step] {
				if srvOf[g] != srvOf[a.GPUs[k]] {
					t.Fatalf("job %s: a worker over two servers: %v", j.ID, a.GPUs)
				}
			}
			cpu[srvOf[a.GPUs[k]]] += dj.Demand.WorkerCPUs
		}
		for _, v := range a.PSServers {
			cpu[v] += dj.Demand.PSCPUs
		}
	}
	for v, c := range cpu {
		if c > cpus {
			t.Fatalf("server %s: %d CPUs of %d", v, c, cpus)
		}
	}
}

// TestSlotToPlan: two DL2 jobs under DRF on two 2-GPU servers share the
// GPUs (2 workers and 2 PSs each), admitted; the next round with the same
// jobs keeps every GPU; a third job's arrival shrinks the first two
// (resize, their first worker in place) and admits it.
func TestSlotToPlan(t *testing.T) {
	m := newMech(t, dl2.DRF{}, nil)
	s := &engine.Snapshot{GPUs: cluster(2, 2), Jobs: []engine.Job{twoRole("a", 4, 4), twoRole("b", 4, 4)}}
	p, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p, 16)
	for _, id := range []string{"a", "b"} {
		a := assignmentOf(p, id)
		if a == nil || len(a.GPUs) != 2 || a.PS != 2 || a.Action != engine.Start {
			t.Fatalf("job %s: %+v", id, a)
		}
		if in := intentOf(p, id); in.Intent != engine.IntentAdmit {
			t.Fatalf("job %s: %+v", id, in)
		}
	}
	s.Running, s.TimeS = p.Assignments, 1200
	for i := range s.Jobs {
		s.Jobs[i].Started = true
	}
	p2, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		a, b := assignmentOf(p, id), assignmentOf(p2, id)
		if !slices.Equal(a.GPUs, b.GPUs) || b.Action != engine.Keep || intentOf(p2, id).Intent != engine.IntentKeep {
			t.Fatalf("job %s not kept: %+v then %+v (%+v)", id, a, b, intentOf(p2, id))
		}
	}
	s.Running = p2.Assignments
	s.Jobs = append(s.Jobs, twoRole("c", 4, 4))
	p3, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p3, 16)
	if in := intentOf(p3, "c"); in.Intent != engine.IntentAdmit {
		t.Fatalf("c: %+v", in)
	}
	shrunk := 0
	for _, id := range []string{"a", "b"} {
		a, b := assignmentOf(p2, id), assignmentOf(p3, id)
		if b.GPUs[0] != a.GPUs[0] {
			t.Fatalf("job %s: first worker moved %v -> %v", id, a.GPUs, b.GPUs)
		}
		if len(b.GPUs) < len(a.GPUs) || b.PS < a.PS {
			shrunk++
			if in := intentOf(p3, id); in.Intent != engine.IntentResize {
				t.Fatalf("job %s shrunk %+v -> %+v: %+v", id, a, b, in)
			}
		}
	}
	if shrunk == 0 {
		t.Fatalf("nobody shrank for c: %+v", p3.Assignments)
	}
}

// TestSuspendAndFixed: a plain 2-GPU job is fixed (its 2 GPUs on one
// server, no PS) and comes first in arrival order; a DL2 job whose minimum no longer fits
// after a failure is suspended.
func TestSuspendAndFixed(t *testing.T) {
	m := newMech(t, dl2.FIFO{}, nil)
	fixed := engine.Job{ID: "f", ScaleFactor: 2, TotalSteps: 100, RemainingSteps: 100}
	s := &engine.Snapshot{GPUs: cluster(2, 2), Jobs: []engine.Job{fixed, twoRole("d", 4, 4)}}
	p, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p, 16)
	f, d := assignmentOf(p, "f"), assignmentOf(p, "d")
	if f == nil || len(f.GPUs) != 2 || len(f.Servers) != 1 || f.PS != 0 || d == nil || len(d.GPUs) != 2 || d.PS < 1 {
		t.Fatalf("fixed %+v (whole on one server), dl2 %+v", f, d)
	}
	// Every GPU but s0:0 fails: f (first in arrival order) needs 2 and
	// does not fit, d's minimum (one GPU) does.
	s.Running = p.Assignments
	for i := range s.GPUs {
		if s.GPUs[i].ID != "s0:0" {
			s.GPUs[i].Failed = true
		}
	}
	p2, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p2, 16)
	if a := assignmentOf(p2, "d"); a == nil || !slices.Equal(a.GPUs, []string{"s0:0"}) {
		t.Fatalf("d: %+v", a)
	}
	if !slices.Equal(p2.Suspend, []string{"f"}) || intentOf(p2, "f").Intent != engine.IntentSuspend {
		t.Fatalf("suspend %v, intents %+v", p2.Suspend, p2.Intents)
	}
}

// TestNodeCoresAndHistory: a node's cores bound its server's CPUs (5.9
// cores: 5; a worker of 2 and a PS of 1 take 3, a second pair does not
// fit); SlotsRun counts the slots a job ran in and survives a history
// round trip.
func TestNodeCoresAndHistory(t *testing.T) {
	var last *dl2.Slot
	var caps []dl2.Server
	m := newMech(t, dl2.DRF{}, func(sv []dl2.Server, _ []string, s *dl2.Slot) { caps, last = sv, s })
	j := twoRole("a", 4, 4)
	j.Elastic.PS.Cores = 1
	s := &engine.Snapshot{GPUs: cluster(1, 4), Jobs: []engine.Job{j}, Nodes: []engine.Node{{ID: "s0", Cores: 5.9, Ready: true}}}
	p, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p, 5)
	if caps[0] != (dl2.Server{GPUs: 4, CPUs: 5}) {
		t.Fatalf("server %+v", caps[0])
	}
	// 5 CPUs: (2+1) for the minimum, then +both (3 more) does not fit.
	if a := assignmentOf(p, "a"); len(a.GPUs) != 1 || a.PS != 1 {
		t.Fatalf("a: %+v", a)
	}
	for range 2 {
		s.Running = p.Assignments
		if p, err = m.Round(s); err != nil {
			t.Fatal(err)
		}
	}
	if last.Jobs[0].SlotsRun != 2 {
		t.Fatalf("third slot sees %d slots run", last.Jobs[0].SlotsRun)
	}
	h, err := m.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	m2 := newMech(t, dl2.FIFO{}, func(_ []dl2.Server, _ []string, s *dl2.Slot) { last = s })
	if err := m2.UnmarshalHistory(h); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Round(s); err != nil {
		t.Fatal(err)
	}
	if last.Jobs[0].SlotsRun != 3 {
		t.Fatalf("restored: %d slots run", last.Jobs[0].SlotsRun)
	}
	if err := m2.UnmarshalHistory([]byte(`{"kind":"vcnomad"}`)); err == nil {
		t.Fatal("another decider's history accepted")
	}
}

// overCommit sizes by writing the slot directly, past every bound.
type overCommit struct{}

func (overCommit) Name() string { return "bad" }
func (overCommit) Decide(s *dl2.Slot) {
	s.Alloc[0].Workers += 10
	s.Alloc[0].WorkerOn = append(s.Alloc[0].WorkerOn, make([]int, 10)...)
}

// TestCheckRefuses: a sizer that over-commits is an error, never a plan.
func TestCheckRefuses(t *testing.T) {
	m := newMech(t, overCommit{}, nil)
	p, err := m.Round(&engine.Snapshot{GPUs: cluster(1, 2), Jobs: []engine.Job{twoRole("a", 4, 4)}})
	if err == nil || p != nil || !strings.Contains(err.Error(), "sizer bad") {
		t.Fatalf("plan %+v, err %v", p, err)
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("no sizer accepted")
	}
}

// TestTwoGPUWorkers: 2-GPU workers land whole on one server each, and a
// kept job keeps whole workers only.
func TestTwoGPUWorkers(t *testing.T) {
	m := newMech(t, dl2.FIFO{}, nil)
	j := twoRole("a", 6, 3)
	j.ScaleFactor, j.Elastic.StepGPUs = 2, 2
	s := &engine.Snapshot{GPUs: cluster(3, 3), Jobs: []engine.Job{j}}
	p, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p, 16)
	if a := assignmentOf(p, "a"); len(a.GPUs) != 6 || len(a.Servers) != 3 {
		t.Fatalf("a: %+v", a)
	}
	s.Running = p.Assignments
	s.Jobs = append(s.Jobs, twoRole("b", 3, 3))
	p2, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s, p2, 16)
	if in := intentOf(p2, "a"); in.Intent != engine.IntentKeep || !slices.Equal(assignmentOf(p2, "a").GPUs, assignmentOf(p, "a").GPUs) {
		t.Fatalf("a: %+v", in)
	}
}

// TestStaysOnEqualServer: the slot places a lone job on the first of two
// equal servers; the job ran on the second last round, so its tasks are
// relabeled there and it is kept, not moved.
func TestStaysOnEqualServer(t *testing.T) {
	var ids []string
	var last *dl2.Slot
	m := newMech(t, dl2.FIFO{}, func(_ []dl2.Server, v []string, s *dl2.Slot) { ids, last = v, s })
	s := &engine.Snapshot{GPUs: cluster(2, 2), Jobs: []engine.Job{twoRole("a", 1, 1)},
		Running: []engine.Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"s1:1"}, Servers: []string{"s1"}, PS: 1, PSServers: []string{"s1"}}}}
	s.Jobs[0].Started = true
	p, err := m.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	a := assignmentOf(p, "a")
	if !slices.Equal(a.GPUs, []string{"s1:1"}) || a.Action != engine.Keep || intentOf(p, "a").Intent != engine.IntentKeep {
		t.Fatalf("a: %+v, %+v", a, intentOf(p, "a"))
	}
	if ids[last.Alloc[0].WorkerOn[0]] != "s1" || last.Free[1].GPUs != 1 || last.Free[0].GPUs != 2 {
		t.Fatalf("slot not relabeled: %+v, free %+v", last.Alloc[0], last.Free)
	}
}

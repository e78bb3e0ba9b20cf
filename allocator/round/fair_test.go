package round

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/fair"
)

// A gandiva_fair VC beside a LAS VC under quota-only shares: its
// mechanism (allocator/fair) schedules its users' jobs on its partition
// only, the plan names its users per VC, and its history round-trips
// beside the engine's (a VC whose mechanism changed refuses it).
func TestQuotaWithGandivaFairVC(t *testing.T) {
	mk := func() *Quota {
		m, err := fair.New(fair.Config{RoundS: 360, Tickets: map[string]int{"alice": 200, "bob": 100}})
		if err != nil {
			t.Fatal(err)
		}
		q, err := NewQuota([]QuotaVC{
			{Name: "lab", Policy: "gandiva_fair", GPUs: map[string]int{"v100": 2, "k80": 2}, Mechanism: m},
			{Name: "prod", Policy: "max_min_fairness_perf", GPUs: map[string]int{"v100": 2, "p100": 4, "k80": 2}},
		}, "", 360, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := mk()
	s := &engine.Snapshot{GPUs: cluster()}
	for i := 0; i < 6; i++ {
		j := qjob(fmt.Sprintf("l%d", i), "lab", 1, 0)
		j.User = []string{"alice", "bob"}[i%2]
		s.Jobs = append(s.Jobs, j, qjob(fmt.Sprintf("p%d", i), "prod", 1, 0))
	}
	var hist []byte
	for r := 0; r < 12; r++ {
		p, err := q.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]int{}
		for _, a := range p.Assignments {
			if strings.HasPrefix(a.Jobs[0], "l") {
				held[a.Type] += len(a.GPUs)
			}
		}
		if held["v100"] > 2 || held["k80"] > 2 || held["p100"] > 0 {
			t.Fatalf("round %d: the lab VC holds %v, beyond its share", r, held)
		}
		if len(p.Users) != 1 || p.Users[0].VC != "lab" || len(p.Users[0].Users) != 2 {
			t.Fatalf("round %d: plan users %+v", r, p.Users)
		}
		step(s, p)
		if r == 5 {
			var err error
			if hist, err = q.MarshalHistory(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !strings.Contains(string(hist), `"other":{"lab"`) {
		t.Fatalf("history lacks the lab VC's: %s", hist)
	}
	if err := mk().UnmarshalHistory(hist); err != nil {
		t.Fatalf("restore: %v", err)
	}
	// The lab VC now runs Gavel's engine: its fair history is refused.
	e, err := NewQuota([]QuotaVC{{Name: "lab", Policy: "fifo", GPUs: map[string]int{"v100": 2}}}, "", 360, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.UnmarshalHistory(hist); err == nil || !strings.Contains(err.Error(), "another mechanism") {
		t.Fatalf("engine took a fair VC's history: %v", err)
	}
}

// A gandiva_fair VC over cells: its mechanism runs on the VC's cells only
// (alice 200 tickets, bob 100 on research's one 2-GPU node: 2:1 over the
// rounds), beside a LAS VC, and the plan names its users.
func TestCellsWithGandivaFairVC(t *testing.T) {
	m, err := fair.New(fair.Config{RoundS: 10, Tickets: map[string]int{"alice": 200, "bob": 100}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{"gandiva_fair", "max_min_fairness_perf"}, RoundS: 10, Mechanisms: []Mechanism{m, nil}})
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	cls := map[string]class{}
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("r%d", i)
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			TotalSteps: 1e9, RemainingSteps: 1e9, User: []string{"alice", "bob"}[i%2], ReceivedS: map[string]float64{}})
		cls[id] = class{vc: "research"}
	}
	s.Jobs = append(s.Jobs, engine.Job{ID: "p0", ScaleFactor: 1, Throughput: map[string]float64{"v100": 1}, Weight: 1,
		TotalSteps: 1e9, RemainingSteps: 1e9, ReceivedS: map[string]float64{}})
	cls["p0"] = class{vc: "prod"}
	setClasses(s, cls, "node-a", "node-b")
	got := map[string]float64{}
	for r := 0; r < 60; r++ {
		p, err := d.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Users) != 1 || p.Users[0].VC != "research" {
			t.Fatalf("round %d: users %+v", r, p.Users)
		}
		for _, a := range p.Assignments {
			for i := range s.Jobs {
				if j := &s.Jobs[i]; j.ID == a.Jobs[0] {
					if j.VC == "research" && a.Servers[0] != "id-node-a" {
						t.Fatalf("round %d: %s outside research's cell: %+v", r, j.ID, a)
					}
					got[j.User] += float64(len(a.GPUs))
					j.ReceivedS = map[string]float64{"v100": j.ReceivedS["v100"] + 10}
				}
			}
		}
		s.TimeS, s.Running = s.TimeS+10, p.Assignments
	}
	if r := got["alice"] / got["bob"]; r < 1.8 || r > 2.2 {
		t.Errorf("alice/bob GPU rounds %.0f/%.0f = %.2f, want 2 within 10%%", got["alice"], got["bob"], r)
	}
}

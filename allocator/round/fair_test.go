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

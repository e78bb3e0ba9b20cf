package round

import (
	"fmt"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// TestQuotasExplain: the VC deciders tell their VCs' quotas (a quota
// VC's share, a cells VC's virtual GPUs), and with them a job whose VC's
// share is full is over quota, one larger than its VC's share
// unschedulable.
func TestQuotasExplain(t *testing.T) {
	q, err := NewQuota([]QuotaVC{{Name: "a", GPUs: map[string]int{"v100": 2}}, {Name: "b", GPUs: map[string]int{"v100": 2}}},
		"", 360, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(q.Quotas()); got != "map[a:map[v100:2] b:map[v100:2]]" {
		t.Errorf("quota VCs: %s", got)
	}
	c, err := NewCells(CellsConfig{Spec: spec(), NodeOfCell: map[string]string{"a": "node-a", "b": "node-b"},
		Policies: []string{"max_min_fairness_perf", "max_min_fairness_perf"}, RoundS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Quotas()); got != "map[prod:map[v100:2] research:map[v100:2]]" {
		t.Errorf("cell VCs: %s", got)
	}
	s := &engine.Snapshot{GPUs: twoNodes()}
	for i, vc := range []string{"a", "a", "a", "b"} {
		s.Jobs = append(s.Jobs, engine.Job{ID: fmt.Sprintf("%s%d", vc, i), VC: vc, ScaleFactor: 1, Weight: 1,
			Throughput: map[string]float64{"v100": 1}, TotalSteps: 100, RemainingSteps: 100})
	}
	s.Jobs = append(s.Jobs, engine.Job{ID: "big", VC: "b", ScaleFactor: 3, Weight: 1,
		Throughput: map[string]float64{"v100": 1}, TotalSteps: 100, RemainingSteps: 100})
	p, err := q.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	engine.ExplainQuotas(s, p, q.Quotas())
	why := map[string]engine.Reason{}
	for _, w := range p.Waiting {
		why[w.Job] = w.Reason
	}
	if len(why) != 2 || why["a2"].Kind != engine.OverQuota || why["big"].Kind != engine.Unschedulable || why["big"].VC != "b" {
		t.Fatalf("waiting: %+v", p.Waiting)
	}
	if got := why["a2"].String(); got != "over quota: VC a uses all of its share of v100" {
		t.Errorf("a2: %s", got)
	}
	if got := why["big"].String(); got != "unschedulable: a gang of 3 GPUs, the most its VC b can ever hold is 2 (v100)" {
		t.Errorf("big: %s", got)
	}
}

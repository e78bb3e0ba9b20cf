package engine

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
)

// The problem's pairs are the snapshot's pairs of runnable jobs, in order,
// each with the cluster's types exactly (missing ones zero), also when many
// pairs share one throughput map (narrowed once per call) or a first job.
func TestProblemPairsSharedMaps(t *testing.T) {
	yes := true
	e, err := New(Config{Policy: "p_packed", Packing: &yes, Solve: zeroSolve})
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{}
	for _, ty := range []string{"k80", "v100"} {
		for i := range 2 {
			s.GPUs = append(s.GPUs, GPU{ID: fmt.Sprintf("%s-%d", ty, i), Type: ty, Server: fmt.Sprintf("%s-s%d", ty, i)})
		}
	}
	for i := range 6 {
		tp := map[string]float64{"v100": 2, "k80": 1}
		if i == 3 {
			tp = map[string]float64{"h100": 5} // cannot run in this cluster
		}
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprint(i), ScaleFactor: 1, Throughput: tp, TotalSteps: 1, RemainingSteps: 1})
	}
	exact := map[string][2]float64{"v100": {1, 1.5}, "k80": {0.5, 0.6}}
	extra := map[string][2]float64{"v100": {1.2, 1}, "h100": {3, 3}}
	for a := range 6 {
		for b := a + 1; b < 6; b++ {
			tp := exact
			if (a+b)%2 == 1 {
				tp = extra
			}
			s.Pairs = append(s.Pairs, Pair{Jobs: [2]string{fmt.Sprint(a), fmt.Sprint(b)}, Throughput: tp})
		}
	}
	p := e.problem(s)
	var want []string
	for _, pr := range s.Pairs {
		if pr.Jobs[0] != "3" && pr.Jobs[1] != "3" {
			want = append(want, fmt.Sprint(pr.Jobs))
		}
	}
	var got []string
	for _, pr := range p.Pairs {
		got = append(got, fmt.Sprint(pr.Jobs))
		src := exact
		if a, b := pr.Jobs[0][0]-'0', pr.Jobs[1][0]-'0'; (a+b)%2 == 1 {
			src = extra
		}
		wantTp := map[string][2]float64{"v100": src["v100"], "k80": src["k80"]}
		if !maps.Equal(pr.Throughput, wantTp) {
			t.Errorf("pair %v: throughput %v, want %v", pr.Jobs, pr.Throughput, wantTp)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

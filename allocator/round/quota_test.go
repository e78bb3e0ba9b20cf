package round

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// cluster: 2 servers of each type, 2 GPUs each.
func cluster() []engine.GPU {
	var gs []engine.GPU
	for _, t := range []string{"v100", "p100", "k80"} {
		for i := 0; i < 4; i++ {
			gs = append(gs, engine.GPU{ID: fmt.Sprintf("%s-%d", t, i), Type: t, Server: fmt.Sprintf("%s-s%d", t, i/2)})
		}
	}
	return gs
}

func qjob(id, vc string, sf int, arrival float64) engine.Job {
	return engine.Job{ID: id, VC: vc, ScaleFactor: sf, Weight: 1, ArrivalS: arrival, TotalSteps: 1e9, RemainingSteps: 1e9,
		Throughput: map[string]float64{"v100": 4, "p100": 2, "k80": 1}, ReceivedS: map[string]float64{}}
}

// step credits a plan as a backend would (each running unit its round on
// its type) and puts it in force.
func step(s *engine.Snapshot, p *engine.Plan) {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		for _, a := range p.Assignments {
			if len(a.Jobs) == 1 && a.Jobs[0] == j.ID {
				r := map[string]float64{}
				for k, v := range j.ReceivedS {
					r[k] = v
				}
				r[a.Type] += 360
				j.ReceivedS, j.Started = r, true
			}
		}
	}
	s.TimeS += 360
	s.Running = p.Assignments
}

// TestQuotaIsAPrivateCluster: each VC's jobs run only on its share, and
// its plans are exactly those its policy makes alone on a private cluster
// of the same GPUs (sharing safety), whatever the other VC and the
// opportunistic jobs do. Different policies per VC take effect.
func TestQuotaIsAPrivateCluster(t *testing.T) {
	vcs := []QuotaVC{{Name: "a", Policy: "fifo_perf", GPUs: map[string]int{"v100": 2, "k80": 1}},
		{Name: "b", Policy: "max_min_fairness_perf", GPUs: map[string]int{"v100": 2, "p100": 3, "k80": 2}}}
	var warned []string
	q, err := NewQuota(vcs, "max_min_fairness_perf", 360, false, func(msg string, _ ...any) { warned = append(warned, msg) })
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: cluster()}
	for i := 0; i < 4; i++ {
		s.Jobs = append(s.Jobs, qjob(fmt.Sprintf("a%d", i), "a", 1, float64(i)))
		s.Jobs = append(s.Jobs, qjob(fmt.Sprintf("b%d", i), "b", 1+i%2, float64(i)))
	}
	o := qjob("o0", "a", 1, 0)
	o.Class = engine.Opportunistic
	s.Jobs = append(s.Jobs, o, qjob("x0", "nowhere", 1, 0), qjob("a-big", "a", 4, 9))

	var private [2]*engine.Engine
	var privSnap [2]*engine.Snapshot
	for r := 0; r < 12; r++ {
		p, err := q.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]map[string]int{"a": {}, "b": {}}
		onGPU := map[string]string{}
		for _, a := range p.Assignments {
			for _, g := range a.GPUs {
				if prev, dup := onGPU[g]; dup {
					t.Fatalf("round %d: %s holds %s and %s", r, g, prev, a.Jobs[0])
				}
				onGPU[g] = a.Jobs[0]
			}
			if a.Jobs[0] == "x0" {
				t.Fatalf("a job of an undeclared VC ran")
			}
			if vc := a.Jobs[0][:1]; vc != "o" {
				held[vc][a.Type] += len(a.GPUs)
			}
		}
		for v, h := range held {
			for typ, n := range h {
				if share := vcs[q.vcIdx[v]].GPUs[typ]; n > share {
					t.Errorf("round %d: vc %s holds %d %s, share %d", r, v, n, typ, share)
				}
			}
		}
		// The private clusters: each VC's partition as its whole cluster
		// (the partition is fixed from the first round on: sticky).
		for v := range vcs {
			var gpus []engine.GPU
			for _, g := range s.GPUs {
				if q.part[v][g.ID] {
					gpus = append(gpus, g)
				}
			}
			if r == 0 {
				if private[v], err = engine.New(engine.Config{Policy: vcs[v].Policy, RoundS: 360}); err != nil {
					t.Fatal(err)
				}
				privSnap[v] = &engine.Snapshot{GPUs: gpus}
				for _, j := range s.Jobs {
					if j.VC == vcs[v].Name && j.Class != engine.Opportunistic {
						privSnap[v].Jobs = append(privSnap[v].Jobs, j)
					}
				}
			} else if !slices.Equal(gpus, privSnap[v].GPUs) {
				t.Fatalf("round %d: vc %s's partition moved: %v", r, vcs[v].Name, gpus)
			}
			pp, err := private[v].Round(privSnap[v])
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, a := range pp.Assignments {
				want = append(want, fmt.Sprint(a.Jobs, a.Type, a.GPUs))
			}
			for _, a := range p.Assignments {
				if strings.HasPrefix(a.Jobs[0], vcs[v].Name) {
					got = append(got, fmt.Sprint(a.Jobs, a.Type, a.GPUs))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: vc %s runs %v, alone it would run %v", r, vcs[v].Name, got, want)
			}
			step(privSnap[v], pp)
		}
		step(s, p)
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "not declared") || !strings.Contains(warned[1], "never run") {
		t.Errorf("warnings %v", warned)
	}
	// FIFO in a: its first job never stops, whatever LAS does in b.
	if got := s.Jobs[0].ReceivedS; got["v100"] != 12*360 {
		t.Errorf("a0 under FIFO received %v, want all 12 rounds on v100", got)
	}
}

// TestQuotaOpportunistic: an opportunistic job runs on a VC's idle share
// and is preempted, with that reason, when the VC's own job arrives.
func TestQuotaOpportunistic(t *testing.T) {
	q, err := NewQuota([]QuotaVC{{Name: "a", GPUs: map[string]int{"v100": 4}}}, "max_min_fairness_perf", 360, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpus := cluster()[:4] // the v100s
	o := qjob("o0", "a", 4, 0)
	o.Class = engine.Opportunistic
	s := &engine.Snapshot{GPUs: gpus, Jobs: []engine.Job{o}}
	p, err := q.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Assignments) != 1 || p.Intents[0].Intent != engine.IntentAdmit || p.Intents[0].Class != engine.Opportunistic {
		t.Fatalf("idle share not lent: %+v", p)
	}
	step(s, p)
	s.Jobs = append(s.Jobs, qjob("a0", "a", 2, 360))
	p, err = q.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	var pre *engine.JobIntent
	for i := range p.Intents {
		if p.Intents[i].Job == "o0" {
			pre = &p.Intents[i]
		}
	}
	if pre == nil || pre.Intent != engine.IntentPreempt || pre.Reason.String() != "guaranteed work needs its GPUs" {
		t.Fatalf("opportunistic job not preempted for the VC: %+v", p.Intents)
	}
	if len(p.Assignments) != 1 || p.Assignments[0].Jobs[0] != "a0" {
		t.Fatalf("the VC's job does not run: %+v", p.Assignments)
	}
}

// TestQuotaFailures: a failed GPU leaves its VC's partition; the share is
// refilled from free healthy GPUs of the type, and a warning says when
// none are left.
func TestQuotaFailures(t *testing.T) {
	var warned []string
	q, err := NewQuota([]QuotaVC{{Name: "a", GPUs: map[string]int{"k80": 2}}, {Name: "b", GPUs: map[string]int{"k80": 2}}}, "", 360, false,
		func(msg string, _ ...any) { warned = append(warned, msg) })
	if err != nil {
		t.Fatal(err)
	}
	s := &engine.Snapshot{GPUs: cluster()[8:], Jobs: []engine.Job{qjob("a0", "a", 2, 0), qjob("b0", "b", 2, 0)}}
	p, err := q.Round(s)
	if err != nil || len(p.Assignments) != 2 {
		t.Fatal(p, err)
	}
	step(s, p)
	s.GPUs = slices.Clone(s.GPUs)
	bad := p.Assignments[0].GPUs[0]
	for i := range s.GPUs {
		if s.GPUs[i].ID == bad {
			s.GPUs[i].Failed = true
		}
	}
	p, err = q.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	var hit *engine.JobIntent
	for i := range p.Intents {
		if p.Intents[i].Job == "a0" {
			hit = &p.Intents[i]
		}
	}
	if hit == nil || hit.Intent != engine.IntentSuspend || !strings.Contains(hit.Reason.String(), "failed") {
		t.Errorf("job on the failed GPU: %+v", p.Intents)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "share") {
		t.Errorf("warnings %v", warned)
	}
}

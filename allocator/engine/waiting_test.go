package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/policies"
)

// gpus makes n GPUs of typ, per to a server (servers named typ-s0, ...).
func waitGPUs(typ string, n, per int) []GPU {
	var out []GPU
	for i := range n {
		out = append(out, GPU{ID: fmt.Sprintf("%s-%d", typ, i), Type: typ, Server: fmt.Sprintf("%s-s%d", typ, i/per)})
	}
	return out
}

func waitJob(id string, sf int, vc string, tput map[string]float64) Job {
	return Job{ID: id, ScaleFactor: sf, VC: vc, Throughput: tput, Weight: 1, TotalSteps: 100, RemainingSteps: 100}
}

var v100 = map[string]float64{"v100": 1}

func TestExplainReasons(t *testing.T) {
	alloc := &policies.Allocation{Types: []string{"v100"}, JobIDs: []string{"a", "b", "c", "w"},
		X: [][]float64{{0.5}, {0.5}, {0.5}, {0.4}}}
	received := func(j Job, r float64) Job { j.ReceivedS = map[string]float64{"v100": r}; return j }
	for _, tc := range []struct {
		name   string
		s      Snapshot
		p      Plan
		q      Quotas
		want   Reason // Kind and the fields the test names
		text   string // a part of the reason's text
		pos    int
		prio   float64
		absent bool // the job is not waiting
	}{{
		name: "unschedulable: larger than any type",
		s: Snapshot{GPUs: append(waitGPUs("v100", 4, 4), waitGPUs("k80", 8, 4)...),
			Jobs: []Job{waitJob("w", 12, "", map[string]float64{"v100": 1, "k80": 1})}},
		want: Reason{Kind: Unschedulable, Need: 12, Free: 8, To: "k80"},
		text: "unschedulable: a gang of 12 GPUs, the most it can ever hold is 8 (k80)",
	}, {
		name: "unschedulable: failed GPUs are not counted, nor types it cannot use",
		s: Snapshot{GPUs: append(append(waitGPUs("v100", 4, 4), GPU{ID: "v100-9", Type: "v100", Server: "x", Failed: true}),
			waitGPUs("k80", 8, 8)...), Jobs: []Job{waitJob("w", 5, "", v100)}},
		want: Reason{Kind: Unschedulable, Need: 5, Free: 4, To: "v100"},
	}, {
		name: "unschedulable: no type it can run on",
		s:    Snapshot{GPUs: waitGPUs("k80", 4, 4), Jobs: []Job{waitJob("w", 1, "", v100)}},
		want: Reason{Kind: Unschedulable, Need: 1},
		text: "no GPU type it can run on",
	}, {
		name: "unschedulable: its VC's quota bounds it",
		s:    Snapshot{GPUs: waitGPUs("v100", 16, 8), Jobs: []Job{waitJob("w", 12, "research", v100)}},
		q:    Quotas{"research": {"v100": 8}},
		want: Reason{Kind: Unschedulable, Need: 12, Free: 8, To: "v100", VC: "research"},
		text: "the most its VC research can ever hold is 8",
	}, {
		name: "over quota: its VC's jobs hold its share",
		s: Snapshot{GPUs: append(waitGPUs("v100", 8, 4), waitGPUs("k80", 8, 4)...),
			Jobs: []Job{waitJob("a", 2, "research", v100), waitJob("b", 2, "research", map[string]float64{"k80": 1}),
				waitJob("w", 2, "research", map[string]float64{"v100": 1, "k80": 1})}},
		p: Plan{Assignments: []Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0", "v100-1"}, Priority: 2},
			{Jobs: []string{"b"}, Type: "k80", GPUs: []string{"k80-0", "k80-1"}, Priority: 2}}},
		q:    Quotas{"research": {"v100": 2, "k80": 3}},
		want: Reason{Kind: OverQuota, Need: 2, VC: "research", To: "k80, v100"},
		text: "over quota: a gang of 2 GPUs does not fit in what VC research has left of its share of k80, v100",
		pos:  1,
	}, {
		name: "not over quota while its share has room: lower priority",
		s: Snapshot{GPUs: waitGPUs("v100", 2, 2),
			Jobs: []Job{waitJob("a", 2, "dev", v100), waitJob("w", 1, "research", v100)}},
		p:    Plan{Assignments: []Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0", "v100-1"}, Priority: 2}}},
		q:    Quotas{"research": {"v100": 2}, "dev": {"v100": 2}},
		want: Reason{Kind: LowerPriority, Than: "a", ThanPriority: 2, To: "v100"},
		pos:  1,
	}, {
		name: "gang: enough free GPUs but not on one server",
		s: Snapshot{GPUs: waitGPUs("v100", 8, 4),
			Jobs: []Job{waitJob("a", 2, "", v100), waitJob("b", 2, "", v100), waitJob("w", 4, "", v100)}},
		p: Plan{Assignments: []Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0", "v100-1"}, Priority: 3},
			{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"v100-4", "v100-5"}, Priority: 3}}},
		want: Reason{Kind: WaitsForGang, Need: 4, Free: 2, To: "v100"},
		text: "waits for a gang of 4 GPUs on one server: at most 2 free together on v100",
		pos:  1,
	}, {
		name: "gang: it outranks the jobs that took the GPUs",
		s: Snapshot{GPUs: waitGPUs("v100", 3, 4),
			Jobs: []Job{received(waitJob("a", 1, "", v100), 100), received(waitJob("b", 1, "", v100), 100),
				received(waitJob("c", 1, "", v100), 100), received(waitJob("w", 2, "", v100), 100)}},
		p: Plan{Allocation: alloc, Assignments: []Assignment{
			{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0"}, Priority: 2},
			{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"v100-1"}, Priority: 2},
			{Jobs: []string{"c"}, Type: "v100", GPUs: []string{"v100-2"}, Priority: 0.5}}},
		want: Reason{Kind: WaitsForGang, Need: 2, Free: 0, To: "v100"},
		pos:  1, prio: 1.6, // 0.4 / (100/400)
	}, {
		name: "lower priority: the lowest-priority job running where it could",
		s: Snapshot{GPUs: waitGPUs("v100", 2, 4),
			Jobs: []Job{received(waitJob("a", 1, "", v100), 100), received(waitJob("b", 1, "", v100), 100),
				received(waitJob("w", 2, "", v100), 200)}},
		p: Plan{Allocation: alloc, Assignments: []Assignment{
			{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0"}, Priority: 2},
			{Jobs: []string{"b"}, Type: "v100", GPUs: []string{"v100-1"}, Priority: 1.3}}},
		want: Reason{Kind: LowerPriority, Than: "b", ThanPriority: 1.3, To: "v100"},
		text: "lower priority than b (priority 0.8 vs 1.3)",
		pos:  1, prio: 0.8, // 0.4 / (200/400)
	}, {
		name: "never ran: the engine's first-rank priority",
		s: Snapshot{GPUs: waitGPUs("v100", 1, 1),
			Jobs: []Job{received(waitJob("a", 1, "", v100), 100), waitJob("w", 1, "", v100)}},
		p: Plan{Allocation: alloc, Assignments: []Assignment{
			{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0"}, Priority: 5e8}}},
		want: Reason{Kind: LowerPriority, Than: "a", ThanPriority: 5e8, To: "v100"},
		pos:  1, prio: 4e8,
	}, {
		name: "reserved: the reservation's reason",
		s:    Snapshot{GPUs: waitGPUs("v100", 4, 4), Jobs: []Job{waitJob("a", 4, "", v100), waitJob("w", 4, "", v100)}},
		p: Plan{Assignments: []Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"v100-0", "v100-1", "v100-2", "v100-3"}}},
			Reservations: []Reservation{{Job: "w", Type: "v100", GPUs: []string{"v100-0", "v100-1", "v100-2", "v100-3"}, StartS: 600}}},
		want: Reason{Kind: Reserved, To: "v100", Until: 600},
		text: "reserved for it from t=600s",
		pos:  1,
	}, {
		name:   "a suspended job is the plan's, not waiting",
		s:      Snapshot{GPUs: waitGPUs("v100", 1, 1), Jobs: []Job{waitJob("w", 1, "", v100)}},
		p:      Plan{Suspend: []string{"w"}},
		absent: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			ExplainQuotas(&tc.s, &p, tc.q)
			var got *Waiting
			for i := range p.Waiting {
				if p.Waiting[i].Job == "w" {
					got = &p.Waiting[i]
				}
			}
			if tc.absent {
				if got != nil {
					t.Fatalf("w waits: %+v", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("w not waiting: %+v", p.Waiting)
			}
			r := got.Reason
			w := tc.want
			if r.Kind != w.Kind || r.Need != w.Need || r.Free != w.Free || r.To != w.To || r.VC != w.VC ||
				r.Than != w.Than || r.ThanPriority != w.ThanPriority || r.Until != w.Until {
				t.Errorf("reason %+v, want %+v", r, w)
			}
			if tc.text != "" && !strings.Contains(r.String(), tc.text) {
				t.Errorf("text %q, want it to contain %q", r.String(), tc.text)
			}
			if got.Position != tc.pos {
				t.Errorf("position %d, want %d", got.Position, tc.pos)
			}
			if d := got.Priority - tc.prio; d > 1e-9*max(1, tc.prio) || d < -1e-9*max(1, tc.prio) {
				t.Errorf("priority %v, want %v", got.Priority, tc.prio)
			}
		})
	}
}

// TestExplainPositions: per VC (and opportunistic jobs apart), by priority
// then arrival; unschedulable jobs get none; running jobs are not waiting.
func TestExplainPositions(t *testing.T) {
	s := &Snapshot{GPUs: waitGPUs("v100", 1, 1), Jobs: []Job{
		waitJob("run", 1, "a", v100),
		waitJob("a1", 1, "a", v100), waitJob("a2", 1, "a", v100), waitJob("a3", 1, "a", v100),
		waitJob("big", 2, "a", v100),
		waitJob("b1", 1, "b", v100),
		{ID: "o1", ScaleFactor: 1, VC: "a", Class: Opportunistic, Throughput: v100},
	}}
	for i := range s.Jobs {
		s.Jobs[i].ReceivedS = map[string]float64{"v100": 100}
	}
	s.Jobs[2].ReceivedS["v100"] = 50 // a2: less received, higher priority
	al := &policies.Allocation{Types: []string{"v100"}, JobIDs: []string{"run", "a1", "a2", "a3", "big", "b1", "o1"},
		X: [][]float64{{1}, {1}, {1}, {1}, {1}, {1}, {1}}}
	p := &Plan{Allocation: al, Assignments: []Assignment{{Jobs: []string{"run"}, Type: "v100", GPUs: []string{"v100-0"}, Priority: 9}}}
	Explain(s, p)
	got := map[string]int{}
	for _, w := range p.Waiting {
		got[w.Job] = w.Position
	}
	want := map[string]int{"a2": 1, "a1": 2, "a3": 3, "big": 0, "b1": 1, "o1": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("positions %v, want %v", got, want)
	}
	// Deterministic: the same again.
	again := &Plan{Allocation: al, Assignments: p.Assignments}
	Explain(s, again)
	if fmt.Sprint(again.Waiting) != fmt.Sprint(p.Waiting) {
		t.Errorf("not deterministic:\n%v\n%v", again.Waiting, p.Waiting)
	}
}

// TestExplainEngineRound: on a real round, every active job is in exactly
// one of the assignments, the suspensions and the waiting list; a gang
// behind single jobs is told by the gang or the priority reason.
func TestExplainEngineRound(t *testing.T) {
	e, err := New(Config{Policy: "max_min_fairness_perf"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{GPUs: waitGPUs("v100", 2, 2)}
	for i := range 3 {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("one-%d", i), ScaleFactor: 1, Weight: 1, TotalSteps: 1e6,
			RemainingSteps: 1e6, Throughput: v100, ArrivalS: float64(i)})
	}
	s.Jobs = append(s.Jobs, Job{ID: "gang", ScaleFactor: 2, Weight: 1, TotalSteps: 1e6, RemainingSteps: 1e6,
		Throughput: map[string]float64{"v100": 2}, ArrivalS: 3}, Job{ID: "huge", ScaleFactor: 3, Weight: 1,
		TotalSteps: 1e6, RemainingSteps: 1e6, Throughput: map[string]float64{"v100": 3}, ArrivalS: 4})
	p, err := e.Round(s)
	if err != nil {
		t.Fatal(err)
	}
	Explain(s, p)
	seen := map[string]int{}
	for _, a := range p.Assignments {
		for _, j := range a.Jobs {
			seen[j]++
		}
	}
	for _, j := range p.Suspend {
		seen[j]++
	}
	kinds := map[string]ReasonKind{}
	for _, w := range p.Waiting {
		seen[w.Job]++
		kinds[w.Job] = w.Reason.Kind
		if w.Reason.String() == "" {
			t.Errorf("%s: no text for %+v", w.Job, w.Reason)
		}
	}
	for _, j := range s.Jobs {
		if seen[j.ID] != 1 {
			t.Errorf("%s seen %d times", j.ID, seen[j.ID])
		}
	}
	if kinds["huge"] != Unschedulable {
		t.Errorf("huge: %v", kinds["huge"])
	}
	if k, ok := kinds["gang"]; ok && k != WaitsForGang && k != LowerPriority {
		t.Errorf("gang: %v", k)
	}
}

func BenchmarkExplain(b *testing.B) {
	s := &Snapshot{}
	types := []string{"v100", "p100", "k80"}
	for _, t := range types {
		s.GPUs = append(s.GPUs, waitGPUs(t, 36, 4)...)
	}
	al := &policies.Allocation{Types: types}
	for i := range 2000 {
		id := fmt.Sprintf("j%d", i)
		s.Jobs = append(s.Jobs, Job{ID: id, ScaleFactor: 1 << (i % 3), Throughput: map[string]float64{"v100": 3, "p100": 2, "k80": 1},
			ReceivedS: map[string]float64{"v100": float64(i)}})
		al.JobIDs = append(al.JobIDs, id)
		al.X = append(al.X, []float64{0.01, 0.01, 0.01})
	}
	p := &Plan{Allocation: al}
	for i, g := range s.GPUs[:100] {
		p.Assignments = append(p.Assignments, Assignment{Jobs: []string{s.Jobs[i].ID}, Type: g.Type, GPUs: []string{g.ID}, Priority: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		Explain(s, p)
	}
}

// TestWaitKeys: each waiting reason's key, "" for any other reason, and
// WaitKeys lists every key (the metric's label values) once.
func TestWaitKeys(t *testing.T) {
	want := map[ReasonKind]string{Reserved: "reserved", Unschedulable: "unschedulable", OverQuota: "over_quota",
		WaitsForGang: "gang", LowerPriority: "priority", Moves: "", NotSelected: "", FirstStart: ""}
	seen := map[string]bool{RejectedKey: true}
	for k, w := range want {
		if got := (Reason{Kind: k}).WaitKey(); got != w {
			t.Errorf("kind %d: key %q, want %q", k, got, w)
		}
		if w != "" {
			seen[w] = true
		}
	}
	if len(WaitKeys) != len(seen) {
		t.Errorf("WaitKeys %v, want the %d keys %v", WaitKeys, len(seen), seen)
	}
	for _, k := range WaitKeys {
		if !seen[k] {
			t.Errorf("WaitKeys has %q, no reason's key", k)
		}
	}
}

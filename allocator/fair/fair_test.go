package fair

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// The paper's example (§3): two 4-GPU servers, users A and B with two
// 2-GPU jobs each get 4 GPUs each; when C comes with one 2-GPU job the
// split becomes 3/3/2.
func TestPaperExample(t *testing.T) {
	h := newHarness(t, Config{QuantumRounds: 1}, cluster("v100", 2, 4))
	h.add(job("a1", "A", 2, nil), job("a2", "A", 2, nil), job("b1", "B", 2, nil), job("b2", "B", 2, nil))
	h.steps(10)
	clear(h.userQ)
	h.steps(10)
	for _, u := range []string{"A", "B"} {
		if got := h.userQ[u] / 10; math.Abs(got-4) > 0.1 {
			t.Errorf("before C: %s gets %.3f GPUs, want 4", u, got)
		}
	}
	h.add(job("c1", "C", 2, nil))
	clear(h.userQ)
	h.steps(100)
	want := map[string]float64{"A": 3, "B": 3, "C": 2}
	for u, w := range want {
		if got := h.userQ[u] / 100; math.Abs(got-w) > 0.1 {
			t.Errorf("after C: %s gets %.3f GPUs, want %v", u, got, w)
		}
	}
}

// Tickets 200 and 100: GPU time 2:1.
func TestTicketsRatio(t *testing.T) {
	h := newHarness(t, Config{Tickets: map[string]int{"X": 200, "Y": 100}}, cluster("v100", 2, 4))
	for i := 0; i < 8; i++ {
		h.add(job(fmt.Sprintf("x%d", i), "X", 1, nil), job(fmt.Sprintf("y%d", i), "Y", 1, nil))
	}
	h.steps(30)
	r := h.userQ["X"] / h.userQ["Y"]
	if math.Abs(r-2) > 0.2 {
		t.Errorf("X:Y = %.3f (%v : %v), want 2 within 10%%", r, h.userQ["X"], h.userQ["Y"])
	}
	if h.userQ["X"]+h.userQ["Y"] != 8*30 {
		t.Errorf("GPUs idle: %v GPU-rounds of %d", h.userQ["X"]+h.userQ["Y"], 8*30)
	}
}

// A gang larger than every generation is refused with the reason, never
// scheduled, and does not disturb the others.
func TestRefusedGang(t *testing.T) {
	gpus := append(cluster("k80", 2, 8), cluster("v100", 1, 4)...)
	h := newHarness(t, Config{}, gpus)
	both := map[string]float64{"k80": 1, "v100": 2}
	h.add(job("big", "A", 32, both), job("ok", "B", 2, both), job("nowhere", "C", 1, map[string]float64{"p100": 1}))
	h.steps(3)
	for _, a := range h.plan.Assignments {
		if a.Jobs[0] == "big" || a.Jobs[0] == "nowhere" {
			t.Fatalf("refused job %s scheduled", a.Jobs[0])
		}
	}
	st := h.s.Status()
	want := map[string]string{
		"big":     "gang of 32 GPUs larger than any generation (largest: k80, 16 GPUs)",
		"nowhere": "cannot run on any GPU type present",
	}
	if len(st.Refused) != 2 {
		t.Fatalf("refused %+v", st.Refused)
	}
	for _, r := range st.Refused {
		if want[r.Job] != r.Reason {
			t.Errorf("%s refused for %q, want %q", r.Job, r.Reason, want[r.Job])
		}
	}
	if len(h.plan.Assignments) != 1 || !strings.HasPrefix(h.plan.Assignments[0].Jobs[0], "ok") {
		t.Errorf("plan %+v", h.plan.Assignments)
	}
	if _, ok := h.s.st.Jobs["big"]; ok {
		t.Error("refused job counted as runnable")
	}
	_ = engine.Keep
}

package cells

import (
	"errors"
	"reflect"
	"testing"
)

// v100Spec is the example cluster: two 8-GPU nodes built of quads
// of pairs, a VC with one whole node and a VC with eight single GPUs.
func v100Spec() Spec {
	return Spec{
		Types: []CellType{
			{Name: "v100", GPUType: "v100"},
			{Name: "v100-pair", Child: "v100", Count: 2},
			{Name: "v100-quad", Child: "v100-pair", Count: 2},
			{Name: "v100-node", Child: "v100-quad", Count: 2, Node: true},
		},
		Cells: []TopCell{{Name: "n0", Type: "v100-node"}, {Name: "n1", Type: "v100-node"}},
		VCs: []VC{
			{Name: "research", Quota: []Quota{{Type: "v100-node", Count: 1}}},
			{Name: "product", Quota: []Quota{{Type: "v100", Count: 8}}},
		},
	}
}

func mustNew(t *testing.T, s Spec) *Allocator {
	t.Helper()
	a, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	a.SetChecking(true)
	return a
}

type step struct {
	op        string // "alloc", "release", "bad", "good"
	id, vc    string
	class     Class
	members   []int
	want      [][]string // nil: expect ErrWait for alloc
	preempted []string
}

func runSteps(t *testing.T, a *Allocator, steps []step) {
	t.Helper()
	for i, s := range steps {
		switch s.op {
		case "alloc":
			p, err := a.Allocate(Request{ID: s.id, VC: s.vc, Class: s.class, Members: s.members})
			if s.want == nil {
				if !errors.Is(err, ErrWait) {
					t.Fatalf("step %d (%s): want wait, got %v %v", i, s.id, p, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d (%s): %v", i, s.id, err)
			}
			if !reflect.DeepEqual(p.Members, s.want) || !reflect.DeepEqual(p.Preempted, s.preempted) {
				t.Fatalf("step %d (%s): placed %v preempting %v, want %v preempting %v", i, s.id, p.Members, p.Preempted, s.want, s.preempted)
			}
		case "release":
			if err := a.Release(s.id); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "bad", "good":
			if err := a.SetHealth(s.id, s.op == "bad"); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func TestScenarioBinding(t *testing.T) {
	a := mustNew(t, v100Spec())
	G, O := Guaranteed, Opportunistic
	runSteps(t, a, []step{
		// One GPU for product: the only free cells are the nodes, so n0 is
		// split down to its first GPU.
		{op: "alloc", id: "p1", vc: "product", class: G, members: []int{1}, want: [][]string{{"n0/0/0/0"}}},
		// research's node binds the other node; each member fills a quad.
		{op: "alloc", id: "r1", vc: "research", class: G, members: []int{4, 4}, want: [][]string{
			{"n1/0/0/0", "n1/0/0/1", "n1/0/1/0", "n1/0/1/1"}, {"n1/1/0/0", "n1/1/0/1", "n1/1/1/0", "n1/1/1/1"}}},
		// Opportunistic work takes the smallest free cell that holds it and
		// is not bound: pair n0/0/1.
		{op: "alloc", id: "o1", vc: "product", class: O, members: []int{2}, want: [][]string{{"n0/0/1/0", "n0/0/1/1"}}},
		// product's next GPU takes the free buddy of its first one.
		{op: "alloc", id: "p2", vc: "product", class: G, members: []int{1}, want: [][]string{{"n0/0/0/1"}}},
		// A 2-GPU member cannot fit product's virtual cells (single GPUs
		// that may sit on different nodes): it waits.
		{op: "alloc", id: "p3", vc: "product", class: G, members: []int{2}},
		// The next GPU avoids preempting o1: quad n0/1 is split instead.
		{op: "alloc", id: "p4", vc: "product", class: G, members: []int{1}, want: [][]string{{"n0/1/0/0"}}},
		{op: "release", id: "r1"},
		// n1 is free again and merged: research binds it again.
		{op: "alloc", id: "r2", vc: "research", class: G, members: []int{8}, want: [][]string{{
			"n1/0/0/0", "n1/0/0/1", "n1/0/1/0", "n1/0/1/1", "n1/1/0/0", "n1/1/0/1", "n1/1/1/0", "n1/1/1/1"}}},
	})
}

func TestScenarioPreemption(t *testing.T) {
	a := mustNew(t, v100Spec())
	G, O := Guaranteed, Opportunistic
	runSteps(t, a, []step{
		{op: "alloc", id: "o1", class: O, members: []int{4, 4}, want: [][]string{
			{"n0/0/0/0", "n0/0/0/1", "n0/0/1/0", "n0/0/1/1"}, {"n0/1/0/0", "n0/1/0/1", "n0/1/1/0", "n0/1/1/1"}}},
		// research binds the node without opportunistic work: nothing killed.
		{op: "alloc", id: "r1", vc: "research", class: G, members: []int{8}, want: [][]string{{
			"n1/0/0/0", "n1/0/0/1", "n1/0/1/0", "n1/0/1/1", "n1/1/0/0", "n1/1/0/1", "n1/1/1/0", "n1/1/1/1"}}},
		// A second opportunistic gang finds no free GPU.
		{op: "alloc", id: "o2", class: O, members: []int{1}},
		// product's GPU must come from n0: o1 is preempted, as a whole gang.
		{op: "alloc", id: "p1", vc: "product", class: G, members: []int{1}, want: [][]string{{"n0/0/0/0"}}, preempted: []string{"o1"}},
		// o2 now fits beside p1, away from it: a free pair in n0.
		{op: "alloc", id: "o2", class: O, members: []int{2}, want: [][]string{{"n0/0/1/0", "n0/0/1/1"}}},
	})
	if _, ok := a.s.gangs["o1"]; ok {
		t.Fatal("preempted gang still placed")
	}
}

func TestScenarioBadHardware(t *testing.T) {
	a := mustNew(t, v100Spec())
	G := Guaranteed
	steps := []step{
		{op: "bad", id: "n1/0/0/0"},
		// research's node binds the healthy node.
		{op: "alloc", id: "r1", vc: "research", class: G, members: []int{8}, want: [][]string{{
			"n0/0/0/0", "n0/0/0/1", "n0/0/1/0", "n0/0/1/1", "n0/1/0/0", "n0/1/0/1", "n0/1/1/0", "n0/1/1/1"}}},
	}
	runSteps(t, a, steps)
	// Only 7 healthy GPUs remain for product's 8: one doomed bad GPU is
	// bound to product, which sees 7 GPUs.
	if !a.s.vcs[1].doomed[7] && !a.s.vcs[1].doomed[0] {
		t.Fatalf("no doomed cell for product: %+v", a.s.vcs[1])
	}
	for i := 0; i < 7; i++ {
		if _, err := a.Allocate(Request{ID: string(rune('a' + i)), VC: "product", Class: G, Members: []int{1}}); err != nil {
			t.Fatalf("gpu %d: %v", i, err)
		}
	}
	if _, err := a.Allocate(Request{ID: "h", VC: "product", Class: G, Members: []int{1}}); !errors.Is(err, ErrWait) {
		t.Fatalf("8th GPU on a cluster with 7 healthy: %v", err)
	}
	runSteps(t, a, []step{{op: "good", id: "n1/0/0/0"},
		{op: "alloc", id: "h", vc: "product", class: G, members: []int{1}, want: [][]string{{"n1/0/0/0"}}}})
}

func TestNewRejectsOversubscription(t *testing.T) {
	s := v100Spec()
	s.VCs[1].Quota[0].Count = 9
	if _, err := New(s); err == nil {
		t.Fatal("9 GPUs + a node on two 8-GPU nodes must fail sharing safety")
	}
	s = v100Spec()
	s.Cells[1].Pinned = "product"
	if _, err := New(s); err == nil {
		t.Fatal("pinning n1 leaves one node for 16 GPUs of quota")
	}
}

// TestScenarioFreeBeforePreemptible: inside a bound cell a guaranteed gang
// takes free GPUs before GPUs holding opportunistic work, although its
// virtual choice (virtual GPU 0) is the one its private cluster makes.
func TestScenarioFreeBeforePreemptible(t *testing.T) {
	spec := v100Spec()
	spec.Cells = spec.Cells[:1]
	spec.VCs = []VC{{Name: "research", Quota: []Quota{{Type: "v100-node", Count: 1}}}}
	a := mustNew(t, spec)
	G, O := Guaranteed, Opportunistic
	runSteps(t, a, []step{
		{op: "alloc", id: "o1", class: O, members: []int{1}, want: [][]string{{"n0/0/0/0"}}},
		{op: "alloc", id: "o2", class: O, members: []int{2}, want: [][]string{{"n0/0/1/0", "n0/0/1/1"}}},
		// research binds n0; its virtual quad 0 maps to the quad without
		// opportunistic work: nothing is preempted.
		{op: "alloc", id: "r1", vc: "research", class: G, members: []int{1}, want: [][]string{{"n0/1/0/0"}}},
		{op: "alloc", id: "r2", vc: "research", class: G, members: []int{2}, want: [][]string{{"n0/1/1/0", "n0/1/1/1"}}},
		// Virtual pair 0/0 is half used: its free GPU is n0/1/0/1.
		{op: "alloc", id: "r3", vc: "research", class: G, members: []int{1}, want: [][]string{{"n0/1/0/1"}}},
		// Only quad n0/0 is left. Pair n0/0/0 holds o1 on one GPU, pair
		// n0/0/1 holds o2 on both: the 2-GPU gang takes pair n0/0/0, its
		// free GPU first, and preempts o1 only.
		{op: "alloc", id: "r4", vc: "research", class: G, members: []int{2}, want: [][]string{{"n0/0/0/1", "n0/0/0/0"}}, preempted: []string{"o1"}},
		{op: "release", id: "r1"},
		{op: "release", id: "r3"},
		// Pair n0/1/0 is free again; a 1-GPU gang packs into a free pair
		// of the VC's view (virtual pair 0/0), mapped to a free physical one.
		{op: "alloc", id: "r5", vc: "research", class: G, members: []int{1}, want: [][]string{{"n0/1/0/0"}}},
	})
}

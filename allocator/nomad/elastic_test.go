package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// TestPinElastic: an elastic job's group gets the worker count and node
// pins; earlier GPU id pins go, other constraints and the device count stay.
func TestPinElastic(t *testing.T) {
	job := gpuJob(1, 2)
	srv := map[string]string{"g0": "n1", "g1": "n1", "g2": "n2", "g3": "n2"}
	// As if it had been pinned by id before.
	if err := Pin(job, "train", engine.Assignment{GPUs: []string{"g0", "g1"}, Servers: []string{"n1"}}, func(g string) string { return srv[g] }); err != nil {
		t.Fatal(err)
	}
	a := engine.Assignment{GPUs: []string{"g2", "g3", "g0", "g1"}, Servers: []string{"n2", "n1"}}
	if err := PinElastic(job, "train", a, 2); err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if *tg.Count != 2 {
		t.Fatalf("count %d, want 2 workers", *tg.Count)
	}
	var node *api.Constraint
	for _, c := range tg.Constraints {
		if c.LTarget == nodeTarget {
			if node != nil {
				t.Fatal("two node pins")
			}
			node = c
		}
	}
	if node == nil || node.Operand != "set_contains_any" || node.RTarget != "n1,n2" {
		t.Fatalf("node pin %+v", node)
	}
	if len(tg.Constraints) != 2 {
		t.Fatalf("constraints %+v", tg.Constraints)
	}
	d := tg.Tasks[0].Resources.Devices[0]
	if *d.Count != 2 || pinnedGPUs(tg) != "" || len(d.Constraints) != 1 {
		t.Fatalf("device %+v pinned %q", d, pinnedGPUs(tg))
	}
	// Not whole workers.
	if err := PinElastic(job, "train", engine.Assignment{GPUs: []string{"g0", "g1", "g2"}, Servers: []string{"n1"}}, 2); err == nil {
		t.Fatal("3 GPUs in workers of 2 accepted")
	}
}

func TestByAllocIndex(t *testing.T) {
	in := []*api.AllocationListStub{{Name: "j.train[10]"}, {Name: "j.train[2]"}, {Name: "j.train[0]"}}
	out := byAllocIndex(in)
	if out[0].Name != "j.train[0]" || out[1].Name != "j.train[2]" || out[2].Name != "j.train[10]" {
		t.Fatalf("%v %v %v", out[0].Name, out[1].Name, out[2].Name)
	}
}

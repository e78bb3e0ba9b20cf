package nomad

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/state"
)

func TestGPUType(t *testing.T) {
	for model, want := range map[string]string{
		"Tesla V100-SXM2-16GB":    "v100",
		"Tesla P100-PCIE-16GB":    "p100",
		"Tesla K80":               "k80",
		"NVIDIA H100 80GB HBM3":   "h100",
		"NVIDIA A100-SXM4-40GB":   "a100",
		"Tesla T4":                "t4",
		"NVIDIA GeForce RTX 3090": "3090", // "rtx" has no digit
		"Accelerator":             "accelerator",
		// MIG instances (the device plugin's group names) are types of their own.
		"NVIDIA A100-SXM4-40GB MIG 3g.20gb": "a100-mig-3g.20gb",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb": "h100-mig-1g.10gb",
	} {
		if got := GPUType(model); got != want {
			t.Errorf("GPUType(%q) = %q, want %q", model, got, want)
		}
	}
}

func gpuJob(count int, devices uint64) *api.Job {
	job := api.NewBatchJob("j", "j", "global", 50)
	tg := api.NewTaskGroup("train", count)
	task := api.NewTask("train", "raw_exec")
	task.Require(&api.Resources{Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &devices,
		Constraints: []*api.Constraint{api.NewConstraint("${device.attr.memory}", ">=", "8 GiB")}}}})
	tg.AddTask(task)
	tg.Constraints = []*api.Constraint{api.NewConstraint("${attr.kernel.name}", "=", "linux")}
	job.AddTaskGroup(tg)
	return job
}

func TestPinOneServer(t *testing.T) {
	job := gpuJob(1, 2)
	if sf := scaleFactor(job); sf != 2 {
		t.Fatalf("scale factor %d", sf)
	}
	a := engine.Assignment{Jobs: []string{"j"}, Type: "v100", GPUs: []string{"g1", "g2"}, Servers: []string{"n1"}}
	serverOf := func(string) string { return "n1" }
	if err := Pin(job, "train", a, serverOf); err != nil {
		t.Fatal(err)
	}
	// Pinning twice replaces the pins instead of piling them up.
	a.GPUs = []string{"g3", "g4"}
	if err := Pin(job, "train", a, serverOf); err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if *tg.Count != 1 || len(tg.Constraints) != 2 || tg.Constraints[1].LTarget != nodeTarget || tg.Constraints[1].RTarget != "n1" {
		t.Errorf("group: count %d constraints %+v", *tg.Count, tg.Constraints)
	}
	d := tg.Tasks[0].Resources.Devices[0]
	if *d.Count != 2 || len(d.Constraints) != 2 || d.Constraints[1].Operand != "set_contains_any" || d.Constraints[1].RTarget != "g3,g4" {
		t.Errorf("device: count %d constraints %+v", *d.Count, d.Constraints)
	}
}

func TestPinSeveralServers(t *testing.T) {
	server := map[string]string{"a0": "A", "a1": "A", "b0": "B", "b1": "B", "c0": "C"}
	job := gpuJob(1, 4)
	a := engine.Assignment{GPUs: []string{"a0", "a1", "b0", "b1"}, Servers: []string{"A", "B"}}
	if err := Pin(job, "train", a, func(g string) string { return server[g] }); err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	if *tg.Count != 2 || *tg.Tasks[0].Resources.Devices[0].Count != 2 || tg.Constraints[1].RTarget != "A,B" {
		t.Errorf("even split: count %d devices %d node pin %q", *tg.Count, *tg.Tasks[0].Resources.Devices[0].Count, tg.Constraints[1].RTarget)
	}
	// Uneven: one allocation per GPU, and the scale factor is kept.
	a = engine.Assignment{GPUs: []string{"a0", "a1", "c0"}, Servers: []string{"A", "C"}}
	if err := Pin(job, "train", a, func(g string) string { return server[g] }); err != nil {
		t.Fatal(err)
	}
	if *tg.Count != 3 || *tg.Tasks[0].Resources.Devices[0].Count != 1 || scaleFactor(job) != 3 {
		t.Errorf("uneven split: count %d devices %d", *tg.Count, *tg.Tasks[0].Resources.Devices[0].Count)
	}
	job.Meta = map[string]string{MetaGPUs: "4"}
	if scaleFactor(job) != 4 {
		t.Errorf("meta %s not preferred", MetaGPUs)
	}
}

func TestCheckpointProgress(t *testing.T) {
	dir := t.TempDir()
	job := gpuJob(1, 1)
	job.TaskGroups[0].Tasks[0].Env = map[string]string{CheckpointEnv: dir + "/${NOMAD_JOB_ID}"}
	if _, ok := CheckpointProgress(job); ok {
		t.Fatal("progress without a checkpoint")
	}
	if err := os.MkdirAll(filepath.Join(dir, "j"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "j", CheckpointFile), []byte(`{"steps":42,"total":100}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if steps, ok := CheckpointProgress(job); !ok || steps != 42 {
		t.Errorf("progress %v %v", steps, ok)
	}
}

// TestDowntimeCredit: after a restart a job is credited the time since its
// last recorded credit only while the same allocations held its GPUs (or
// ones created since), never time it was not running.
func TestDowntimeCredit(t *testing.T) {
	mark := state.Credit{AtS: 100, Allocs: []string{"a1", "a2"}}
	for _, tc := range []struct {
		name string
		held []heldAlloc
		now  float64
		want float64
	}{
		{"same allocations ran throughout", []heldAlloc{{"a1", 40}, {"a2", 41}}, 130, 30},
		{"one of a gang kept", []heldAlloc{{"a2", 41}}, 130, 30},
		{"started after the mark (last round before the crash)", []heldAlloc{{"b1", 104}}, 130, 26},
		{"migrated: the new allocation counts from its creation", []heldAlloc{{"a1", 40}, {"b1", 110}}, 130, 20},
		{"an older allocation the mark does not list", []heldAlloc{{"c1", 90}}, 130, 0},
		{"holds no GPUs now", nil, 130, 0},
		{"clock behind the mark", []heldAlloc{{"a1", 40}}, 95, 0},
	} {
		if got := downtimeCredit(mark, tc.held, tc.now); got != tc.want {
			t.Errorf("%s: credit %v, want %v", tc.name, got, tc.want)
		}
	}
	// A job that held nothing at the mark is credited only from the
	// creation of what it holds now.
	if got := downtimeCredit(state.Credit{AtS: 100}, []heldAlloc{{"b1", 112}}, 130); got != 18 {
		t.Errorf("no allocations at the mark: credit %v, want 18", got)
	}
}

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
	for _, c := range []struct {
		model  string
		memMiB int64
		want   string
	}{
		// Gavel's families keep their names, whatever the memory.
		{"Tesla V100-SXM2-16GB", 16384, "v100"},
		{"Tesla V100-SXM2-32GB", 32768, "v100"},
		{"Tesla P100-PCIE-16GB", 16280, "p100"},
		{"Tesla K80", 11441, "k80"},
		// Others: family and memory size, from the name when it says it.
		{"NVIDIA A100-SXM4-40GB", 40536, "a100-40gb"},
		{"NVIDIA A100-SXM4-80GB", 81920, "a100-80gb"},
		{"NVIDIA A100 80GB PCIe", 81920, "a100-80gb"},
		{"NVIDIA A100-PCIE-40GB", 0, "a100-40gb"},
		{"NVIDIA H100 80GB HBM3", 81559, "h100-80gb"},
		// else from the memory NVML reports, rounded up to the size sold.
		{"NVIDIA H100 PCIe", 81559, "h100-80gb"},
		{"NVIDIA H100 NVL", 95830, "h100-94gb"},
		{"NVIDIA L40S", 46068, "l40s-48gb"},
		{"NVIDIA A10", 23028, "a10-24gb"},
		{"Tesla T4", 15360, "t4-16gb"},
		{"NVIDIA H200", 143771, "h200-141gb"},
		{"NVIDIA GeForce RTX 3090", 24576, "3090-24gb"}, // "rtx" has no digit
		{"NVIDIA L40S", 0, "l40s"},                      // no memory known
		{"Tesla T4", 0, "t4"},
		{"Accelerator", 0, "accelerator"},
		// MIG instances (the device plugin's group names) are types of their own.
		{"NVIDIA A100-SXM4-40GB MIG 3g.20gb", 20096, "a100-mig-3g.20gb"},
		{"NVIDIA H100 80GB HBM3 MIG 1g.10gb", 9984, "h100-mig-1g.10gb"},
	} {
		if got := DefaultGPUType(c.model, c.memMiB); got != c.want {
			t.Errorf("DefaultGPUType(%q, %d) = %q, want %q", c.model, c.memMiB, got, c.want)
		}
	}
	if got := GPUType("NVIDIA A100-SXM4-80GB"); got != "a100-80gb" {
		t.Errorf("GPUType = %q", got)
	}
}

// DeviceType: the config's mapping wins; else the group's memory attribute
// (MiB, as the plugin publishes it; GiB too) separates sizes.
func TestDeviceType(t *testing.T) {
	mem := func(v int64, unit string) map[string]*api.Attribute {
		return map[string]*api.Attribute{"memory": {IntVal: &v, Unit: unit}}
	}
	names := map[string]string{"NVIDIA A100-SXM4-80GB": "a100-80g", "NVIDIA A100 80GB PCIe": "a100-80g"}
	for _, c := range []struct {
		d    api.NodeDeviceResource
		want string
	}{
		{api.NodeDeviceResource{Name: "NVIDIA A100-SXM4-80GB", Attributes: mem(81920, "MiB")}, "a100-80g"},
		{api.NodeDeviceResource{Name: "NVIDIA A100 80GB PCIe"}, "a100-80g"},
		{api.NodeDeviceResource{Name: "NVIDIA A100-SXM4-40GB", Attributes: mem(40536, "MiB")}, "a100-40gb"},
		{api.NodeDeviceResource{Name: "NVIDIA L40S", Attributes: mem(46068, "MiB")}, "l40s-48gb"},
		{api.NodeDeviceResource{Name: "NVIDIA L40S", Attributes: mem(48, "GiB")}, "l40s-48gb"},
		{api.NodeDeviceResource{Name: "NVIDIA L40S"}, "l40s"},
		{api.NodeDeviceResource{Name: "Tesla V100-SXM2-16GB", Attributes: mem(16384, "MiB")}, "v100"},
	} {
		if got := DeviceType(&c.d, names); got != c.want {
			t.Errorf("DeviceType(%q) = %q, want %q", c.d.Name, got, c.want)
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

// Observe reads a job's spec only when the listing shows it changed (its
// ModifyIndex): a steady round reads none.
func TestObserveReadsChangedSpecsOnly(t *testing.T) {
	a, b := resJob("a"), resJob("b")
	a.ModifyIndex, b.ModifyIndex = ptr(uint64(10)), ptr(uint64(11))
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}, jobs: []*api.Job{a, b}}
	be := testBackend(t, f) // the first Observe reads both
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("first round read %d specs, want 2", n)
	}
	snap, err := be.Observe()
	if err != nil || len(snap.Jobs) != 2 {
		t.Fatalf("steady round: %v jobs, %v", snap, err)
	}
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("a steady round read %d specs", n-2)
	}
	b.ModifyIndex = ptr(uint64(20))
	b.Meta["rondo.steps"] = "500"
	snap, err = be.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if n := f.reads.Load(); n != 3 {
		t.Fatalf("a round after one change read %d specs, want 1", n-2)
	}
	if be.jobs["b"].total != 500 {
		t.Fatalf("b's changed spec not read: total %v", be.jobs["b"].total)
	}
	// A job no longer listed leaves the cache.
	f.jobs = f.jobs[:1]
	if _, err := be.Observe(); err != nil {
		t.Fatal(err)
	}
	if len(be.specs) != 1 || be.specs["a"] == nil {
		t.Fatalf("cache after b left: %v", be.specs)
	}
}

// Observe reads a GPU node again only when the node list shows its
// ModifyIndex moved (a device turned unhealthy, say): a steady round reads
// none.
func TestObserveReadsChangedNodesOnly(t *testing.T) {
	n1, n2 := modelledNode("n1"), modelledNode("n2")
	n1.ModifyIndex, n2.ModifyIndex = 10, 11
	f := &fakeNomad{nodes: []*api.Node{n1, n2}, jobs: []*api.Job{resJob("a")}}
	be := testBackend(t, f) // the first Observe reads both
	if n := f.nreads.Load(); n != 2 {
		t.Fatalf("first round read %d nodes, want 2", n)
	}
	snap, err := be.Observe()
	if err != nil || len(snap.GPUs) != 8 {
		t.Fatalf("steady round: %v, %v", snap, err)
	}
	if n := f.nreads.Load(); n != 2 {
		t.Fatalf("a steady round read %d nodes", n-2)
	}
	// n2's GPU turns unhealthy: the node's index moves, it is read again.
	n2.ModifyIndex = 20
	n2.NodeResources.Devices[0].Instances[1].Healthy = false
	snap, err = be.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if n := f.nreads.Load(); n != 3 {
		t.Fatalf("a round after one change read %d nodes, want 1", n-2)
	}
	failed := 0
	for _, g := range snap.GPUs {
		if g.Failed {
			failed++
			if g.ID != "n2-g1" {
				t.Errorf("failed GPU %s", g.ID)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d failed GPUs, want 1", failed)
	}
	// A node no longer listed leaves the cache; unknown indexes (0) are
	// always read.
	f.nodes = f.nodes[:1]
	if _, err := be.Observe(); err != nil {
		t.Fatal(err)
	}
	if len(be.nodeInfo) != 1 || be.nodeInfo["n1"] == nil {
		t.Fatalf("cache after n2 left: %v", be.nodeInfo)
	}
	n1.ModifyIndex = 0
	be.Observe()
	be.Observe()
	if n := f.nreads.Load(); n != 5 {
		t.Fatalf("index 0: %d reads, want 5", n)
	}
}

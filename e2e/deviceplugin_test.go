package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

const (
	v100 = "Tesla V100-SXM2-16GB"
	k80  = "Tesla K80"
	a100 = "NVIDIA A100-SXM4-40GB"
)

func findDevice(n *api.Node, typ, name string) *api.NodeDeviceResource {
	if n.NodeResources == nil {
		return nil
	}
	for _, d := range n.NodeResources.Devices {
		if d.Vendor == "nvidia" && d.Type == typ && d.Name == name {
			return d
		}
	}
	return nil
}

func instance(d *api.NodeDeviceResource, id string) *api.NodeDevice {
	if d == nil {
		return nil
	}
	for _, in := range d.Instances {
		if in.ID == id {
			return in
		}
	}
	return nil
}

func attrString(a *api.Attribute) string {
	if a == nil {
		return "<nil>"
	}
	switch {
	case a.StringVal != nil:
		return *a.StringVal
	case a.IntVal != nil:
		return fmt.Sprintf("%d%s", *a.IntVal, a.Unit)
	case a.BoolVal != nil:
		return fmt.Sprint(*a.BoolVal)
	case a.FloatVal != nil:
		return fmt.Sprintf("%v%s", *a.FloatVal, a.Unit)
	}
	return "<empty>"
}

// runEnvJob runs a raw_exec batch task that prints its environment, with one
// instance of the device request, and returns the allocation and its stdout.
func runEnvJob(t *testing.T, a *Agent, jobID, deviceName string) (*api.Allocation, string) {
	t.Helper()
	return runEnvJobDevice(t, a, jobID, &api.RequestedDevice{Name: deviceName, Count: ptr(uint64(1))})
}

// runEnvJobDevice is runEnvJob with a full device request (constraints).
func runEnvJobDevice(t *testing.T, a *Agent, jobID string, dev *api.RequestedDevice) (*api.Allocation, string) {
	t.Helper()
	c := a.Client()
	job := api.NewBatchJob(jobID, jobID, "global", 50)
	tg := api.NewTaskGroup("g", 1)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
	task := api.NewTask("env", "raw_exec").SetConfig("command", "/usr/bin/env")
	task.Require(&api.Resources{
		CPU: ptr(100), MemoryMB: ptr(64),
		Devices: []*api.RequestedDevice{dev},
	})
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", jobID, err)
	}
	var alloc *api.Allocation
	a.WaitFor(60*time.Second, jobID+" allocation complete", func() (bool, error) {
		stubs, _, err := c.Jobs().Allocations(jobID, true, nil)
		if err != nil || len(stubs) == 0 {
			return false, nil
		}
		switch stubs[0].ClientStatus {
		case "complete":
			alloc, _, err = c.Allocations().Info(stubs[0].ID, nil)
			return err == nil, err
		case "failed", "lost":
			return false, fmt.Errorf("allocation %s %s: %+v", stubs[0].ID, stubs[0].ClientStatus, stubs[0].TaskStates)
		}
		return false, nil
	})
	r, err := c.AllocFS().Cat(alloc, "alloc/logs/env.stdout.0", nil)
	if err != nil {
		t.Fatalf("read logs: %v", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return alloc, string(b)
}

func ptr[T any](v T) *T { return &v }

func allocatedIDs(t *testing.T, alloc *api.Allocation) []string {
	t.Helper()
	tr := alloc.AllocatedResources.Tasks["env"]
	if tr == nil || len(tr.Devices) != 1 {
		t.Fatalf("allocation has no device: %+v", tr)
	}
	return tr.Devices[0].DeviceIDs
}

func envVar(out, key string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `=(.*)$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestDevicePluginOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	pluginDir := t.TempDir()
	BuildPlugin(t, "./cmd/nomad-device-rondo", pluginDir)

	faultDir := t.TempDir()
	badFile := filepath.Join(faultDir, "k80-1.bad")
	cfg, err := os.ReadFile(filepath.Join(moduleRoot(t), "device-plugin", "testdata", "mixed.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(cfg), `pci_bus_id         = "00000000:86:00.0"`,
		`pci_bus_id         = "00000000:86:00.0"
    unhealthy_file     = "`+badFile+`"`, 1)
	if conf == string(cfg) {
		t.Fatal("test config edit failed")
	}
	// An A100 in MIG mode with two 3g.20gb instances, last in the fake block.
	conf = strings.TrimSuffix(strings.TrimSpace(conf), "}") + `
  gpu {
    uuid               = "GPU-a100"
    model              = "` + a100 + `"
    memory_mib         = 40960
    compute_capability = "8.0"
    pci_bus_id         = "00000000:c1:00.0"
    mig                = true
    mig_device {
      uuid            = "MIG-a100-0"
      profile         = "3g.20gb"
      memory_mib      = 20096
      gpu_instance_id = 1
    }
    mig_device {
      uuid            = "MIG-a100-1"
      profile         = "3g.20gb"
      memory_mib      = 20096
      gpu_instance_id = 2
    }
  }
}
`

	a := StartAgent(t, AgentOptions{
		PluginDir: pluginDir,
		Plugins:   map[string]string{"nomad-device-rondo": conf},
	})

	node := a.WaitForNode(60*time.Second, "GPUs fingerprinted", func(n *api.Node) bool {
		return findDevice(n, "gpu", v100) != nil && findDevice(n, "gpu", k80) != nil
	})
	gv, gk := findDevice(node, "gpu", v100), findDevice(node, "gpu", k80)
	if len(gv.Instances) != 2 || len(gk.Instances) != 2 {
		t.Fatalf("instances: v100=%d k80=%d", len(gv.Instances), len(gk.Instances))
	}
	for k, want := range map[string]string{
		"memory":              "16384MiB",
		"compute_capability":  "7.0",
		"driver_version":      "535.104.05",
		"GPU-v100-0.cell":     "system0/numa0/host-bridge0/pcie-multi-switch0/pcie-switch0/board0",
		"GPU-v100-1.cell":     "system0/numa0/host-bridge0/pcie-multi-switch0/pcie-switch0/board0",
		"GPU-v100-0.affinity": "GPU-v100-1=board,GPU-k80-0=system,GPU-k80-1=system,GPU-a100=system",
		// The official nomad-device-nvidia's names, so its constraints match.
		"power": "300W", "cores_clock": "1530MHz", "memory_clock": "877MHz", "bar1": "16384MiB",
		"pci_bandwidth": "16384MB/s", "persistence_mode": "Enabled", "display_state": "Disabled",
	} {
		if got := attrString(gv.Attributes[k]); got != want {
			t.Errorf("node V100 attribute %s = %q, want %q", k, got, want)
		}
	}
	if got := attrString(gk.Attributes["GPU-k80-1.numa_node"]); got != "1" {
		t.Errorf("K80 numa attribute %q", got)
	}
	if in := instance(gv, "GPU-v100-0"); in == nil || !in.Healthy || in.Locality == nil || in.Locality.PciBusID != "00000000:06:00.0" {
		t.Errorf("V100-0 instance %+v", in)
	}
	// MIG: each instance is a device of its own, the MIG-mode GPU is not.
	if d := findDevice(node, "gpu", a100); d != nil {
		t.Errorf("a MIG-mode GPU is offered whole: %+v", d)
	}
	mig := findDevice(node, "gpu", a100+" MIG 3g.20gb")
	if mig == nil || len(mig.Instances) != 2 || instance(mig, "MIG-a100-0") == nil || instance(mig, "MIG-a100-1") == nil {
		t.Fatalf("MIG device group %+v", mig)
	}
	for k, want := range map[string]string{
		"mig_profile": "3g.20gb", "memory": "20096MiB", "parent_model": a100,
		"MIG-a100-1.parent": "GPU-a100", "MIG-a100-1.gpu_instance_id": "2",
		"MIG-a100-1.cell": "system0/numa2/host-bridge2/pcie-multi-switch2/pcie-switch2/board3",
	} {
		if got := attrString(mig.Attributes[k]); got != want {
			t.Errorf("node MIG attribute %s = %q, want %q", k, got, want)
		}
	}
	share := findDevice(node, "gpu-share", v100+"-mps-50")
	if share == nil || len(share.Instances) != 4 {
		t.Fatalf("share device group %+v", share)
	}

	// A GPU job gets the id Nomad chose in CUDA_VISIBLE_DEVICES.
	alloc, out := runEnvJob(t, a, "gpu-env", "nvidia/gpu")
	got := allocatedIDs(t, alloc)
	if envVar(out, "CUDA_VISIBLE_DEVICES") != got[0] || envVar(out, "NVIDIA_VISIBLE_DEVICES") != got[0] {
		t.Errorf("allocated %v but task env:\n%s", got, out)
	}
	// nvidia/gpu matches whole GPUs and MIG instances alike (as with the
	// official plugin), never a MIG-mode GPU whole.
	if !strings.HasPrefix(got[0], "GPU-") && !strings.HasPrefix(got[0], "MIG-") || got[0] == "GPU-a100" {
		t.Errorf("allocated id %q", got[0])
	}

	// A job asking for a MIG profile gets its instance's MIG uuid.
	alloc, out = runEnvJob(t, a, "mig-env", "nvidia/gpu/"+a100+" MIG 3g.20gb")
	got = allocatedIDs(t, alloc)
	if !strings.HasPrefix(got[0], "MIG-a100-") || envVar(out, "CUDA_VISIBLE_DEVICES") != got[0] || envVar(out, "NVIDIA_VISIBLE_DEVICES") != got[0] {
		t.Errorf("MIG job allocated %v, env:\n%s", got, out)
	}

	// A constraint written for the official plugin's attributes still
	// selects: only the V100s have persistence mode and 16 GB/s of PCIe.
	alloc, _ = runEnvJobDevice(t, a, "official-constraints", &api.RequestedDevice{
		Name: "nvidia/gpu", Count: ptr(uint64(1)),
		Constraints: []*api.Constraint{
			{LTarget: "${device.attr.persistence_mode}", Operand: "=", RTarget: "Enabled"},
			{LTarget: "${device.attr.pci_bandwidth}", Operand: ">=", RTarget: "16000 MB/s"},
			{LTarget: "${device.attr.cores_clock}", Operand: ">=", RTarget: "1 GHz"},
		},
	})
	if got := allocatedIDs(t, alloc); !strings.HasPrefix(got[0], "GPU-v100-") {
		t.Errorf("official-attribute constraints picked %v", got)
	}

	// An MPS share job gets the MPS environment.
	alloc, out = runEnvJob(t, a, "share-env", "nvidia/gpu-share")
	got = allocatedIDs(t, alloc)
	gpu := strings.SplitN(got[0], "/", 2)[0]
	for k, want := range map[string]string{
		"CUDA_VISIBLE_DEVICES":              gpu,
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=8192M",
		"CUDA_MPS_PIPE_DIRECTORY":           "/tmp/nvidia-mps/" + gpu,
		"CUDA_MPS_LOG_DIRECTORY":            "/var/log/nvidia-mps/" + gpu,
	} {
		if v := envVar(out, k); v != want {
			t.Errorf("share task %s = %q, want %q (allocated %v)", k, v, want, got)
		}
	}

	// Fault injection: the K80 turns unhealthy while the file exists.
	if err := os.WriteFile(badFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	node = a.WaitForNode(30*time.Second, "GPU-k80-1 unhealthy", func(n *api.Node) bool {
		in := instance(findDevice(n, "gpu", k80), "GPU-k80-1")
		return in != nil && !in.Healthy
	})
	if in := instance(findDevice(node, "gpu", k80), "GPU-k80-1"); !strings.Contains(in.HealthDescription, "lost") {
		t.Errorf("health description %q", in.HealthDescription)
	}
	if in := instance(findDevice(node, "gpu", k80), "GPU-k80-0"); in == nil || !in.Healthy {
		t.Errorf("GPU-k80-0 should stay healthy: %+v", in)
	}
	if err := os.Remove(badFile); err != nil {
		t.Fatal(err)
	}
	a.WaitForNode(30*time.Second, "GPU-k80-1 recovers", func(n *api.Node) bool {
		in := instance(findDevice(n, "gpu", k80), "GPU-k80-1")
		return in != nil && in.Healthy
	})
}

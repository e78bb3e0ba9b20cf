package deviceplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
)

// A100 in MIG mode (two 3g.40gb and one 1g.10gb instances) beside an H100
// with every fact the official plugin publishes, on one NVLink board.
const parityHCL = `
fingerprint_period = "50ms"
mps_profile {
  name   = "mps-50"
  shares = 2
}
fake {
  driver_version = "580.159.04"
  cuda_version   = "13.0"
  fault_dir      = "%FAULTS%"
  gpu {
    uuid                 = "GPU-h100"
    model                = "NVIDIA H100 80GB HBM3"
    memory_mib           = 81559
    compute_capability   = "9.0"
    pci_bus_id           = "00000000:06:00.0"
    board                = "nv0"
    power_limit_w        = 700
    max_sm_clock_mhz     = 1980
    max_memory_clock_mhz = 2619
    bar1_mib             = 131072
    pcie_generation      = 5
    pcie_width           = 16
    persistence_mode     = true
    ecc                  = true
  }
  gpu {
    uuid               = "GPU-a100"
    model              = "NVIDIA A100-SXM4-80GB"
    memory_mib         = 81920
    compute_capability = "8.0"
    pci_bus_id         = "00000000:07:00.0"
    board              = "nv0"
    mig                = true
    ecc                = true
    mig_device {
      uuid                = "MIG-a"
      profile             = "3g.40gb"
      memory_mib          = 40192
      gpu_instance_id     = 1
      compute_instance_id = 0
      sm_count            = 42
    }
    mig_device {
      uuid            = "MIG-b"
      profile         = "3g.40gb"
      memory_mib      = 40192
      gpu_instance_id = 2
      sm_count        = 42
    }
  }
}
`

func parityPlugin(t *testing.T) (*Plugin, string) {
	t.Helper()
	faults := t.TempDir()
	return newPlugin(t, strings.ReplaceAll(parityHCL, "%FAULTS%", faults)), faults
}

func TestOfficialAttributeNames(t *testing.T) {
	p, _ := parityPlugin(t)
	_, groups, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	h := group(t, groups, "gpu", "NVIDIA H100 80GB HBM3")
	for k, want := range map[string]string{
		// The official plugin's names...
		"memory": "81559MiB", "power": "700W", "cores_clock": "1980MHz", "memory_clock": "2619MHz",
		"bar1": "131072MiB", "pci_bandwidth": "49152MB/s", "persistence_mode": "Enabled",
		"display_state": "Disabled", "driver_version": "580.159.04",
		// ...beside Rondo's own.
		"power_limit": "700W", "max_sm_clock": "1980MHz", "max_memory_clock": "2619MHz",
		"compute_capability": "9.0", "cuda_version": "13.0",
	} {
		if got := attr(t, h, k); got != want {
			t.Errorf("H100 %s = %q, want %q", k, got, want)
		}
	}
	// A share group carries them too (its GPU's facts).
	if got := attr(t, group(t, groups, "gpu-share", "NVIDIA H100 80GB HBM3-mps-50"), "pci_bandwidth"); got != "49152MB/s" {
		t.Errorf("share pci_bandwidth %q", got)
	}
}

func TestPCIeBandwidthTable(t *testing.T) {
	for _, c := range []struct {
		gen, width int
		want       uint64
	}{{3, 16, 16384}, {4, 16, 32768}, {5, 16, 49152}, {6, 8, 32768}, {2, 16, 0}, {4, 0, 0}} {
		if got := pcieMBps(c.gen, c.width); got != c.want {
			t.Errorf("gen %d x%d: %d MB/s, want %d", c.gen, c.width, got, c.want)
		}
	}
}

func TestMIGDevices(t *testing.T) {
	p, _ := parityPlugin(t)
	inv, groups, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Name == "NVIDIA A100-SXM4-80GB" || strings.HasPrefix(g.Name, "NVIDIA A100-SXM4-80GB-") {
			t.Errorf("a GPU in MIG mode must not be offered whole or as MPS shares: group %s/%s (%s)", g.Type, g.Name, ids(g))
		}
	}
	m := group(t, groups, "gpu", "NVIDIA A100-SXM4-80GB MIG 3g.40gb")
	if ids(m) != "MIG-a,MIG-b" {
		t.Fatalf("MIG instances %q", ids(m))
	}
	cell := inv.Topology.Cells["GPU-a100"]
	if cell == "" || cell != inv.Topology.Cells["GPU-h100"] {
		t.Fatalf("board cell of the A100 %q (H100 %q)", cell, inv.Topology.Cells["GPU-h100"])
	}
	for k, want := range map[string]string{
		"model": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "parent_model": "NVIDIA A100-SXM4-80GB",
		"mig_profile": "3g.40gb", "memory": "40192MiB", "multiprocessors": "42",
		"compute_capability": "8.0",
		"MIG-a.parent":       "GPU-a100", "MIG-a.cell": cell, "MIG-a.gpu_instance_id": "1",
		"MIG-b.gpu_instance_id": "2", "MIG-b.compute_instance_id": "0", "MIG-b.pci_bus_id": "00000000:07:00.0",
		"MIG-a.affinity": "GPU-h100=board",
	} {
		if got := attr(t, m, k); got != want {
			t.Errorf("MIG group %s = %q, want %q", k, got, want)
		}
	}

	// A task gets the MIG uuid; the parent or a mix with shares is refused.
	r, err := p.Reserve([]string{"MIG-b"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Envs["CUDA_VISIBLE_DEVICES"] != "MIG-b" || r.Envs["NVIDIA_VISIBLE_DEVICES"] != "MIG-b" {
		t.Errorf("MIG env %v", r.Envs)
	}
	if _, err := p.Reserve([]string{"GPU-a100"}); err == nil || !strings.Contains(err.Error(), "MIG mode") {
		t.Errorf("reserving a MIG-mode GPU whole: %v", err)
	}
	if _, err := p.Reserve([]string{"MIG-a", "GPU-h100/mps-50/0"}); err == nil {
		t.Error("a MIG device and an MPS share in one task must be refused")
	}

	// Stats: a MIG instance reports its own memory, and no utilization
	// (NVML has none per instance).
	var st *device.DeviceStats
	for _, gs := range p.Sample() {
		if gs.Name == m.Name {
			st = gs.InstanceStats["MIG-a"]
		}
	}
	if st == nil {
		t.Fatal("no stats for MIG-a")
	}
	a := st.Stats.Attributes
	if a["Memory state"] == nil || *a["Memory state"].IntDenominatorVal != 40192 {
		t.Errorf("MIG memory state %v", a["Memory state"])
	}
	if a["GPU utilization"] != nil || a["utilization"] != nil {
		t.Errorf("MIG instance with utilization %v", a)
	}
}

// A MIG instance is as healthy as its GPU: lost with it, back with it.
func TestMIGHealthFollowsGPU(t *testing.T) {
	p, faults := parityPlugin(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const mig = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
	healthy := func(h map[string]string) bool { return h["MIG-a"] == "ok" && h["MIG-b"] == "ok" }
	waitHealth(t, ch, "gpu", mig, "healthy at start", healthy)
	if err := os.WriteFile(filepath.Join(faults, "GPU-a100"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := waitHealth(t, ch, "gpu", mig, "MIG instances unhealthy", func(h map[string]string) bool {
		return h["MIG-a"] != "ok" && h["MIG-b"] != "ok" && len(h) == 2
	})
	if !strings.Contains(h["MIG-a"], "GPU lost") {
		t.Errorf("health %q", h["MIG-a"])
	}
	if err := os.Remove(filepath.Join(faults, "GPU-a100")); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, ch, "gpu", mig, "MIG instances recover", healthy)
}

func TestOfficialStatsAndECC(t *testing.T) {
	p, faults := parityPlugin(t)
	if _, _, err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	sample := func() map[string]string {
		for _, gs := range p.Sample() {
			if gs.Type == "gpu" && gs.Name == "NVIDIA H100 80GB HBM3" {
				m := map[string]string{}
				for k, v := range gs.InstanceStats["GPU-h100"].Stats.Attributes {
					m[k] = statString(v)
				}
				return m
			}
		}
		t.Fatal("no H100 stats")
		return nil
	}
	s := sample()
	for k, want := range map[string]string{
		"GPU utilization": "0 %", "Memory utilization": "0 %", "Temperature": "35 C", "Power usage": "140 W",
		"Memory state": "5097/81559 MiB", "BAR1 buffer state": "2/131072 MiB",
		"ECC L1 errors": "0 #", "ECC L2 errors": "0 #", "ECC memory errors": "0 #",
		"Encoder utilization": "0 %", "Decoder utilization": "0 %",
		// Rondo's own names stay.
		"utilization": "0 %", "memory_used": "5097/81559 MiB", "power": "140 W", "temperature": "35 C",
		"ecc_corrected": "0 #", "ecc_uncorrected": "0 #",
	} {
		if s[k] != want {
			t.Errorf("stat %q = %q, want %q", k, s[k], want)
		}
	}
	// Counters follow the GPU's.
	if err := os.WriteFile(filepath.Join(faults, "GPU-h100.ecc"), []byte("3 5 7 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = sample()
	for k, want := range map[string]string{"ECC L1 errors": "3 #", "ECC L2 errors": "5 #", "ECC memory errors": "7 #",
		"ecc_corrected": "15 #", "ecc_uncorrected": "1 #"} {
		if s[k] != want {
			t.Errorf("after errors: stat %q = %q, want %q", k, s[k], want)
		}
	}
	// A GPU without ECC reports no ECC stats rather than zeros.
	mp := newPlugin(t, mixed(t))
	if _, _, err := mp.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, gs := range mp.Sample() {
		for id, st := range gs.InstanceStats {
			if st.Stats.Attributes["ECC L1 errors"] != nil {
				t.Errorf("%s: ECC stats on a GPU without ECC", id)
			}
		}
	}
}

func TestEnabledFalse(t *testing.T) {
	p := newPlugin(t, "enabled = false\n"+mixed(t))
	if _, err := p.Fingerprint(context.Background()); !errors.Is(err, device.ErrPluginDisabled) {
		t.Errorf("Fingerprint: %v", err)
	}
	if _, err := p.Stats(context.Background(), time.Second); !errors.Is(err, device.ErrPluginDisabled) {
		t.Errorf("Stats: %v", err)
	}
	if _, err := p.Reserve([]string{"GPU-v100-0"}); !errors.Is(err, device.ErrPluginDisabled) {
		t.Errorf("Reserve: %v", err)
	}
	if r, err := p.Reserve(nil); err != nil || len(r.Envs) != 0 {
		t.Errorf("Reserve of nothing: %v %v", r, err)
	}
	rep, err := p.FingerprintReport()
	if err != nil || !rep.Disabled || len(rep.GPUs) != 0 {
		t.Errorf("report %+v %v", rep, err)
	}
	// Enabled by default.
	if _, err := newPlugin(t, mixed(t)).Fingerprint(context.Background()); err != nil {
		t.Errorf("default: %v", err)
	}
}

func TestBadFakeMIGConfig(t *testing.T) {
	gpu := func(extra string) string {
		return `fake {
  gpu {
    uuid = "GPU-a"
    model = "A100"
    memory_mib = 40960
` + extra + `
  }
}`
	}
	for _, c := range []struct{ body, want string }{
		{gpu(`mig_device {
  uuid = "MIG-1"
  profile = "1g.5gb"
  memory_mib = 4864
}`), "fake.gpu[0].mig_device: mig_device blocks need mig = true"},
		{gpu(`mig = true
mig_device {
  uuid = "GPU-a"
  profile = "1g.5gb"
  memory_mib = 4864
}`), `fake.gpu[0].mig_device[0].uuid: "GPU-a" duplicates`},
		{gpu(`mig = true
mig_device {
  uuid = "MIG-1"
  profile = "7g.40gb"
  memory_mib = 40960
}
mig_device {
  uuid = "MIG-2"
  profile = "1g.5gb"
  memory_mib = 4864
}`), "fake.gpu[0].mig_device: MIG devices hold 45824 MiB, more than the GPU's 40960 MiB"},
		{gpu(`mig = true
mig_device {
  uuid = "MIG-1"
  profile = ""
  memory_mib = 4864
}`), "fake.gpu[0].mig_device[0].profile: required"},
		{gpu(`pcie_width = -1`), "fake.gpu[0].pcie_width: must be >= 0"},
	} {
		mp, err := EncodeHCL([]byte(c.body))
		if err == nil {
			var cfg *Config
			if cfg, err = DecodeConfig(mp); err == nil {
				err = New(nil).Configure(cfg)
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config error %v, want %q", err, c.want)
		}
	}
}

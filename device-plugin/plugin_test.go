package deviceplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/rondo-sched/rondo/device-plugin/nvml"
)

const (
	v100 = "Tesla V100-SXM2-16GB"
	k80  = "Tesla K80"
)

// newPlugin configures a plugin the way the Nomad agent does: HCL through
// the plugin's schema, msgpack, SetConfig.
func newPlugin(t *testing.T, hcl string) *Plugin {
	t.Helper()
	mp, err := EncodeHCL([]byte(hcl))
	if err != nil {
		t.Fatalf("encode config: %v", err)
	}
	p := New(nil)
	if err := p.SetConfig(&base.Config{PluginConfig: mp}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mixed(t *testing.T) string { return readFile(t, "testdata/mixed.hcl") }

func group(t *testing.T, groups []*device.DeviceGroup, typ, name string) *device.DeviceGroup {
	t.Helper()
	for _, g := range groups {
		if g.Type == typ && g.Name == name {
			if err := g.Validate(); err != nil {
				t.Fatalf("group %s/%s invalid: %v", typ, name, err)
			}
			return g
		}
	}
	t.Fatalf("no device group %s/%s", typ, name)
	return nil
}

func attr(t *testing.T, g *device.DeviceGroup, k string) string {
	t.Helper()
	a, ok := g.Attributes[k]
	if !ok {
		t.Fatalf("group %s: no attribute %q", g.Name, k)
	}
	return a.GoString()
}

func ids(g *device.DeviceGroup) string {
	var s []string
	for _, d := range g.Devices {
		s = append(s, d.ID)
	}
	return strings.Join(s, ",")
}

func health(g *device.DeviceGroup) map[string]string {
	m := map[string]string{}
	for _, d := range g.Devices {
		if d.Healthy {
			m[d.ID] = "ok"
		} else {
			m[d.ID] = d.HealthDesc
		}
	}
	return m
}

func nextFingerprint(t *testing.T, ch <-chan *device.FingerprintResponse) []*device.DeviceGroup {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("fingerprint channel closed")
		}
		if r.Error != nil {
			t.Fatalf("fingerprint sent an error: %v", r.Error)
		}
		return r.Devices
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint within 10s")
	}
	return nil
}

func TestFingerprintMixedFleet(t *testing.T) {
	p := newPlugin(t, mixed(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	groups := nextFingerprint(t, ch)
	if len(groups) != 3 {
		t.Fatalf("want 3 groups (2 models + 1 share profile), got %d", len(groups))
	}
	gv := group(t, groups, "gpu", v100)
	if gv.Vendor != "nvidia" {
		t.Errorf("vendor %q", gv.Vendor)
	}
	if got := ids(gv); got != "GPU-v100-0,GPU-v100-1" {
		t.Errorf("v100 ids %s", got)
	}
	for k, want := range map[string]string{
		"memory":                "16384MiB",
		"compute_capability":    "7.0",
		"driver_version":        "535.104.05",
		"cuda_version":          "12.2",
		"power_limit":           "300W",
		"GPU-v100-0.numa_node":  "0",
		"GPU-v100-1.pci_bus_id": "00000000:07:00.0",
		"GPU-v100-0.mig":        "false",
		"GPU-v100-0.mps":        "false",
		"GPU-v100-0.affinity":   "GPU-v100-1=board,GPU-k80-0=system,GPU-k80-1=system",
	} {
		if got := attr(t, gv, k); got != want {
			t.Errorf("v100 %s = %q, want %q", k, got, want)
		}
	}
	if gv.Devices[0].HwLocality == nil || gv.Devices[0].HwLocality.PciBusID != "00000000:06:00.0" {
		t.Errorf("v100-0 locality %+v", gv.Devices[0].HwLocality)
	}
	gk := group(t, groups, "gpu", k80)
	if got := attr(t, gk, "memory"); got != "11441MiB" {
		t.Errorf("k80 memory %s", got)
	}
	if _, ok := gk.Attributes["power_limit"]; ok {
		t.Error("k80 reports no power limit in the fake; attribute must be left out")
	}
	gs := group(t, groups, "gpu-share", v100+"-mps-50")
	if got := ids(gs); got != "GPU-v100-0/mps-50/0,GPU-v100-0/mps-50/1,GPU-v100-1/mps-50/0,GPU-v100-1/mps-50/1" {
		t.Errorf("share ids %s", got)
	}
	for k, want := range map[string]string{"active_thread_percentage": "50", "share_memory": "8192MiB", "shares_per_gpu": "2"} {
		if got := attr(t, gs, k); got != want {
			t.Errorf("share %s = %q, want %q", k, got, want)
		}
	}
	// Nothing changes: no second message.
	select {
	case r := <-ch:
		t.Fatalf("unexpected fingerprint without change: %+v", r)
	case <-time.After(1500 * time.Millisecond):
	}
}

func TestTopologyCells(t *testing.T) {
	// A DGX-like box: two NUMA nodes, each with two PCIe switches of two
	// GPUs; GPUs 0 and 1 share a board; 4 and 6 are linked across switches.
	var b strings.Builder
	b.WriteString("fake {\n")
	for i := 0; i < 8; i++ {
		numa, sw := i/4, i/2
		board := ""
		if i < 2 {
			board = `board = "b0"`
		}
		b.WriteString("gpu {\n uuid = \"GPU-" + string(rune('0'+i)) + "\"\n model = \"A100\"\n memory_mib = 40960\n")
		b.WriteString(" numa_node = " + string(rune('0'+numa)) + "\n pcie_switch = \"sw" + string(rune('0'+sw)) + "\"\n" + board + "\n}\n")
	}
	b.WriteString(`link { a = "GPU-4" b = "GPU-6" level = "pcie-multi-switch" }` + "\n")
	b.WriteString(`link { a = "GPU-5" b = "GPU-7" level = "pcie-multi-switch" }` + "\n}\n")
	p := newPlugin(t, b.String())
	inv, _, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	top := inv.Topology
	for _, c := range []struct {
		a, b string
		want nvml.TopologyLevel
	}{
		{"GPU-0", "GPU-1", nvml.TopologyInternal},
		{"GPU-2", "GPU-3", nvml.TopologySingle},
		{"GPU-0", "GPU-2", nvml.TopologyNode},
		{"GPU-4", "GPU-6", nvml.TopologyMultiple},
		{"GPU-0", "GPU-7", nvml.TopologySystem},
	} {
		if got := top.LevelBetween(c.a, c.b); got != c.want {
			t.Errorf("level %s-%s = %s, want %s", c.a, c.b, got, c.want)
		}
		if got := top.LevelBetween(c.b, c.a); got != c.want {
			t.Errorf("level %s-%s not symmetric", c.b, c.a)
		}
	}
	cell := func(u string, depth int) string { // depth 0 = system ... 5 = board
		return strings.Split(top.Cells[u], "/")[depth]
	}
	same := func(a, b string, depth int, want bool) {
		t.Helper()
		if got := cell(a, depth) == cell(b, depth); got != want {
			t.Errorf("cells of %s (%s) and %s (%s) at depth %d: same=%v, want %v", a, top.Cells[a], b, top.Cells[b], depth, got, want)
		}
	}
	same("GPU-0", "GPU-7", 0, true)  // one system
	same("GPU-0", "GPU-3", 1, true)  // numa0
	same("GPU-0", "GPU-4", 1, false) // numa0 vs numa1
	same("GPU-4", "GPU-7", 3, true)  // 4-6 and 5-7 links join both switches into one multi-switch cell
	same("GPU-0", "GPU-2", 3, false) // no multi-switch link in numa0
	same("GPU-2", "GPU-3", 4, true)  // one switch
	same("GPU-0", "GPU-1", 5, true)  // one board
	same("GPU-2", "GPU-3", 5, false) // two boards
	// Cells nest: equal at a depth implies equal at every outer depth.
	for _, a := range top.UUIDs {
		for _, b := range top.UUIDs {
			for d := 5; d > 0; d-- {
				if cell(a, d) == cell(b, d) && cell(a, d-1) != cell(b, d-1) {
					t.Errorf("cells do not nest: %s %s", top.Cells[a], top.Cells[b])
				}
			}
		}
	}
	if !strings.HasPrefix(top.Cells["GPU-5"], "system0/numa1/") {
		t.Errorf("cell path %q", top.Cells["GPU-5"])
	}
}

const sharesConfig = `
mps_pipe_dir = "/run/mps"
mps_log_dir  = "/var/log/mps"
mps_profile {
  name   = "mps-50"
  shares = 2
}
mps_profile {
  name                     = "mps-75"
  shares                   = 1
  active_thread_percentage = 75
  memory_limit_mib         = 4096
}
mps_profile {
  name   = "mps-25"
  shares = 4
  models = ["Tesla V100-SXM2-16GB"]
}
fake {
  gpu {
    uuid = "GPU-a"
    model = "Tesla V100-SXM2-16GB"
    memory_mib = 16384
  }
  gpu {
    uuid = "GPU-b"
    model = "Tesla V100-SXM2-16GB"
    memory_mib = 16384
  }
  gpu {
    uuid = "GPU-k"
    model = "Tesla K80"
    memory_mib = 11441
  }
  gpu {
    uuid = "GPU-m"
    model = "A100-SXM4-40GB"
    memory_mib = 40960
    mig = true
  }
}
`

func TestMPSShareDevices(t *testing.T) {
	p := newPlugin(t, sharesConfig)
	_, groups, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	group(t, groups, "gpu-share", "Tesla K80-mps-50")
	g25 := group(t, groups, "gpu-share", v100+"-mps-25")
	if len(g25.Devices) != 8 {
		t.Errorf("mps-25 on two V100s: want 8 shares, got %d", len(g25.Devices))
	}
	for _, g := range groups {
		if g.Type == "gpu-share" && strings.HasPrefix(g.Name, "A100") {
			t.Errorf("MIG-enabled GPU must not get MPS shares: %s", g.Name)
		}
		if g.Type == "gpu-share" && g.Name == "Tesla K80-mps-25" {
			t.Error("mps-25 is restricted to V100")
		}
	}
	if got := attr(t, group(t, groups, "gpu-share", k80+"-mps-50"), "share_memory"); got != "5720MiB" {
		t.Errorf("K80 mps-50 share memory %s", got)
	}
}

func TestReserve(t *testing.T) {
	p := newPlugin(t, sharesConfig)
	if _, _, err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	r, err := p.Reserve([]string{"GPU-b", "GPU-a"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Envs["CUDA_VISIBLE_DEVICES"] != "GPU-b,GPU-a" || r.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-b,GPU-a" {
		t.Errorf("exclusive env %v", r.Envs)
	}
	if _, ok := r.Envs["CUDA_MPS_PIPE_DIRECTORY"]; ok {
		t.Error("exclusive GPUs must not get MPS variables")
	}

	r, err = p.Reserve([]string{"GPU-a/mps-50/1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CUDA_VISIBLE_DEVICES":              "GPU-a",
		"NVIDIA_VISIBLE_DEVICES":            "GPU-a",
		"CUDA_MPS_PIPE_DIRECTORY":           "/run/mps/GPU-a",
		"CUDA_MPS_LOG_DIRECTORY":            "/var/log/mps/GPU-a",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=8192M",
	}
	for k, v := range want {
		if r.Envs[k] != v {
			t.Errorf("share env %s = %q, want %q", k, r.Envs[k], v)
		}
	}
	if len(r.Mounts) != 1 || r.Mounts[0].HostPath != "/run/mps/GPU-a" {
		t.Errorf("share mounts %+v", r.Mounts)
	}

	// Two shares of one GPU add up; a 25% and a 75% share fill a GPU.
	r, err = p.Reserve([]string{"GPU-b/mps-25/0", "GPU-b/mps-75/0"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "100" || r.Envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] != "0=8192M" {
		t.Errorf("summed share env %v", r.Envs)
	}

	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{"GPU-zz"}, `unknown device id "GPU-zz"`},
		{[]string{"GPU-a/mps-50/2"}, `unknown device id "GPU-a/mps-50/2"`},
		{[]string{"GPU-a", "GPU-a"}, "requested twice"},
		{[]string{"GPU-a", "GPU-a/mps-50/0"}, "both exclusively and as MPS share"},
		{[]string{"GPU-b", "GPU-a/mps-50/0"}, "cannot be mixed with MPS shares"},
		{[]string{"GPU-a/mps-50/0", "GPU-b/mps-50/0"}, "shares of different GPUs"},
		{[]string{"GPU-a/mps-50/0", "GPU-a/mps-75/0"}, "125% active threads"},
		{[]string{"GPU-k/mps-50/0", "GPU-k/mps-50/1", "GPU-k/mps-75/0"}, "active threads"},
	} {
		_, err := p.Reserve(c.ids)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Reserve(%v) = %v, want error containing %q", c.ids, err, c.want)
		}
	}
}

func TestReserveMemoryOverflow(t *testing.T) {
	p := newPlugin(t, `
mps_profile {
  name = "half"
  shares = 2
  active_thread_percentage = 10
  memory_limit_mib = 8000
}
mps_profile {
  name = "tenth"
  shares = 1
  active_thread_percentage = 10
  memory_limit_mib = 8000
}
fake {
  gpu {
    uuid = "GPU-a"
    model = "T4"
    memory_mib = 15360
  }
}`)
	if _, err := p.Reserve([]string{"GPU-a/half/0", "GPU-a/tenth/0"}); err == nil || !strings.Contains(err.Error(), "16000 MiB pinned memory") {
		t.Errorf("want memory overflow refusal, got %v", err)
	}
}

// waitHealth reads fingerprints until cond holds for the group's health.
func waitHealth(t *testing.T, ch <-chan *device.FingerprintResponse, typ, name string, what string, cond func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("fingerprint channel closed")
			}
			if r.Error != nil {
				t.Fatalf("fingerprint sent an error: %v", r.Error)
			}
			for _, g := range r.Devices {
				if g.Type == typ && g.Name == name {
					if h := health(g); cond(h) {
						return h
					}
				}
			}
		case <-deadline:
			t.Fatalf("timed out waiting for: %s", what)
		}
	}
}

func TestUnhealthyFileTransitions(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "v100-1.bad")
	cfg := strings.Replace(mixed(t), `fingerprint_period = "1s"`, `fingerprint_period = "50ms"`, 1)
	cfg = strings.Replace(cfg, `pci_bus_id         = "00000000:07:00.0"`,
		`pci_bus_id         = "00000000:07:00.0"
    unhealthy_file     = "`+bad+`"`, 1)
	p := newPlugin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitHealth(t, ch, "gpu", v100, "all healthy", func(h map[string]string) bool {
		return h["GPU-v100-0"] == "ok" && h["GPU-v100-1"] == "ok"
	})
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := waitHealth(t, ch, "gpu", v100, "v100-1 unhealthy", func(h map[string]string) bool { return h["GPU-v100-1"] != "ok" })
	if h["GPU-v100-0"] != "ok" || !strings.Contains(h["GPU-v100-1"], "lost") {
		t.Errorf("health after fault: %v", h)
	}
	// Its shares follow, and its memory attribute survives.
	inv, groups, _ := p.Refresh()
	if hs := health(group(t, groups, "gpu-share", v100+"-mps-50")); hs["GPU-v100-1/mps-50/0"] == "ok" || hs["GPU-v100-0/mps-50/0"] != "ok" {
		t.Errorf("share health %v", hs)
	}
	if g := inv.gpu("GPU-v100-1"); g == nil || g.MemoryMiB != 16384 {
		t.Errorf("lost GPU lost its static facts: %+v", g)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, ch, "gpu", v100, "v100-1 recovers", func(h map[string]string) bool { return h["GPU-v100-1"] == "ok" })
}

func TestFaultDirGoneAndXid(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.Replace(mixed(t), `fingerprint_period = "1s"`, `fingerprint_period = "50ms"
xid_unhealthy_period = "1s"`, 1)
	cfg = strings.Replace(cfg, `cuda_version   = "12.2"`, `cuda_version   = "12.2"
  fault_dir      = "`+dir+`"`, 1)
	p := newPlugin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	allOK := func(h map[string]string) bool { return h["GPU-k80-0"] == "ok" && h["GPU-k80-1"] == "ok" }
	waitHealth(t, ch, "gpu", k80, "all healthy", allOK)

	// Disappearance: the GPU stays listed, unhealthy.
	gone := filepath.Join(dir, "GPU-k80-0.gone")
	if err := os.WriteFile(gone, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := waitHealth(t, ch, "gpu", k80, "k80-0 disappeared", func(h map[string]string) bool { return h["GPU-k80-0"] != "ok" })
	if !strings.Contains(h["GPU-k80-0"], "disappeared") || h["GPU-k80-1"] != "ok" {
		t.Errorf("health after disappearance: %v", h)
	}
	os.Remove(gone)
	waitHealth(t, ch, "gpu", k80, "k80-0 back", allOK)

	// An Xid critical error marks the GPU unhealthy for xid_unhealthy_period.
	if err := os.WriteFile(filepath.Join(dir, "GPU-k80-1.xid"), []byte("48\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h = waitHealth(t, ch, "gpu", k80, "xid", func(h map[string]string) bool { return h["GPU-k80-1"] != "ok" })
	if !strings.Contains(h["GPU-k80-1"], "Xid 48") {
		t.Errorf("health after xid: %v", h)
	}
	waitHealth(t, ch, "gpu", k80, "xid recovery", allOK)
	if d := time.Since(start); d < 800*time.Millisecond {
		t.Errorf("recovered after %v, before xid_unhealthy_period", d)
	}
}

type brokenLib struct{ nvml.Lib }

func (brokenLib) Init() error {
	return errors.New("nvml init: " + nvml.ErrLibraryNotFound.Error())
}

func TestNoNVMLReportsNoDevices(t *testing.T) {
	p := New(nil)
	p.newReal = func() nvml.Lib { return brokenLib{} }
	mp, err := EncodeHCL(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetConfig(&base.Config{PluginConfig: mp}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if groups := nextFingerprint(t, ch); len(groups) != 0 {
		t.Errorf("want no devices, got %d groups", len(groups))
	}
	inv, _, _ := p.Refresh()
	if !strings.Contains(inv.InitErr, "not found") {
		t.Errorf("init error %q", inv.InitErr)
	}
	if _, err := p.Reserve([]string{"GPU-x"}); err == nil {
		t.Error("Reserve on no devices must fail")
	}
}

// TestRealNVMLWithoutDriver runs the go-nvml backend as shipped: without
// libnvidia-ml it must fail Init cleanly; with a driver it must enumerate.
func TestRealNVMLWithoutDriver(t *testing.T) {
	p := newPlugin(t, "")
	inv, _, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	if inv.InitErr != "" {
		if !strings.Contains(inv.InitErr, "libnvidia-ml") {
			t.Errorf("init error should name the library: %q", inv.InitErr)
		}
		if len(inv.GPUs) != 0 {
			t.Error("devices without NVML")
		}
		return
	}
	t.Logf("NVML present: %d GPUs, driver %s", len(inv.GPUs), inv.Driver)
}

func TestStats(t *testing.T) {
	p := newPlugin(t, mixed(t))
	if _, _, err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Stats(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		var r *device.StatsResponse
		select {
		case r = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no stats")
		}
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		var sawV100, sawK80, sawShare bool
		for _, g := range r.Groups {
			for id, st := range g.InstanceStats {
				a := st.Stats.Attributes
				if a["memory_used"] == nil || a["temperature"] == nil || a["utilization"] == nil || st.Summary == nil {
					t.Errorf("%s: missing stats %v", id, a)
				}
				switch {
				case g.Type == "gpu" && g.Name == v100:
					sawV100 = true
					if a["power"] == nil || *a["power"].IntNumeratorVal != 60 {
						t.Errorf("%s power %v", id, a["power"])
					}
					if *a["memory_used"].IntDenominatorVal != 16384 {
						t.Errorf("%s memory total %v", id, *a["memory_used"].IntDenominatorVal)
					}
				case g.Type == "gpu" && g.Name == k80:
					sawK80 = true
					if a["power"] != nil {
						t.Errorf("%s: unsupported power must be left out", id)
					}
				case g.Type == "gpu-share":
					sawShare = true
				}
			}
		}
		if !sawV100 || !sawK80 || !sawShare {
			t.Errorf("stats groups v100=%v k80=%v share=%v", sawV100, sawK80, sawShare)
		}
	}
}

func TestBadConfig(t *testing.T) {
	gpu := `gpu {
    uuid = "GPU-a"
    model = "T4"
    memory_mib = 15360
  }`
	for _, c := range []struct{ name, hcl, want string }{
		{"period", `fingerprint_period = "soon"`, "fingerprint_period"},
		{"negative period", `fingerprint_period = "-1s"`, "fingerprint_period"},
		{"xid period", `xid_unhealthy_period = "x"`, "xid_unhealthy_period"},
		{"unknown key", `fingerprint_periodd = "5s"`, "fingerprint_periodd"},
		{"wrong type", `ignored_gpu_ids = 3`, "ignored_gpu_ids"},
		{"empty ignored", `ignored_gpu_ids = [""]`, "ignored_gpu_ids[0]"},
		{"profile shares", `mps_profile {
  name = "p"
  shares = 0
}`, "mps_profile[0].shares"},
		{"profile over 100", `mps_profile {
  name = "p"
  shares = 3
  active_thread_percentage = 50
}`, "mps_profile[0].active_thread_percentage"},
		{"profile dup", `mps_profile {
  name = "p"
  shares = 2
}
mps_profile {
  name = "p"
  shares = 4
}`, "mps_profile[1].name"},
		{"profile missing name", `mps_profile {
  shares = 2
}`, "name"},
		{"fake no gpus", `fake {}`, "fake.gpu"},
		{"fake memory", `fake {
  gpu {
    uuid = "GPU-a"
    model = "T4"
    memory_mib = 0
  }
}`, "fake.gpu[0].memory_mib"},
		{"fake cc", `fake {
  gpu {
    uuid = "GPU-a"
    model = "T4"
    memory_mib = 1
    compute_capability = "seven"
  }
}`, "fake.gpu[0].compute_capability"},
		{"fake dup uuid", "fake {\n" + gpu + "\n" + gpu + "\n}", "fake.gpu[1].uuid"},
		{"fake missing model", `fake {
  gpu {
    uuid = "GPU-a"
    memory_mib = 1
  }
}`, "model"},
		{"fake link gpu", "fake {\n" + gpu + "\nlink {\n a = \"GPU-a\"\n b = \"GPU-z\"\n level = \"board\"\n}\n}", "fake.link[0].b"},
		{"fake link level", "fake {\n" + gpu + "\n" + strings.Replace(gpu, "GPU-a", "GPU-b", 1) + "\nlink {\n a = \"GPU-a\"\n b = \"GPU-b\"\n level = \"close\"\n}\n}", "fake.link[0].level"},
		{"hcl syntax", `mps_profile {`, "parse config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mp, err := EncodeHCL([]byte(c.hcl))
			if err == nil {
				err = New(nil).SetConfig(&base.Config{PluginConfig: mp})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want error naming %q, got %v", c.want, err)
			}
		})
	}
}

func TestIgnoredGPUs(t *testing.T) {
	cfg := strings.Replace(mixed(t), `fingerprint_period = "1s"`, `ignored_gpu_ids = ["GPU-k80-1"]`, 1)
	p := newPlugin(t, cfg)
	_, groups, err := p.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(group(t, groups, "gpu", k80)); got != "GPU-k80-0" {
		t.Errorf("k80 ids with one ignored: %s", got)
	}
	if _, ok := group(t, groups, "gpu", v100).Attributes["GPU-v100-0.affinity"]; !ok {
		t.Fatal("no affinity")
	}
	if strings.Contains(attr(t, group(t, groups, "gpu", v100), "GPU-v100-0.affinity"), "k80-1") {
		t.Error("ignored GPU appears in affinity")
	}
}

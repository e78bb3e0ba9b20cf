package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeConfig describes the GPUs of the fake backend; it is the plugin's
// `fake { ... }` block (codec tags are the HCL names).
type FakeConfig struct {
	DriverVersion string `codec:"driver_version"`
	CudaVersion   string `codec:"cuda_version"`
	// FaultDir: while a file named by a GPU's UUID exists in it, that GPU
	// answers like a lost GPU (ErrGPULost). A file "<uuid>.xid" holding a
	// number raises one Xid critical-error event each time its content or
	// modification time changes. While a file "<uuid>.gone" exists the GPU
	// is not enumerated at all (it fell off the bus).
	FaultDir string     `codec:"fault_dir"`
	GPUs     []FakeGPU  `codec:"gpu"`
	Links    []FakeLink `codec:"link"`
}

// FakeGPU is one fake GPU. Topology comes from the shared-component fields
// (board, pcie_switch, host_bridge, numa_node) unless a link overrides a pair.
type FakeGPU struct {
	UUID              string `codec:"uuid"`
	Model             string `codec:"model"`
	MemoryMiB         int    `codec:"memory_mib"`
	ComputeCapability string `codec:"compute_capability"`
	PCIBusID          string `codec:"pci_bus_id"`
	NUMANode          int    `codec:"numa_node"` // -1: not supported (like NVML on some boards)
	Board             string `codec:"board"`
	PCIeSwitch        string `codec:"pcie_switch"`
	HostBridge        string `codec:"host_bridge"`
	MIG               bool   `codec:"mig"`
	PowerLimitW       int    `codec:"power_limit_w"` // 0: not supported
	// UnhealthyFile: while this file exists the GPU answers like a lost GPU.
	UnhealthyFile string `codec:"unhealthy_file"`
	// Facts the official plugin publishes; 0 / false: not supported (BAR1,
	// PCIe link) or disabled (modes).
	MaxSMClockMHz   int  `codec:"max_sm_clock_mhz"`
	MaxMemClockMHz  int  `codec:"max_memory_clock_mhz"`
	BAR1MiB         int  `codec:"bar1_mib"`
	PCIeGeneration  int  `codec:"pcie_generation"`
	PCIeWidth       int  `codec:"pcie_width"`
	PersistenceMode bool `codec:"persistence_mode"`
	DisplayActive   bool `codec:"display_active"`
	// ECC: the GPU counts ECC errors. The counts come from the fault
	// directory's "<uuid>.ecc" file: "L1 L2 MEMORY [UNCORRECTED]" (corrected
	// errors by location, then uncorrected); no file reads as zeros.
	ECC bool `codec:"ecc"`
	// MigDevices are the MIG instances of a GPU with mig = true.
	MigDevices []FakeMig `codec:"mig_device"`
}

// FakeMig is one MIG instance of a fake GPU.
type FakeMig struct {
	UUID              string `codec:"uuid"`
	Profile           string `codec:"profile"` // e.g. "1g.10gb"
	MemoryMiB         int    `codec:"memory_mib"`
	GPUInstanceID     int    `codec:"gpu_instance_id"`
	ComputeInstanceID int    `codec:"compute_instance_id"`
	SMCount           int    `codec:"sm_count"`
}

// FakeLink overrides the topology level between two fake GPUs.
type FakeLink struct {
	A     string `codec:"a"`
	B     string `codec:"b"`
	Level string `codec:"level"`
}

// Validate checks the fake block; errors name the offending field.
func (c *FakeConfig) Validate() error {
	if len(c.GPUs) == 0 {
		return fmt.Errorf("fake.gpu: at least one gpu block is required")
	}
	seen := map[string]int{}
	for i, g := range c.GPUs {
		f := func(field string) string { return fmt.Sprintf("fake.gpu[%d].%s", i, field) }
		if g.UUID == "" {
			return fmt.Errorf("%s: required", f("uuid"))
		}
		if j, dup := seen[g.UUID]; dup {
			return fmt.Errorf("%s: %q duplicates fake.gpu[%d]", f("uuid"), g.UUID, j)
		}
		seen[g.UUID] = i
		if g.Model == "" {
			return fmt.Errorf("%s: required", f("model"))
		}
		if g.MemoryMiB <= 0 {
			return fmt.Errorf("%s: must be > 0, got %d", f("memory_mib"), g.MemoryMiB)
		}
		if _, _, err := parseCC(g.ComputeCapability); err != nil {
			return fmt.Errorf("%s: %v", f("compute_capability"), err)
		}
		if g.NUMANode < -1 {
			return fmt.Errorf("%s: must be >= -1, got %d", f("numa_node"), g.NUMANode)
		}
		if g.PowerLimitW < 0 {
			return fmt.Errorf("%s: must be >= 0, got %d", f("power_limit_w"), g.PowerLimitW)
		}
		for _, x := range []struct {
			name string
			v    int
		}{{"max_sm_clock_mhz", g.MaxSMClockMHz}, {"max_memory_clock_mhz", g.MaxMemClockMHz},
			{"bar1_mib", g.BAR1MiB}, {"pcie_generation", g.PCIeGeneration}, {"pcie_width", g.PCIeWidth}} {
			if x.v < 0 {
				return fmt.Errorf("%s: must be >= 0, got %d", f(x.name), x.v)
			}
		}
		if len(g.MigDevices) > 0 && !g.MIG {
			return fmt.Errorf("%s: mig_device blocks need mig = true", f("mig_device"))
		}
		mem := 0
		for j, m := range g.MigDevices {
			mf := func(field string) string { return fmt.Sprintf("fake.gpu[%d].mig_device[%d].%s", i, j, field) }
			if m.UUID == "" {
				return fmt.Errorf("%s: required", mf("uuid"))
			}
			if k, dup := seen[m.UUID]; dup {
				return fmt.Errorf("%s: %q duplicates fake.gpu[%d] or one of its MIG devices", mf("uuid"), m.UUID, k)
			}
			seen[m.UUID] = i
			if m.Profile == "" {
				return fmt.Errorf("%s: required (e.g. \"1g.10gb\")", mf("profile"))
			}
			if m.MemoryMiB <= 0 {
				return fmt.Errorf("%s: must be > 0, got %d", mf("memory_mib"), m.MemoryMiB)
			}
			if m.GPUInstanceID < 0 || m.ComputeInstanceID < 0 || m.SMCount < 0 {
				return fmt.Errorf("%s: instance ids and sm_count must be >= 0", mf("gpu_instance_id"))
			}
			mem += m.MemoryMiB
		}
		if mem > g.MemoryMiB {
			return fmt.Errorf("%s: MIG devices hold %d MiB, more than the GPU's %d MiB", f("mig_device"), mem, g.MemoryMiB)
		}
	}
	for i, l := range c.Links {
		f := func(field string) string { return fmt.Sprintf("fake.link[%d].%s", i, field) }
		if _, ok := seen[l.A]; !ok {
			return fmt.Errorf("%s: unknown gpu uuid %q", f("a"), l.A)
		}
		if _, ok := seen[l.B]; !ok {
			return fmt.Errorf("%s: unknown gpu uuid %q", f("b"), l.B)
		}
		if l.A == l.B {
			return fmt.Errorf("%s: a link needs two different gpus", f("b"))
		}
		if _, err := ParseTopologyLevel(l.Level); err != nil {
			return fmt.Errorf("%s: %v", f("level"), err)
		}
	}
	return nil
}

func parseCC(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return 0, 0, fmt.Errorf("want \"major.minor\" (e.g. \"7.0\"), got %q", s)
	}
	maj, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || maj < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("want \"major.minor\" (e.g. \"7.0\"), got %q", s)
	}
	return maj, minor, nil
}

// Fake is the config-described backend.
type Fake struct {
	cfg   FakeConfig
	links map[[2]string]TopologyLevel

	mu      sync.Mutex
	xidSeen map[string]string // uuid → last seen "<mtime>/<content>" of <uuid>.xid
}

// NewFake validates cfg and returns the fake backend.
func NewFake(cfg FakeConfig) (*Fake, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Fake{cfg: cfg, links: map[[2]string]TopologyLevel{}, xidSeen: map[string]string{}}
	for _, l := range cfg.Links {
		lvl, _ := ParseTopologyLevel(l.Level)
		f.links[[2]string{l.A, l.B}] = lvl
		f.links[[2]string{l.B, l.A}] = lvl
	}
	return f, nil
}

// Init implements Lib.
func (f *Fake) Init() error { return nil }

// Shutdown implements Lib.
func (f *Fake) Shutdown() error { return nil }

// DriverVersion implements Lib.
func (f *Fake) DriverVersion() (string, error) {
	if f.cfg.DriverVersion == "" {
		return "", ErrNotSupported
	}
	return f.cfg.DriverVersion, nil
}

// CudaDriverVersion implements Lib.
func (f *Fake) CudaDriverVersion() (string, error) {
	if f.cfg.CudaVersion == "" {
		return "", ErrNotSupported
	}
	return f.cfg.CudaVersion, nil
}

// present lists the GPUs that are enumerated now (not "<uuid>.gone").
func (f *Fake) present() []*FakeGPU {
	var out []*FakeGPU
	for i := range f.cfg.GPUs {
		g := &f.cfg.GPUs[i]
		if f.cfg.FaultDir != "" && exists(filepath.Join(f.cfg.FaultDir, g.UUID+".gone")) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// DeviceCount implements Lib.
func (f *Fake) DeviceCount() (int, error) { return len(f.present()), nil }

// DeviceByIndex implements Lib.
func (f *Fake) DeviceByIndex(i int) (Device, error) {
	p := f.present()
	if i < 0 || i >= len(p) {
		return nil, fmt.Errorf("device %d: invalid index", i)
	}
	return &fakeDevice{f: f, g: p[i]}, nil
}

// WaitEvents implements Lib: it polls the fault directory for "<uuid>.xid"
// files whose content or modification time changed.
func (f *Fake) WaitEvents(timeout time.Duration) ([]Event, error) {
	if f.cfg.FaultDir == "" {
		time.Sleep(timeout)
		return nil, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		if evs := f.pollXid(); len(evs) > 0 {
			return evs, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		time.Sleep(min(100*time.Millisecond, time.Until(deadline)+time.Millisecond))
	}
}

func (f *Fake) pollXid() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs []Event
	for _, g := range f.cfg.GPUs {
		p := filepath.Join(f.cfg.FaultDir, g.UUID+".xid")
		st, err := os.Stat(p)
		if err != nil {
			delete(f.xidSeen, g.UUID)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		key := st.ModTime().String() + "/" + string(b)
		if f.xidSeen[g.UUID] == key {
			continue
		}
		f.xidSeen[g.UUID] = key
		xid, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			xid = 79 // "GPU has fallen off the bus"
		}
		evs = append(evs, Event{UUID: g.UUID, Xid: xid})
	}
	return evs
}

type fakeDevice struct {
	f *Fake
	g *FakeGPU
}

func exists(p string) bool {
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// lost reports whether fault injection marks the GPU as lost.
func (d *fakeDevice) lost() bool {
	if exists(d.g.UnhealthyFile) {
		return true
	}
	return d.f.cfg.FaultDir != "" && exists(filepath.Join(d.f.cfg.FaultDir, d.g.UUID))
}

func (d *fakeDevice) dyn(op string) error {
	if d.lost() {
		return fmt.Errorf("%s: %w", op, ErrGPULost)
	}
	return nil
}

func (d *fakeDevice) UUID() (string, error) { return d.g.UUID, nil }
func (d *fakeDevice) Name() (string, error) { return d.g.Model, nil }

func (d *fakeDevice) MemoryInfo() (Memory, error) {
	if err := d.dyn("memory info"); err != nil {
		return Memory{}, err
	}
	total := uint64(d.g.MemoryMiB) << 20
	used := total / 16
	return Memory{Total: total, Used: used, Free: total - used}, nil
}

func (d *fakeDevice) CudaComputeCapability() (int, int, error) {
	return parseCC(d.g.ComputeCapability)
}

func (d *fakeDevice) PciBusID() (string, error) {
	if d.g.PCIBusID == "" {
		return "", fmt.Errorf("pci info: %w", ErrNotSupported)
	}
	return d.g.PCIBusID, nil
}

func (d *fakeDevice) NumaNode() (int, error) {
	if d.g.NUMANode < 0 {
		return 0, fmt.Errorf("numa node: %w", ErrNotSupported)
	}
	return d.g.NUMANode, nil
}

func (d *fakeDevice) MigEnabled() (bool, error) { return d.g.MIG, nil }

func (d *fakeDevice) TopologyCommonAncestor(other Device) (TopologyLevel, error) {
	o, ok := other.(*fakeDevice)
	if !ok {
		return 0, fmt.Errorf("topology: devices from different backends")
	}
	if err := d.dyn("topology common ancestor"); err != nil {
		return 0, err
	}
	if l, ok := d.f.links[[2]string{d.g.UUID, o.g.UUID}]; ok {
		return l, nil
	}
	a, b := d.g, o.g
	switch {
	case a.Board != "" && a.Board == b.Board:
		return TopologyInternal, nil
	case a.PCIeSwitch != "" && a.PCIeSwitch == b.PCIeSwitch:
		return TopologySingle, nil
	case a.HostBridge != "" && a.HostBridge == b.HostBridge:
		return TopologyHostBridge, nil
	case a.NUMANode >= 0 && a.NUMANode == b.NUMANode:
		return TopologyNode, nil
	}
	return TopologySystem, nil
}

func (d *fakeDevice) Utilization() (Utilization, error) {
	if err := d.dyn("utilization"); err != nil {
		return Utilization{}, err
	}
	return Utilization{GPU: 0, Memory: 0}, nil
}

func (d *fakeDevice) PowerUsageMilliwatts() (uint32, error) {
	if err := d.dyn("power usage"); err != nil {
		return 0, err
	}
	if d.g.PowerLimitW == 0 {
		return 0, fmt.Errorf("power usage: %w", ErrNotSupported)
	}
	return uint32(d.g.PowerLimitW) * 1000 / 5, nil
}

func (d *fakeDevice) PowerLimitMilliwatts() (uint32, error) {
	if d.g.PowerLimitW == 0 {
		return 0, fmt.Errorf("power limit: %w", ErrNotSupported)
	}
	return uint32(d.g.PowerLimitW) * 1000, nil
}

func (d *fakeDevice) TemperatureC() (uint32, error) {
	if err := d.dyn("temperature"); err != nil {
		return 0, err
	}
	return 35, nil
}

func (d *fakeDevice) ClockSMMHz() (uint32, error) {
	return 0, fmt.Errorf("sm clock: %w", ErrNotSupported)
}

func (d *fakeDevice) MaxClockSMMHz() (uint32, error) {
	if d.g.MaxSMClockMHz == 0 {
		return 0, fmt.Errorf("max sm clock: %w", ErrNotSupported)
	}
	return uint32(d.g.MaxSMClockMHz), nil
}

func (d *fakeDevice) MaxClockMemMHz() (uint32, error) {
	if d.g.MaxMemClockMHz == 0 {
		return 0, fmt.Errorf("max memory clock: %w", ErrNotSupported)
	}
	return uint32(d.g.MaxMemClockMHz), nil
}

func (d *fakeDevice) BAR1MemoryMiB() (uint64, uint64, error) {
	if d.g.BAR1MiB == 0 {
		return 0, 0, fmt.Errorf("bar1 memory: %w", ErrNotSupported)
	}
	if err := d.dyn("bar1 memory"); err != nil {
		return 0, 0, err
	}
	return uint64(d.g.BAR1MiB), 2, nil
}

func (d *fakeDevice) MaxPcieLink() (int, int, error) {
	if d.g.PCIeGeneration == 0 || d.g.PCIeWidth == 0 {
		return 0, 0, fmt.Errorf("max pcie link: %w", ErrNotSupported)
	}
	return d.g.PCIeGeneration, d.g.PCIeWidth, nil
}

func (d *fakeDevice) DisplayActive() (bool, error)   { return d.g.DisplayActive, nil }
func (d *fakeDevice) PersistenceMode() (bool, error) { return d.g.PersistenceMode, nil }

func (d *fakeDevice) EncoderUtilization() (uint32, error) {
	return 0, d.dyn("encoder utilization")
}

func (d *fakeDevice) DecoderUtilization() (uint32, error) {
	return 0, d.dyn("decoder utilization")
}

func (d *fakeDevice) ECCErrors() (ECCCounts, error) {
	if !d.g.ECC {
		return ECCCounts{}, fmt.Errorf("ecc: %w", ErrNotSupported)
	}
	if err := d.dyn("ecc"); err != nil {
		return ECCCounts{}, err
	}
	var c ECCCounts
	dst := []*uint64{&c.L1, &c.L2, &c.Memory, &c.Uncorrected}
	if d.f.cfg.FaultDir == "" {
		return c, nil
	}
	b, err := os.ReadFile(filepath.Join(d.f.cfg.FaultDir, d.g.UUID+".ecc"))
	if err != nil {
		return c, nil
	}
	for i, field := range strings.Fields(string(b)) {
		n, err := strconv.ParseUint(field, 10, 64)
		if err != nil || i >= len(dst) {
			return ECCCounts{}, fmt.Errorf("ecc: %s.ecc: want \"L1 L2 MEMORY [UNCORRECTED]\" counts, got %q", d.g.UUID, strings.TrimSpace(string(b)))
		}
		*dst[i] = n
	}
	return c, nil
}

func (d *fakeDevice) MigDevices() ([]MigDevice, error) {
	if !d.g.MIG {
		return nil, nil
	}
	if err := d.dyn("mig devices"); err != nil {
		return nil, err
	}
	out := make([]MigDevice, 0, len(d.g.MigDevices))
	for i := range d.g.MigDevices {
		m := &d.g.MigDevices[i]
		out = append(out, MigDevice{Device: &fakeMig{fakeDevice: d, m: m},
			GPUInstanceID: m.GPUInstanceID, ComputeInstanceID: m.ComputeInstanceID, SMCount: m.SMCount})
	}
	return out, nil
}

// fakeMig is a MIG instance: its own uuid, name and memory; like NVML, no
// per-instance utilization, power or temperature; lost with its GPU.
type fakeMig struct {
	*fakeDevice
	m *FakeMig
}

func (d *fakeMig) UUID() (string, error) { return d.m.UUID, nil }
func (d *fakeMig) Name() (string, error) { return d.g.Model + " MIG " + d.m.Profile, nil }

func (d *fakeMig) MemoryInfo() (Memory, error) {
	if err := d.dyn("memory info"); err != nil {
		return Memory{}, err
	}
	total := uint64(d.m.MemoryMiB) << 20
	return Memory{Total: total, Used: total / 32, Free: total - total/32}, nil
}

func (d *fakeMig) Utilization() (Utilization, error) {
	return Utilization{}, fmt.Errorf("utilization: %w", ErrNotSupported)
}

func (d *fakeMig) PowerUsageMilliwatts() (uint32, error) {
	return 0, fmt.Errorf("power usage: %w", ErrNotSupported)
}

func (d *fakeMig) TemperatureC() (uint32, error) {
	return 0, fmt.Errorf("temperature: %w", ErrNotSupported)
}

func (d *fakeMig) MigDevices() ([]MigDevice, error) { return nil, nil }

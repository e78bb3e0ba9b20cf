package deviceplugin

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"
	"github.com/rondo-sched/rondo/device-plugin/nvml"
)

// Names Nomad sees.
const (
	Vendor        = "nvidia"
	TypeGPU       = device.DeviceTypeGPU // "gpu": one exclusive GPU per instance
	TypeGPUShare  = "gpu-share"          // one MPS share of a GPU per instance
	shareIDSep    = "/"                  // share id: "<gpu uuid>/<profile>/<k>"
	levelsAttrVal = "board,pcie-switch,pcie-multi-switch,host-bridge,numa,system"
)

// GPU is what one scan learnt about one GPU.
type GPU struct {
	Index       int
	UUID        string
	Model       string
	MemoryMiB   uint64
	CC          string // "major.minor"; "" when unknown
	PCIBusID    string
	NUMA        int // -1 when NVML does not report it
	MIG         bool
	PowerLimitW uint32 // 0 when unknown
	MaxSMMHz    uint32
	MaxMemMHz   uint32
	BAR1MiB     uint64 // 0 when unknown
	PCIeMBps    uint64 // maximum PCIe bandwidth; 0 when unknown
	Persistence string // "Enabled", "Disabled"; "" when unknown
	Display     string
	// MIGs are the MIG instances of a GPU in MIG mode: Nomad gets them as
	// devices, and not the GPU itself (CUDA sees no device on a MIG-mode
	// GPU handed out whole).
	MIGs         []*MIGInstance
	Missing      bool   // known from an earlier scan but no longer enumerated
	LostErr      string // the probe failed with ErrGPULost
	XidHealthMsg string // a recent Xid critical error

	dev nvml.Device
}

// Healthy reports the GPU's health and why not.
func (g *GPU) Healthy() (bool, string) {
	switch {
	case g.Missing:
		return false, "GPU disappeared: no longer enumerated by NVML"
	case g.LostErr != "":
		return false, "GPU lost: " + g.LostErr
	case g.XidHealthMsg != "":
		return false, g.XidHealthMsg
	}
	return true, ""
}

// MIGInstance is one MIG device of a GPU.
type MIGInstance struct {
	UUID              string // "MIG-..."
	Name              string // "<model> MIG <profile>": its Nomad device name, as the official plugin's
	Profile           string // "1g.10gb"
	MemoryMiB         uint64
	GPUInstanceID     int
	ComputeInstanceID int
	SMCount           int
	parent            *GPU
	dev               nvml.Device
}

// migProfile is the profile part of a MIG device name ("... MIG 1g.10gb").
func migProfile(name string) string {
	if i := strings.LastIndex(name, " MIG "); i >= 0 {
		return name[i+len(" MIG "):]
	}
	return name
}

// pcieMBps is a link's maximum PCIe bandwidth in MB/s: width x 1024 x
// {gen 3: 1, 4: 2, 5: 3, 6: 4}, the official plugin's table (kept as is so
// constraints on pci_bandwidth keep their meaning); other generations are
// unknown (0).
func pcieMBps(gen, width int) uint64 {
	perLane := map[int]uint64{3: 1, 4: 2, 5: 3, 6: 4}[gen]
	if width <= 0 {
		return 0
	}
	return uint64(width) * 1024 * perLane
}

func enabledString(on bool) string {
	if on {
		return "Enabled"
	}
	return "Disabled"
}

// Topology holds the pairwise common-ancestor levels and the cell tree built
// from them.
type Topology struct {
	UUIDs []string                         // in NVML index order
	Level map[[2]string]nvml.TopologyLevel // both orders present
	// Cells maps a GPU uuid to its cell path, outermost first:
	// "system0/numa0/host-bridge0/pcie-multi-switch0/pcie-switch0/board0".
	Cells map[string]string
}

// LevelBetween returns the level between a and b (TopologySystem if unknown).
func (t *Topology) LevelBetween(a, b string) nvml.TopologyLevel {
	if l, ok := t.Level[[2]string{a, b}]; ok {
		return l
	}
	return nvml.TopologySystem
}

// buildCells groups GPUs into nested cells: at each level L, GPUs whose
// common ancestor is at L or closer are in one cell (single linkage, so the
// cells always nest even if NVML answers are not a perfect tree).
func buildCells(uuids []string, level func(a, b string) nvml.TopologyLevel) map[string]string {
	n := len(uuids)
	paths := make([][]string, n)
	for li := len(nvml.Levels) - 1; li >= 0; li-- {
		lvl := nvml.Levels[li]
		parent := make([]int, n)
		for i := range parent {
			parent[i] = i
		}
		var find func(int) int
		find = func(i int) int {
			for parent[i] != i {
				parent[i] = parent[parent[i]]
				i = parent[i]
			}
			return i
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if level(uuids[i], uuids[j]) <= lvl {
					parent[find(j)] = find(i)
				}
			}
		}
		ordinal := map[int]int{}
		for i := 0; i < n; i++ {
			r := find(i)
			k, ok := ordinal[r]
			if !ok {
				k = len(ordinal)
				ordinal[r] = k
			}
			paths[i] = append(paths[i], fmt.Sprintf("%s%d", lvl, k))
		}
	}
	out := make(map[string]string, n)
	for i, u := range uuids {
		out[u] = strings.Join(paths[i], "/")
	}
	return out
}

// Inventory is one full view of the node's GPUs.
type Inventory struct {
	Driver   string
	Cuda     string
	GPUs     []*GPU
	Topology *Topology
	InitErr  string // NVML could not be initialised: no devices
}

func (inv *Inventory) gpu(uuid string) *GPU {
	for _, g := range inv.GPUs {
		if g.UUID == uuid {
			return g
		}
	}
	return nil
}

// share is one MPS share device.
type share struct {
	gpu     *GPU
	profile MPSProfile
	k       int
	memMiB  uint64
}

func shareID(uuid, profile string, k int) string {
	return strings.Join([]string{uuid, profile, fmt.Sprint(k)}, shareIDSep)
}

// profileApplies: MPS shares are offered on healthy-or-not, non-MIG GPUs of
// the profile's models.
func profileApplies(p MPSProfile, g *GPU) bool {
	if g.MIG {
		return false
	}
	if len(p.Models) == 0 {
		return true
	}
	for _, m := range p.Models {
		if m == g.Model {
			return true
		}
	}
	return false
}

func shareMemMiB(p MPSProfile, g *GPU) uint64 {
	if p.MemoryLimitMiB > 0 {
		return uint64(p.MemoryLimitMiB)
	}
	return g.MemoryMiB / uint64(p.Shares)
}

// shares lists every share device of the inventory, by id.
func (inv *Inventory) shares(profiles []MPSProfile) map[string]share {
	out := map[string]share{}
	for _, p := range profiles {
		for _, g := range inv.GPUs {
			if !profileApplies(p, g) {
				continue
			}
			for k := 0; k < p.Shares; k++ {
				out[shareID(g.UUID, p.Name, k)] = share{gpu: g, profile: p, k: k, memMiB: shareMemMiB(p, g)}
			}
		}
	}
	return out
}

// Groups renders the inventory as Nomad device groups: one "gpu" group per
// model (GPUs in MIG mode left out), one "gpu" group per MIG device name
// (the official plugin's "<model> MIG <profile>"), and one "gpu-share" group
// per (model, MPS profile). Attributes are per group in Nomad, so per-device
// facts are keyed by the device's uuid: "<uuid>.cell", "<uuid>.affinity",
// "<uuid>.numa_node", "<mig uuid>.parent", ...
func (inv *Inventory) Groups(profiles []MPSProfile, mpsAvailable func(uuid string) bool) []*device.DeviceGroup {
	var models, migNames []string
	byModel := map[string][]*GPU{}
	byMIG := map[string][]*MIGInstance{}
	for _, g := range inv.GPUs {
		if g.MIG {
			for _, m := range g.MIGs {
				if _, ok := byMIG[m.Name]; !ok {
					migNames = append(migNames, m.Name)
				}
				byMIG[m.Name] = append(byMIG[m.Name], m)
			}
			continue
		}
		if _, ok := byModel[g.Model]; !ok {
			models = append(models, g.Model)
		}
		byModel[g.Model] = append(byModel[g.Model], g)
	}
	var groups []*device.DeviceGroup
	for _, m := range models {
		gpus := byModel[m]
		attrs := inv.commonAttrs(gpus)
		for _, g := range gpus {
			inv.perGPUAttrs(attrs, g, g.UUID, mpsAvailable)
		}
		grp := &device.DeviceGroup{Vendor: Vendor, Type: TypeGPU, Name: m, Attributes: attrs}
		for _, g := range gpus {
			grp.Devices = append(grp.Devices, instance(g, g.UUID))
		}
		groups = append(groups, grp)
	}
	for _, name := range migNames {
		migs := byMIG[name]
		var parents []*GPU
		for _, m := range migs {
			parents = append(parents, m.parent)
		}
		attrs := inv.commonAttrs(parents)
		attrs["model"] = structs.NewStringAttribute(name)
		attrs["parent_model"] = structs.NewStringAttribute(parents[0].Model)
		attrs["mig_profile"] = structs.NewStringAttribute(migs[0].Profile)
		attrs["memory"] = structs.NewIntAttribute(int64(migs[0].MemoryMiB), structs.UnitMiB)
		if migs[0].SMCount > 0 {
			attrs["multiprocessors"] = structs.NewIntAttribute(int64(migs[0].SMCount), "")
		}
		grp := &device.DeviceGroup{Vendor: Vendor, Type: TypeGPU, Name: name, Attributes: attrs}
		for _, m := range migs {
			inv.perGPUAttrs(attrs, m.parent, m.UUID, nil)
			k := func(s string) string { return m.UUID + "." + s }
			attrs[k("parent")] = structs.NewStringAttribute(m.parent.UUID)
			attrs[k("gpu_instance_id")] = structs.NewIntAttribute(int64(m.GPUInstanceID), "")
			attrs[k("compute_instance_id")] = structs.NewIntAttribute(int64(m.ComputeInstanceID), "")
			grp.Devices = append(grp.Devices, instance(m.parent, m.UUID))
		}
		groups = append(groups, grp)
	}
	for _, p := range profiles {
		for _, m := range models {
			var gpus []*GPU
			for _, g := range byModel[m] {
				if profileApplies(p, g) {
					gpus = append(gpus, g)
				}
			}
			if len(gpus) == 0 {
				continue
			}
			attrs := inv.commonAttrs(gpus)
			attrs["mps_profile"] = structs.NewStringAttribute(p.Name)
			attrs["shares_per_gpu"] = structs.NewIntAttribute(int64(p.Shares), "")
			attrs["active_thread_percentage"] = structs.NewIntAttribute(int64(p.ActiveThreadPercentage), "")
			attrs["share_memory"] = structs.NewIntAttribute(int64(shareMemMiB(p, gpus[0])), structs.UnitMiB)
			grp := &device.DeviceGroup{Vendor: Vendor, Type: TypeGPUShare, Name: m + "-" + p.Name, Attributes: attrs}
			for _, g := range gpus {
				inv.perGPUAttrs(attrs, g, g.UUID, mpsAvailable)
				for k := 0; k < p.Shares; k++ {
					grp.Devices = append(grp.Devices, instance(g, shareID(g.UUID, p.Name, k)))
				}
			}
			groups = append(groups, grp)
		}
	}
	return groups
}

// instance is one Nomad device: a GPU, a MIG instance or a share, healthy
// as its GPU is.
func instance(g *GPU, id string) *device.Device {
	ok, desc := g.Healthy()
	d := &device.Device{ID: id, Healthy: ok, HealthDesc: desc}
	if g.PCIBusID != "" {
		d.HwLocality = &device.DeviceLocality{PciBusID: g.PCIBusID}
	}
	return d
}

// commonAttrs are the group-wide attributes: Rondo's names and, beside
// them, the official nomad-device-nvidia's (power, cores_clock,
// memory_clock, bar1, pci_bandwidth, persistence_mode, display_state), so
// constraints written for either keep matching. Model-wide facts come from
// the first GPU that knows them.
func (inv *Inventory) commonAttrs(gpus []*GPU) map[string]*structs.Attribute {
	attrs := map[string]*structs.Attribute{
		"model":           structs.NewStringAttribute(gpus[0].Model),
		"topology_levels": structs.NewStringAttribute(levelsAttrVal),
	}
	if inv.Driver != "" {
		attrs["driver_version"] = structs.NewStringAttribute(inv.Driver)
	}
	if inv.Cuda != "" {
		attrs["cuda_version"] = structs.NewStringAttribute(inv.Cuda)
	}
	set := func(name string, a *structs.Attribute) {
		if _, ok := attrs[name]; !ok {
			attrs[name] = a
		}
	}
	for _, g := range gpus {
		if g.MemoryMiB > 0 {
			set("memory", structs.NewIntAttribute(int64(g.MemoryMiB), structs.UnitMiB))
		}
		if g.CC != "" {
			set("compute_capability", structs.NewStringAttribute(g.CC))
		}
		if g.PowerLimitW > 0 {
			set("power_limit", structs.NewIntAttribute(int64(g.PowerLimitW), structs.UnitW))
			set("power", structs.NewIntAttribute(int64(g.PowerLimitW), structs.UnitW))
		}
		if g.MaxSMMHz > 0 {
			set("max_sm_clock", structs.NewIntAttribute(int64(g.MaxSMMHz), structs.UnitMHz))
			set("cores_clock", structs.NewIntAttribute(int64(g.MaxSMMHz), structs.UnitMHz))
		}
		if g.MaxMemMHz > 0 {
			set("max_memory_clock", structs.NewIntAttribute(int64(g.MaxMemMHz), structs.UnitMHz))
			set("memory_clock", structs.NewIntAttribute(int64(g.MaxMemMHz), structs.UnitMHz))
		}
		if g.BAR1MiB > 0 {
			set("bar1", structs.NewIntAttribute(int64(g.BAR1MiB), structs.UnitMiB))
		}
		if g.PCIeMBps > 0 {
			set("pci_bandwidth", structs.NewIntAttribute(int64(g.PCIeMBps), structs.UnitMBPerS))
		}
		if g.Persistence != "" {
			set("persistence_mode", structs.NewStringAttribute(g.Persistence))
		}
		if g.Display != "" {
			set("display_state", structs.NewStringAttribute(g.Display))
		}
	}
	return attrs
}

// perGPUAttrs writes g's per-device facts keyed by id (g's uuid, or the uuid
// of one of its MIG instances).
func (inv *Inventory) perGPUAttrs(attrs map[string]*structs.Attribute, g *GPU, id string, mpsAvailable func(string) bool) {
	k := func(s string) string { return id + "." + s }
	attrs[k("index")] = structs.NewIntAttribute(int64(g.Index), "")
	if g.NUMA >= 0 {
		attrs[k("numa_node")] = structs.NewIntAttribute(int64(g.NUMA), "")
	}
	if g.PCIBusID != "" {
		attrs[k("pci_bus_id")] = structs.NewStringAttribute(g.PCIBusID)
	}
	attrs[k("mig")] = structs.NewBoolAttribute(g.MIG)
	if mpsAvailable != nil {
		attrs[k("mps")] = structs.NewBoolAttribute(mpsAvailable(g.UUID))
	}
	if inv.Topology != nil {
		if c, ok := inv.Topology.Cells[g.UUID]; ok {
			attrs[k("cell")] = structs.NewStringAttribute(c)
		}
		var aff []string
		for _, o := range inv.Topology.UUIDs {
			if o != g.UUID {
				aff = append(aff, o+"="+inv.Topology.LevelBetween(g.UUID, o).String())
			}
		}
		if len(aff) > 0 {
			attrs[k("affinity")] = structs.NewStringAttribute(strings.Join(aff, ","))
		}
	}
}

// scanBackend enumerates GPUs through lib. prev (may be nil) supplies facts
// about GPUs that are now missing or lost, so they stay visible as unhealthy.
func scanBackend(lib nvml.Lib, ignored map[string]bool, prev *Inventory) *Inventory {
	inv := &Inventory{}
	if v, err := lib.DriverVersion(); err == nil {
		inv.Driver = v
	}
	if v, err := lib.CudaDriverVersion(); err == nil {
		inv.Cuda = v
	}
	n, err := lib.DeviceCount()
	if err != nil {
		n = 0
	}
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		d, err := lib.DeviceByIndex(i)
		if err != nil {
			continue
		}
		uuid, err := d.UUID()
		if err != nil || uuid == "" || ignored[uuid] || seen[uuid] {
			continue
		}
		seen[uuid] = true
		g := &GPU{Index: i, UUID: uuid, NUMA: -1, dev: d}
		var old *GPU
		if prev != nil {
			old = prev.gpu(uuid)
		}
		g.Model, _ = d.Name()
		if g.Model == "" && old != nil {
			g.Model = old.Model
		}
		if g.Model == "" {
			g.Model = "unknown"
		}
		mem, err := d.MemoryInfo()
		switch {
		case err == nil:
			g.MemoryMiB = mem.Total >> 20
		case errors.Is(err, nvml.ErrGPULost):
			g.LostErr = err.Error()
			if old != nil {
				g.MemoryMiB = old.MemoryMiB
			}
		}
		if maj, min, err := d.CudaComputeCapability(); err == nil {
			g.CC = fmt.Sprintf("%d.%d", maj, min)
		}
		g.PCIBusID, _ = d.PciBusID()
		if numa, err := d.NumaNode(); err == nil {
			g.NUMA = numa
		}
		g.MIG, _ = d.MigEnabled()
		if p, err := d.PowerLimitMilliwatts(); err == nil {
			g.PowerLimitW = p / 1000
		}
		g.MaxSMMHz, _ = d.MaxClockSMMHz()
		g.MaxMemMHz, _ = d.MaxClockMemMHz()
		if t, _, err := d.BAR1MemoryMiB(); err == nil {
			g.BAR1MiB = t
		}
		if gen, w, err := d.MaxPcieLink(); err == nil {
			g.PCIeMBps = pcieMBps(gen, w)
		}
		if on, err := d.PersistenceMode(); err == nil {
			g.Persistence = enabledString(on)
		}
		if on, err := d.DisplayActive(); err == nil {
			g.Display = enabledString(on)
		}
		if g.MIG {
			g.MIGs = scanMIG(d, g, old)
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	if prev != nil {
		for _, old := range prev.GPUs {
			if !seen[old.UUID] && !ignored[old.UUID] {
				g := *old
				g.Missing, g.dev = true, nil
				g.MIGs = rebaseMIG(old.MIGs, &g)
				inv.GPUs = append(inv.GPUs, &g)
			}
		}
	}
	sort.SliceStable(inv.GPUs, func(i, j int) bool { return inv.GPUs[i].Index < inv.GPUs[j].Index })
	inv.Topology = scanTopology(inv.GPUs, prev)
	return inv
}

// scanMIG lists a MIG-mode GPU's instances. A lost GPU keeps the instances
// an earlier scan saw (so they stay visible, unhealthy).
func scanMIG(d nvml.Device, g *GPU, old *GPU) []*MIGInstance {
	migs, err := d.MigDevices()
	if err != nil {
		if old != nil {
			return rebaseMIG(old.MIGs, g)
		}
		return nil
	}
	var out []*MIGInstance
	for _, m := range migs {
		uuid, err := m.UUID()
		if err != nil || uuid == "" {
			continue
		}
		name, _ := m.Name()
		if name == "" {
			name = g.Model + " MIG"
		}
		mi := &MIGInstance{UUID: uuid, Name: name, Profile: migProfile(name),
			GPUInstanceID: m.GPUInstanceID, ComputeInstanceID: m.ComputeInstanceID, SMCount: m.SMCount,
			parent: g, dev: m.Device}
		if mem, err := m.MemoryInfo(); err == nil {
			mi.MemoryMiB = mem.Total >> 20
		}
		out = append(out, mi)
	}
	return out
}

// rebaseMIG copies MIG instances onto a new GPU value.
func rebaseMIG(migs []*MIGInstance, g *GPU) []*MIGInstance {
	out := make([]*MIGInstance, len(migs))
	for i, m := range migs {
		c := *m
		c.parent, c.dev = g, nil
		out[i] = &c
	}
	return out
}

// mig finds a MIG instance by uuid.
func (inv *Inventory) mig(uuid string) *MIGInstance {
	for _, g := range inv.GPUs {
		for _, m := range g.MIGs {
			if m.UUID == uuid {
				return m
			}
		}
	}
	return nil
}

func scanTopology(gpus []*GPU, prev *Inventory) *Topology {
	t := &Topology{Level: map[[2]string]nvml.TopologyLevel{}}
	for _, g := range gpus {
		t.UUIDs = append(t.UUIDs, g.UUID)
	}
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			var lvl nvml.TopologyLevel
			var err error = errors.New("unavailable")
			if a.dev != nil && b.dev != nil {
				lvl, err = a.dev.TopologyCommonAncestor(b.dev)
			}
			if err != nil {
				// Keep what an earlier scan knew; else assume the farthest.
				lvl = nvml.TopologySystem
				if prev != nil && prev.Topology != nil {
					lvl = prev.Topology.LevelBetween(a.UUID, b.UUID)
				}
			}
			t.Level[[2]string{a.UUID, b.UUID}] = lvl
			t.Level[[2]string{b.UUID, a.UUID}] = lvl
		}
	}
	t.Cells = buildCells(t.UUIDs, t.LevelBetween)
	return t
}

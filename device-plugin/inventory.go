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
	Index        int
	UUID         string
	Model        string
	MemoryMiB    uint64
	CC           string // "major.minor"; "" when unknown
	PCIBusID     string
	NUMA         int // -1 when NVML does not report it
	MIG          bool
	PowerLimitW  uint32 // 0 when unknown
	MaxSMMHz     uint32
	MaxMemMHz    uint32
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
// model and one "gpu-share" group per (model, MPS profile). Attributes are per
// group in Nomad, so per-GPU facts are keyed by the GPU's uuid:
// "<uuid>.cell", "<uuid>.affinity", "<uuid>.numa_node", ...
func (inv *Inventory) Groups(profiles []MPSProfile, mpsAvailable func(uuid string) bool) []*device.DeviceGroup {
	var models []string
	byModel := map[string][]*GPU{}
	for _, g := range inv.GPUs {
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
			inv.perGPUAttrs(attrs, g, mpsAvailable)
		}
		grp := &device.DeviceGroup{Vendor: Vendor, Type: TypeGPU, Name: m, Attributes: attrs}
		for _, g := range gpus {
			grp.Devices = append(grp.Devices, instance(g, g.UUID))
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
				inv.perGPUAttrs(attrs, g, mpsAvailable)
				for k := 0; k < p.Shares; k++ {
					grp.Devices = append(grp.Devices, instance(g, shareID(g.UUID, p.Name, k)))
				}
			}
			groups = append(groups, grp)
		}
	}
	return groups
}

func instance(g *GPU, id string) *device.Device {
	ok, desc := g.Healthy()
	d := &device.Device{ID: id, Healthy: ok, HealthDesc: desc}
	if g.PCIBusID != "" {
		d.HwLocality = &device.DeviceLocality{PciBusID: g.PCIBusID}
	}
	return d
}

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
	// Model-wide facts come from the first GPU that knows them.
	for _, g := range gpus {
		if _, ok := attrs["memory"]; !ok && g.MemoryMiB > 0 {
			attrs["memory"] = structs.NewIntAttribute(int64(g.MemoryMiB), structs.UnitMiB)
		}
		if _, ok := attrs["compute_capability"]; !ok && g.CC != "" {
			attrs["compute_capability"] = structs.NewStringAttribute(g.CC)
		}
		if _, ok := attrs["power_limit"]; !ok && g.PowerLimitW > 0 {
			attrs["power_limit"] = structs.NewIntAttribute(int64(g.PowerLimitW), structs.UnitW)
		}
		if _, ok := attrs["max_sm_clock"]; !ok && g.MaxSMMHz > 0 {
			attrs["max_sm_clock"] = structs.NewIntAttribute(int64(g.MaxSMMHz), structs.UnitMHz)
		}
		if _, ok := attrs["max_memory_clock"]; !ok && g.MaxMemMHz > 0 {
			attrs["max_memory_clock"] = structs.NewIntAttribute(int64(g.MaxMemMHz), structs.UnitMHz)
		}
	}
	return attrs
}

func (inv *Inventory) perGPUAttrs(attrs map[string]*structs.Attribute, g *GPU, mpsAvailable func(string) bool) {
	k := func(s string) string { return g.UUID + "." + s }
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
		inv.GPUs = append(inv.GPUs, g)
	}
	if prev != nil {
		for _, old := range prev.GPUs {
			if !seen[old.UUID] && !ignored[old.UUID] {
				g := *old
				g.Missing, g.dev = true, nil
				inv.GPUs = append(inv.GPUs, &g)
			}
		}
	}
	sort.SliceStable(inv.GPUs, func(i, j int) bool { return inv.GPUs[i].Index < inv.GPUs[j].Index })
	inv.Topology = scanTopology(inv.GPUs, prev)
	return inv
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

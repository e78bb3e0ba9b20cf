package deviceplugin

import (
	"sort"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
)

// Report is what `nomad-device-rondo fingerprint` prints as JSON.
type Report struct {
	Backend string `json:"backend"` // "nvml" or "fake"
	// Disabled: the config says enabled = false; nothing was scanned.
	Disabled  bool              `json:"disabled,omitempty"`
	InitError string            `json:"init_error,omitempty"`
	Driver    string            `json:"driver_version,omitempty"`
	Cuda      string            `json:"cuda_version,omitempty"`
	GPUs      []ReportGPU       `json:"gpus"`
	Affinity  map[string]string `json:"affinity,omitempty"` // "<uuid a> <uuid b>" → level
	Cells     map[string]string `json:"cells,omitempty"`
	Groups    []ReportGroup     `json:"device_groups"`
	Stats     map[string]any    `json:"stats,omitempty"` // "<uuid>" → {stat: "value unit"}
	// XidEvents says whether the backend accepted the Xid critical-error
	// event registration: "registered", or why not.
	XidEvents string `json:"xid_events,omitempty"`
}

// ReportGPU is one GPU in a Report.
type ReportGPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryMiB   uint64 `json:"memory_mib"`
	CC          string `json:"compute_capability,omitempty"`
	PCIBusID    string `json:"pci_bus_id,omitempty"`
	NUMA        int    `json:"numa_node"`
	MIG         bool   `json:"mig"`
	PowerLimitW uint32 `json:"power_limit_w,omitempty"`
	Healthy     bool   `json:"healthy"`
	Health      string `json:"health,omitempty"`
	// MIG instances of a GPU in MIG mode.
	MIGs []ReportMIG `json:"mig_devices,omitempty"`
}

// ReportMIG is one MIG instance in a Report.
type ReportMIG struct {
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	Profile           string `json:"profile"`
	MemoryMiB         uint64 `json:"memory_mib"`
	GPUInstanceID     int    `json:"gpu_instance_id"`
	ComputeInstanceID int    `json:"compute_instance_id"`
	SMCount           int    `json:"sm_count,omitempty"`
}

// ReportGroup is one Nomad device group in a Report.
type ReportGroup struct {
	ID         string            `json:"id"` // vendor/type/name
	Instances  []string          `json:"instances"`
	Unhealthy  map[string]string `json:"unhealthy,omitempty"`
	Attributes map[string]string `json:"attributes"`
}

// FingerprintReport runs one fingerprint and one stats sample.
func (p *Plugin) FingerprintReport() (*Report, error) {
	if s, _, err := p.settings(); err == nil && !s.Enabled {
		return &Report{Backend: "nvml", Disabled: true, GPUs: []ReportGPU{}, Groups: []ReportGroup{}}, nil
	}
	inv, groups, err := p.Refresh()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	r := &Report{Backend: "nvml"}
	if p.s.Fake != nil {
		r.Backend = "fake"
	}
	p.mu.Unlock()
	r.InitError, r.Driver, r.Cuda = inv.InitErr, inv.Driver, inv.Cuda
	r.GPUs = []ReportGPU{}
	for _, g := range inv.GPUs {
		ok, desc := g.Healthy()
		rg := ReportGPU{g.Index, g.UUID, g.Model, g.MemoryMiB, g.CC, g.PCIBusID, g.NUMA, g.MIG, g.PowerLimitW, ok, desc, nil}
		for _, m := range g.MIGs {
			rg.MIGs = append(rg.MIGs, ReportMIG{m.UUID, m.Name, m.Profile, m.MemoryMiB, m.GPUInstanceID, m.ComputeInstanceID, m.SMCount})
		}
		r.GPUs = append(r.GPUs, rg)
	}
	if t := inv.Topology; t != nil && len(t.UUIDs) > 0 {
		r.Cells = t.Cells
		r.Affinity = map[string]string{}
		for i, a := range t.UUIDs {
			for _, b := range t.UUIDs[i+1:] {
				r.Affinity[a+" "+b] = t.LevelBetween(a, b).String()
			}
		}
	}
	r.Groups = reportGroups(groups)
	if inv.InitErr == "" {
		r.XidEvents = "registered"
		if _, lib, err := p.settings(); err != nil {
			r.XidEvents = err.Error()
		} else if _, err := lib.WaitEvents(10 * time.Millisecond); err != nil {
			r.XidEvents = err.Error()
		}
	}
	r.Stats = map[string]any{}
	for _, gs := range p.Sample() {
		if gs.Type != TypeGPU {
			continue
		}
		for id, st := range gs.InstanceStats {
			m := map[string]string{}
			for k, v := range st.Stats.Attributes {
				m[k] = statString(v)
			}
			r.Stats[id] = m
		}
	}
	return r, nil
}

func reportGroups(groups []*device.DeviceGroup) []ReportGroup {
	out := []ReportGroup{}
	for _, g := range groups {
		rg := ReportGroup{ID: g.Vendor + "/" + g.Type + "/" + g.Name, Attributes: map[string]string{}}
		for _, d := range g.Devices {
			rg.Instances = append(rg.Instances, d.ID)
			if !d.Healthy {
				if rg.Unhealthy == nil {
					rg.Unhealthy = map[string]string{}
				}
				rg.Unhealthy[d.ID] = d.HealthDesc
			}
		}
		sort.Strings(rg.Instances)
		for k, v := range g.Attributes {
			rg.Attributes[k] = v.GoString()
		}
		out = append(out, rg)
	}
	return out
}

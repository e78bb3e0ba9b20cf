package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	"github.com/hashicorp/nomad/plugins/shared/structs"
	"github.com/rondo-sched/rondo/device-plugin/nvml"
)

// PluginName is the plugin's name; the binary and the agent's
// `plugin "<name>"` block label must match it.
const PluginName = "nomad-device-rondo"

// PluginVersion is reported to Nomad.
const PluginVersion = "v0.1.0"

// Plugin is the Nomad device plugin.
type Plugin struct {
	logger log.Logger
	// newReal builds the real backend; replaced only by tests of the
	// library-missing path.
	newReal func() nvml.Lib

	mu      sync.Mutex
	s       *settings
	lib     nvml.Lib
	inited  bool
	initErr string
	inv     *Inventory
	xid     map[string]xidMark // uuid → last Xid critical error
	wake    chan struct{}
}

type xidMark struct {
	xid uint64
	at  time.Time
}

var _ device.DevicePlugin = (*Plugin)(nil)

// New returns an unconfigured plugin.
func New(logger log.Logger) *Plugin {
	if logger == nil {
		logger = log.NewNullLogger()
	}
	return &Plugin{
		logger:  logger.Named(PluginName),
		newReal: func() nvml.Lib { return nvml.NewReal() },
		xid:     map[string]xidMark{},
		wake:    make(chan struct{}, 1),
	}
}

// PluginInfo implements base.BasePlugin.
func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) {
	return &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     PluginVersion,
		Name:              PluginName,
	}, nil
}

// ConfigSchema implements base.BasePlugin.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return ConfigSpec(), nil }

// SetConfig implements base.BasePlugin.
func (p *Plugin) SetConfig(c *base.Config) error {
	cfg, err := DecodeConfig(c.PluginConfig)
	if err != nil {
		return err
	}
	return p.Configure(cfg)
}

// Configure validates cfg and picks the backend: the fake when cfg has a
// `fake` block, NVML otherwise.
func (p *Plugin) Configure(cfg *Config) error {
	s, err := cfg.validate()
	if err != nil {
		return err
	}
	var lib nvml.Lib
	if cfg.Fake != nil {
		f, err := nvml.NewFake(*cfg.Fake)
		if err != nil {
			return err
		}
		lib = f
	} else {
		lib = p.newReal()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s, p.lib, p.inited, p.inv = s, lib, false, nil
	return nil
}

func (p *Plugin) settings() (*settings, nvml.Lib, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s == nil {
		return nil, nil, errors.New("plugin is not configured")
	}
	return p.s, p.lib, nil
}

// Refresh scans the backend once and returns the inventory and the device
// groups Nomad would be sent. A backend that cannot be initialised yields no
// devices (and Inventory.InitErr), never an error.
func (p *Plugin) Refresh() (*Inventory, []*device.DeviceGroup, error) {
	s, lib, err := p.settings()
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	inited, prev := p.inited, p.inv
	p.mu.Unlock()
	if !inited {
		if err := lib.Init(); err != nil {
			p.mu.Lock()
			if p.initErr != err.Error() {
				p.logger.Error("NVML unavailable: reporting no GPUs", "error", err)
			}
			p.initErr = err.Error()
			p.inv = &Inventory{InitErr: err.Error()}
			inv := p.inv
			p.mu.Unlock()
			return inv, nil, nil
		}
		p.mu.Lock()
		p.inited, p.initErr = true, ""
		p.mu.Unlock()
	}
	inv := scanBackend(lib, s.ignored, prev)
	now := time.Now()
	p.mu.Lock()
	for _, g := range inv.GPUs {
		if m, ok := p.xid[g.UUID]; ok {
			if now.Sub(m.at) < s.xidPeriod {
				g.XidHealthMsg = fmt.Sprintf("Xid %d critical error at %s", m.xid, m.at.UTC().Format(time.RFC3339))
			} else {
				delete(p.xid, g.UUID)
			}
		}
	}
	p.inv = inv
	p.mu.Unlock()
	return inv, inv.Groups(s.MPSProfiles, func(uuid string) bool { return mpsRunning(s, uuid) }), nil
}

// mpsRunning: an MPS control daemon for the GPU has its control pipe in
// <mps_pipe_dir>/<uuid>.
func mpsRunning(s *settings, uuid string) bool {
	_, err := os.Stat(filepath.Join(s.MPSPipeDir, uuid, "control"))
	return err == nil
}

// Fingerprint implements device.DevicePlugin. It sends the devices at once,
// then on every change (health, appearance, disappearance). It never sends an
// error and never closes the channel: Nomad would drop every device.
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	s, lib, err := p.settings()
	if err != nil {
		return nil, err
	}
	if !s.Enabled {
		return nil, device.ErrPluginDisabled
	}
	ch := make(chan *device.FingerprintResponse, 1)
	go p.watchEvents(ctx, lib, s.period)
	go p.fingerprintLoop(ctx, ch, s.period)
	return ch, nil
}

func (p *Plugin) fingerprintLoop(ctx context.Context, ch chan<- *device.FingerprintResponse, period time.Duration) {
	var last string
	first := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
		_, groups, err := p.Refresh()
		if err != nil {
			p.logger.Error("fingerprint", "error", err)
		} else {
			b, _ := json.Marshal(groups)
			if first || string(b) != last {
				select {
				case ch <- device.NewFingerprint(groups...):
					first, last = false, string(b)
				case <-ctx.Done():
					return
				}
			}
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(period)
	}
}

// watchEvents turns Xid critical errors into health changes.
func (p *Plugin) watchEvents(ctx context.Context, lib nvml.Lib, period time.Duration) {
	warned, watching := false, false
	for ctx.Err() == nil {
		p.mu.Lock()
		inited := p.inited
		p.mu.Unlock()
		if !inited {
			sleepCtx(ctx, period)
			continue
		}
		evs, err := lib.WaitEvents(time.Second)
		if err != nil {
			if !warned {
				p.logger.Warn("cannot watch NVML events; health relies on polling", "error", err)
				warned = true
			}
			sleepCtx(ctx, period)
			continue
		}
		if !watching {
			p.logger.Info("watching NVML Xid critical-error events")
			watching = true
		}
		if len(evs) == 0 {
			continue
		}
		now := time.Now()
		p.mu.Lock()
		for _, e := range evs {
			p.logger.Warn("Xid critical error", "gpu", e.UUID, "xid", e.Xid)
			if e.UUID == "" && p.inv != nil { // no device: NVML means all
				for _, g := range p.inv.GPUs {
					p.xid[g.UUID] = xidMark{e.Xid, now}
				}
				continue
			}
			p.xid[e.UUID] = xidMark{e.Xid, now}
		}
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Reserve implements device.DevicePlugin; see reserve for what it refuses.
func (p *Plugin) Reserve(ids []string) (*device.ContainerReservation, error) {
	if len(ids) == 0 {
		return &device.ContainerReservation{}, nil
	}
	s, _, err := p.settings()
	if err != nil {
		return nil, err
	}
	if !s.Enabled {
		return nil, device.ErrPluginDisabled
	}
	p.mu.Lock()
	inv := p.inv
	p.mu.Unlock()
	if inv == nil {
		if inv, _, err = p.Refresh(); err != nil {
			return nil, err
		}
	}
	return reserve(inv, s, ids)
}

// Stats implements device.DevicePlugin: one sample per interval.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	s, _, err := p.settings()
	if err != nil {
		return nil, err
	}
	if !s.Enabled {
		return nil, device.ErrPluginDisabled
	}
	if interval <= 0 {
		interval = time.Second
	}
	ch := make(chan *device.StatsResponse, 1)
	go func() {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case ch <- &device.StatsResponse{Groups: p.Sample()}:
			case <-ctx.Done():
				return
			}
			t.Reset(interval)
		}
	}()
	return ch, nil
}

// Sample queries utilization, memory, power and temperature of every GPU
// (unsupported queries are left out) and returns them per device group.
func (p *Plugin) Sample() []*device.DeviceGroupStats {
	p.mu.Lock()
	inv, s := p.inv, p.s
	p.mu.Unlock()
	if inv == nil || s == nil {
		return nil
	}
	now := time.Now()
	per := map[string]*device.DeviceStats{}
	for _, g := range inv.GPUs {
		if g.dev == nil || g.MIG {
			continue
		}
		per[g.UUID] = gpuStats(g.dev, now)
	}
	var out []*device.DeviceGroupStats
	groups := map[string]*device.DeviceGroupStats{}
	get := func(typ, name string) *device.DeviceGroupStats {
		k := typ + "/" + name
		if gs, ok := groups[k]; ok {
			return gs
		}
		gs := &device.DeviceGroupStats{Vendor: Vendor, Type: typ, Name: name, InstanceStats: map[string]*device.DeviceStats{}}
		groups[k] = gs
		out = append(out, gs)
		return gs
	}
	for _, g := range inv.GPUs {
		if st, ok := per[g.UUID]; ok {
			get(TypeGPU, g.Model).InstanceStats[g.UUID] = st
		}
		for _, m := range g.MIGs {
			if m.dev != nil {
				get(TypeGPU, m.Name).InstanceStats[m.UUID] = gpuStats(m.dev, now)
			}
		}
	}
	for _, pr := range s.MPSProfiles {
		for _, g := range inv.GPUs {
			st, ok := per[g.UUID]
			if !ok || !profileApplies(pr, g) {
				continue
			}
			gs := get(TypeGPUShare, g.Model+"-"+pr.Name)
			for k := 0; k < pr.Shares; k++ {
				gs.InstanceStats[shareID(g.UUID, pr.Name, k)] = st
			}
		}
	}
	return out
}

func intStat(v int64, unit, desc string) *structs.StatValue {
	return &structs.StatValue{IntNumeratorVal: &v, Unit: unit, Desc: desc}
}

// gpuStats samples one device (a GPU or a MIG instance, which answers
// fewer queries) under Rondo's stat names and, beside them, the official
// nomad-device-nvidia's ("GPU utilization", "Memory state", "ECC L1
// errors", ...), so dashboards built on either keep working.
func gpuStats(d nvml.Device, now time.Time) *device.DeviceStats {
	attrs := map[string]*structs.StatValue{}
	var summary *structs.StatValue
	if u, err := d.Utilization(); err == nil {
		summary = intStat(int64(u.GPU), "%", "GPU utilization")
		attrs["utilization"] = summary
		attrs["memory_utilization"] = intStat(int64(u.Memory), "%", "memory bandwidth utilization")
		attrs["GPU utilization"] = intStat(int64(u.GPU), "%", "percent of the sample period a kernel ran")
		attrs["Memory utilization"] = intStat(int64(u.Memory), "%", "percent of the sample period memory was read or written")
	}
	if e, err := d.EncoderUtilization(); err == nil {
		attrs["Encoder utilization"] = intStat(int64(e), "%", "video encoder utilization")
	}
	if e, err := d.DecoderUtilization(); err == nil {
		attrs["Decoder utilization"] = intStat(int64(e), "%", "video decoder utilization")
	}
	if m, err := d.MemoryInfo(); err == nil {
		used, total := int64(m.Used>>20), int64(m.Total>>20)
		attrs["memory_used"] = &structs.StatValue{IntNumeratorVal: &used, IntDenominatorVal: &total, Unit: structs.UnitMiB, Desc: "memory used"}
		attrs["Memory state"] = &structs.StatValue{IntNumeratorVal: &used, IntDenominatorVal: &total, Unit: structs.UnitMiB, Desc: "used / total memory"}
	}
	if total, used, err := d.BAR1MemoryMiB(); err == nil {
		u, t := int64(used), int64(total)
		attrs["BAR1 buffer state"] = &structs.StatValue{IntNumeratorVal: &u, IntDenominatorVal: &t, Unit: structs.UnitMiB, Desc: "used / total BAR1 aperture"}
	}
	if pw, err := d.PowerUsageMilliwatts(); err == nil {
		attrs["power"] = intStat(int64(pw/1000), structs.UnitW, "power draw")
		attrs["Power usage"] = intStat(int64(pw/1000), structs.UnitW, "power draw")
	}
	if t, err := d.TemperatureC(); err == nil {
		attrs["temperature"] = intStat(int64(t), "C", "GPU temperature")
		attrs["Temperature"] = intStat(int64(t), "C", "GPU temperature")
	}
	if c, err := d.ClockSMMHz(); err == nil {
		attrs["sm_clock"] = intStat(int64(c), structs.UnitMHz, "SM clock")
	}
	if e, err := d.ECCErrors(); err == nil {
		attrs["ECC L1 errors"] = intStat(int64(e.L1), "#", "corrected L1 cache ECC errors since driver load")
		attrs["ECC L2 errors"] = intStat(int64(e.L2), "#", "corrected L2 cache ECC errors since driver load")
		attrs["ECC memory errors"] = intStat(int64(e.Memory), "#", "corrected device memory ECC errors since driver load")
		attrs["ecc_corrected"] = intStat(int64(e.L1+e.L2+e.Memory+e.RegisterFile), "#", "corrected ECC errors since driver load")
		attrs["ecc_uncorrected"] = intStat(int64(e.Uncorrected), "#", "uncorrected ECC errors since driver load")
	}
	if summary == nil {
		summary = &structs.StatValue{StringVal: strPtr("unavailable"), Desc: "GPU utilization"}
	}
	return &device.DeviceStats{Summary: summary, Stats: &structs.StatObject{Attributes: attrs}, Timestamp: now}
}

func strPtr(s string) *string { return &s }

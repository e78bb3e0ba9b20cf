package nvml

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Real is the NVML backend over go-nvml. go-nvml opens libnvidia-ml.so.1 with
// dlopen inside Init, so a binary holding Real builds and starts on machines
// without the NVIDIA driver; Init then fails with ErrLibraryNotFound.
type Real struct {
	mu       sync.Mutex
	inited   bool
	eventSet gonvml.EventSet
	evDevs   int // number of devices registered on eventSet
}

// NewReal returns the go-nvml backend (not yet initialised).
func NewReal() *Real { return &Real{} }

func wrap(op string, r gonvml.Return) error {
	switch r {
	case gonvml.SUCCESS:
		return nil
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("%s: %w", op, ErrNotSupported)
	case gonvml.ERROR_GPU_IS_LOST:
		return fmt.Errorf("%s: %w", op, ErrGPULost)
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%s: %w", op, ErrLibraryNotFound)
	}
	return fmt.Errorf("%s: %s", op, gonvml.ErrorString(r))
}

// Init implements Lib.
func (r *Real) Init() (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inited {
		return nil
	}
	// A missing or broken library must never crash the plugin.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("nvml init: %v: %w", p, ErrLibraryNotFound)
		}
	}()
	if ret := gonvml.Init(); ret != gonvml.SUCCESS {
		if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
			return fmt.Errorf("nvml init: %w (is the NVIDIA driver installed?)", ErrLibraryNotFound)
		}
		return fmt.Errorf("nvml init: %s", gonvml.ErrorString(ret))
	}
	r.inited = true
	return nil
}

// Shutdown implements Lib.
func (r *Real) Shutdown() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.inited {
		return nil
	}
	if r.eventSet != nil {
		r.eventSet.Free()
		r.eventSet = nil
	}
	r.inited = false
	return wrap("nvml shutdown", gonvml.Shutdown())
}

// DriverVersion implements Lib.
func (r *Real) DriverVersion() (string, error) {
	v, ret := gonvml.SystemGetDriverVersion()
	return v, wrap("driver version", ret)
}

// CudaDriverVersion implements Lib.
func (r *Real) CudaDriverVersion() (string, error) {
	v, ret := gonvml.SystemGetCudaDriverVersion()
	if err := wrap("cuda driver version", ret); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10), nil
}

// DeviceCount implements Lib.
func (r *Real) DeviceCount() (int, error) {
	n, ret := gonvml.DeviceGetCount()
	return n, wrap("device count", ret)
}

// DeviceByIndex implements Lib.
func (r *Real) DeviceByIndex(i int) (Device, error) {
	d, ret := gonvml.DeviceGetHandleByIndex(i)
	if err := wrap(fmt.Sprintf("device %d", i), ret); err != nil {
		return nil, err
	}
	return realDevice{d}, nil
}

// WaitEvents implements Lib: it (re)registers Xid critical-error events on
// every device and waits on the event set.
func (r *Real) WaitEvents(timeout time.Duration) ([]Event, error) {
	r.mu.Lock()
	n, ret := gonvml.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		r.mu.Unlock()
		return nil, wrap("device count", ret)
	}
	if r.eventSet == nil || r.evDevs != n {
		if r.eventSet != nil {
			r.eventSet.Free()
		}
		es, ret := gonvml.EventSetCreate()
		if ret != gonvml.SUCCESS {
			r.mu.Unlock()
			return nil, wrap("event set create", ret)
		}
		registered := 0
		for i := 0; i < n; i++ {
			d, ret := gonvml.DeviceGetHandleByIndex(i)
			if ret != gonvml.SUCCESS {
				continue
			}
			if ret := d.RegisterEvents(uint64(gonvml.EventTypeXidCriticalError), es); ret == gonvml.SUCCESS {
				registered++
			}
		}
		r.eventSet, r.evDevs = es, n
		if registered == 0 {
			r.mu.Unlock()
			return nil, fmt.Errorf("register xid events: %w", ErrNotSupported)
		}
	}
	es := r.eventSet
	r.mu.Unlock()

	data, ret := es.Wait(uint32(timeout / time.Millisecond))
	if ret == gonvml.ERROR_TIMEOUT {
		return nil, nil
	}
	if err := wrap("event wait", ret); err != nil {
		return nil, err
	}
	if data.EventType != uint64(gonvml.EventTypeXidCriticalError) {
		return nil, nil
	}
	ev := Event{Xid: data.EventData}
	if data.Device != nil {
		if u, ret := data.Device.GetUUID(); ret == gonvml.SUCCESS {
			ev.UUID = u
		}
	}
	return []Event{ev}, nil
}

type realDevice struct{ d gonvml.Device }

func (d realDevice) UUID() (string, error) {
	u, ret := d.d.GetUUID()
	return u, wrap("uuid", ret)
}

func (d realDevice) Name() (string, error) {
	n, ret := d.d.GetName()
	return n, wrap("name", ret)
}

func (d realDevice) MemoryInfo() (Memory, error) {
	m, ret := d.d.GetMemoryInfo()
	return Memory{Total: m.Total, Used: m.Used, Free: m.Free}, wrap("memory info", ret)
}

func (d realDevice) CudaComputeCapability() (int, int, error) {
	a, b, ret := d.d.GetCudaComputeCapability()
	return a, b, wrap("compute capability", ret)
}

func (d realDevice) PciBusID() (string, error) {
	p, ret := d.d.GetPciInfo()
	if err := wrap("pci info", ret); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String(), nil
}

func (d realDevice) NumaNode() (int, error) {
	n, ret := d.d.GetNumaNodeId()
	return n, wrap("numa node", ret)
}

func (d realDevice) MigEnabled() (bool, error) {
	cur, _, ret := d.d.GetMigMode()
	return cur == gonvml.DEVICE_MIG_ENABLE, wrap("mig mode", ret)
}

func (d realDevice) TopologyCommonAncestor(other Device) (TopologyLevel, error) {
	o, ok := other.(realDevice)
	if !ok {
		return 0, errors.New("topology: devices from different backends")
	}
	l, ret := d.d.GetTopologyCommonAncestor(o.d)
	return TopologyLevel(l), wrap("topology common ancestor", ret)
}

func (d realDevice) Utilization() (Utilization, error) {
	u, ret := d.d.GetUtilizationRates()
	return Utilization{GPU: u.Gpu, Memory: u.Memory}, wrap("utilization", ret)
}

func (d realDevice) PowerUsageMilliwatts() (uint32, error) {
	p, ret := d.d.GetPowerUsage()
	return p, wrap("power usage", ret)
}

func (d realDevice) PowerLimitMilliwatts() (uint32, error) {
	p, ret := d.d.GetPowerManagementLimit()
	return p, wrap("power limit", ret)
}

func (d realDevice) TemperatureC() (uint32, error) {
	t, ret := d.d.GetTemperature(gonvml.TEMPERATURE_GPU)
	return t, wrap("temperature", ret)
}

func (d realDevice) ClockSMMHz() (uint32, error) {
	c, ret := d.d.GetClockInfo(gonvml.CLOCK_SM)
	return c, wrap("sm clock", ret)
}

func (d realDevice) MaxClockSMMHz() (uint32, error) {
	c, ret := d.d.GetMaxClockInfo(gonvml.CLOCK_SM)
	return c, wrap("max sm clock", ret)
}

func (d realDevice) MaxClockMemMHz() (uint32, error) {
	c, ret := d.d.GetMaxClockInfo(gonvml.CLOCK_MEM)
	return c, wrap("max memory clock", ret)
}

func (d realDevice) BAR1MemoryMiB() (uint64, uint64, error) {
	b, ret := d.d.GetBAR1MemoryInfo()
	return b.Bar1Total >> 20, b.Bar1Used >> 20, wrap("bar1 memory", ret)
}

func (d realDevice) MaxPcieLink() (int, int, error) {
	gen, ret := d.d.GetMaxPcieLinkGeneration()
	if err := wrap("max pcie link generation", ret); err != nil {
		return 0, 0, err
	}
	w, ret := d.d.GetMaxPcieLinkWidth()
	return gen, w, wrap("max pcie link width", ret)
}

func (d realDevice) DisplayActive() (bool, error) {
	m, ret := d.d.GetDisplayActive()
	return m == gonvml.FEATURE_ENABLED, wrap("display active", ret)
}

func (d realDevice) PersistenceMode() (bool, error) {
	m, ret := d.d.GetPersistenceMode()
	return m == gonvml.FEATURE_ENABLED, wrap("persistence mode", ret)
}

func (d realDevice) EncoderUtilization() (uint32, error) {
	u, _, ret := d.d.GetEncoderUtilization()
	return u, wrap("encoder utilization", ret)
}

func (d realDevice) DecoderUtilization() (uint32, error) {
	u, _, ret := d.d.GetDecoderUtilization()
	return u, wrap("decoder utilization", ret)
}

// ECCErrors reads the volatile counters per location with
// nvmlDeviceGetMemoryErrorCounter (the detailed-counts call the official
// plugin uses is deprecated and unsupported on recent GPUs). A location the
// GPU does not count reads 0; a GPU with ECC off supports none.
func (d realDevice) ECCErrors() (ECCCounts, error) {
	var c ECCCounts
	supported := false
	for _, x := range []struct {
		loc gonvml.MemoryLocation
		dst *uint64
	}{
		{gonvml.MEMORY_LOCATION_L1_CACHE, &c.L1},
		{gonvml.MEMORY_LOCATION_L2_CACHE, &c.L2},
		{gonvml.MEMORY_LOCATION_DEVICE_MEMORY, &c.Memory},
		{gonvml.MEMORY_LOCATION_REGISTER_FILE, &c.RegisterFile},
	} {
		n, ret := d.d.GetMemoryErrorCounter(gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC, x.loc)
		if ret == gonvml.SUCCESS {
			*x.dst, supported = n, true
		} else if err := wrap("ecc counter", ret); !errors.Is(err, ErrNotSupported) {
			return ECCCounts{}, err
		}
	}
	n, ret := d.d.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC)
	if ret == gonvml.SUCCESS {
		c.Uncorrected, supported = n, true
	} else if err := wrap("ecc total", ret); !errors.Is(err, ErrNotSupported) {
		return ECCCounts{}, err
	}
	if !supported {
		return ECCCounts{}, fmt.Errorf("ecc: %w", ErrNotSupported)
	}
	return c, nil
}

// MigDevices walks the GPU's MIG device slots; empty slots answer
// NOT_FOUND and are skipped.
func (d realDevice) MigDevices() ([]MigDevice, error) {
	n, ret := d.d.GetMaxMigDeviceCount()
	if err := wrap("max mig device count", ret); err != nil {
		return nil, err
	}
	var out []MigDevice
	for i := 0; i < n; i++ {
		h, ret := d.d.GetMigDeviceHandleByIndex(i)
		if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if err := wrap(fmt.Sprintf("mig device %d", i), ret); err != nil {
			return nil, err
		}
		m := MigDevice{Device: realDevice{h}}
		if v, ret := h.GetGpuInstanceId(); ret == gonvml.SUCCESS {
			m.GPUInstanceID = v
		}
		if v, ret := h.GetComputeInstanceId(); ret == gonvml.SUCCESS {
			m.ComputeInstanceID = v
		}
		if a, ret := h.GetAttributes(); ret == gonvml.SUCCESS {
			m.SMCount = int(a.MultiprocessorCount)
		}
		out = append(out, m)
	}
	return out, nil
}

// Package nvml is the narrow, NVML-shaped interface the Rondo device plugin is
// written against, with two implementations: Real (NVIDIA's NVML through
// go-nvml, loaded at run time with dlopen) and Fake (GPUs described by the
// plugin's `fake` config block, with file-driven fault injection).
//
// Everything above this interface (fingerprint, topology cells, MPS shares,
// Reserve, stats, health) is the same code whichever backend runs.
package nvml

import (
	"errors"
	"fmt"
	"time"
)

// Errors every backend maps its failures onto, so callers can tolerate
// unsupported queries and recognise a lost GPU.
var (
	// ErrNotSupported: the query is not supported on this GPU or driver
	// (NUMA node on some boards, power on some SKUs, ...). Callers omit the
	// attribute.
	ErrNotSupported = errors.New("not supported")
	// ErrGPULost: the GPU fell off the bus or is otherwise inaccessible.
	ErrGPULost = errors.New("gpu is lost")
	// ErrLibraryNotFound: libnvidia-ml.so could not be loaded.
	ErrLibraryNotFound = errors.New("NVML library (libnvidia-ml.so.1) not found")
)

// TopologyLevel is the closest common ancestor of two GPUs, with NVML's
// numbering (lower is closer).
type TopologyLevel int

// The NVML topology levels (nvmlGpuTopologyLevel_t).
const (
	TopologyInternal   TopologyLevel = 0  // same board (multi-GPU board / NVLink-bridged pair)
	TopologySingle     TopologyLevel = 10 // one PCIe switch
	TopologyMultiple   TopologyLevel = 20 // several PCIe switches, no host bridge crossed
	TopologyHostBridge TopologyLevel = 30 // same PCIe host bridge
	TopologyNode       TopologyLevel = 40 // same NUMA node (CPU socket)
	TopologySystem     TopologyLevel = 50 // across sockets (SMP interconnect)
)

// Levels lists the topology levels from the closest to the farthest.
var Levels = []TopologyLevel{TopologyInternal, TopologySingle, TopologyMultiple, TopologyHostBridge, TopologyNode, TopologySystem}

var levelNames = map[TopologyLevel]string{
	TopologyInternal:   "board",
	TopologySingle:     "pcie-switch",
	TopologyMultiple:   "pcie-multi-switch",
	TopologyHostBridge: "host-bridge",
	TopologyNode:       "numa",
	TopologySystem:     "system",
}

// String is the level's name as used in attributes and config.
func (l TopologyLevel) String() string {
	if s, ok := levelNames[l]; ok {
		return s
	}
	return fmt.Sprintf("level-%d", int(l))
}

// ParseTopologyLevel reads a level name (as String writes it; "nvlink" is an
// alias of "board").
func ParseTopologyLevel(s string) (TopologyLevel, error) {
	if s == "nvlink" {
		return TopologyInternal, nil
	}
	for l, n := range levelNames {
		if n == s {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown topology level %q (want one of board, nvlink, pcie-switch, pcie-multi-switch, host-bridge, numa, system)", s)
}

// Memory is a GPU's framebuffer memory in bytes.
type Memory struct {
	Total, Used, Free uint64
}

// Utilization is in percent over NVML's last sample period.
type Utilization struct {
	GPU, Memory uint32
}

// Event is a health event reported by the backend.
type Event struct {
	UUID string
	Xid  uint64 // the Xid of a critical error
}

// Lib is the library-level interface (nvmlInit, nvmlSystem*, nvmlDeviceGet*).
type Lib interface {
	// Init loads and initialises the library. It is safe to call again after
	// a failure. An error wraps ErrLibraryNotFound when no library is present.
	Init() error
	Shutdown() error
	DriverVersion() (string, error)
	// CudaDriverVersion is the CUDA version the driver supports, e.g. "12.4".
	CudaDriverVersion() (string, error)
	DeviceCount() (int, error)
	DeviceByIndex(i int) (Device, error)
	// WaitEvents blocks up to timeout for critical-error (Xid) events on
	// any device; it returns nil, nil on timeout. Backends that cannot watch
	// events return ErrNotSupported.
	WaitEvents(timeout time.Duration) ([]Event, error)
}

// ECCCounts are a GPU's ECC error counters since the last driver reload
// (NVML's volatile counters).
type ECCCounts struct {
	// Corrected errors by location, as the official plugin reports them.
	L1, L2, Memory, RegisterFile uint64
	// Uncorrected is the total of uncorrected (double-bit) errors.
	Uncorrected uint64
}

// MigDevice is one MIG instance of a GPU in MIG mode. Its Device answers
// UUID ("MIG-..."), Name ("<model> MIG <profile>") and MemoryInfo; other
// queries may be ErrNotSupported (NVML has no per-instance power, clocks or
// utilization).
type MigDevice struct {
	Device
	GPUInstanceID, ComputeInstanceID int
	SMCount                          int // multiprocessors of the instance; 0 when unknown
}

// Device is one GPU (nvmlDevice_t).
type Device interface {
	UUID() (string, error)
	Name() (string, error)
	MemoryInfo() (Memory, error)
	CudaComputeCapability() (major, minor int, err error)
	PciBusID() (string, error)
	NumaNode() (int, error)
	MigEnabled() (bool, error)
	// TopologyCommonAncestor is the closest common ancestor with other.
	TopologyCommonAncestor(other Device) (TopologyLevel, error)
	Utilization() (Utilization, error)
	PowerUsageMilliwatts() (uint32, error)
	PowerLimitMilliwatts() (uint32, error)
	TemperatureC() (uint32, error)
	// Clocks in MHz: current and maximum SM and memory clocks.
	ClockSMMHz() (uint32, error)
	MaxClockSMMHz() (uint32, error)
	MaxClockMemMHz() (uint32, error)
	// BAR1MemoryMiB is the BAR1 aperture's total and used MiB.
	BAR1MemoryMiB() (total, used uint64, err error)
	// MaxPcieLink is the maximum PCIe generation and width.
	MaxPcieLink() (gen, width int, err error)
	// DisplayActive: a display is initialized on the GPU (NVML's display
	// *mode* is deprecated: driver 580 answers "Enabled" on a headless
	// H100); PersistenceMode: the driver stays loaded with no client.
	DisplayActive() (bool, error)
	PersistenceMode() (bool, error)
	EncoderUtilization() (uint32, error)
	DecoderUtilization() (uint32, error)
	ECCErrors() (ECCCounts, error)
	// MigDevices lists the MIG instances of a GPU in MIG mode (none
	// otherwise).
	MigDevices() ([]MigDevice, error)
}

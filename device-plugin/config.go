// Package deviceplugin is Rondo's Nomad device plugin for NVIDIA GPUs: it
// fingerprints GPUs with their topology cells and MPS share devices, reserves
// them with the CUDA/MPS environment, and reports stats and health. It is
// written against the nvml.Lib interface; the real (go-nvml) and fake
// backends share every line above it.
package deviceplugin

import (
	"fmt"
	"time"

	hclv1 "github.com/hashicorp/hcl"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	"github.com/rondo-sched/rondo/device-plugin/nvml"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// Config is the plugin's `config { ... }` block.
type Config struct {
	// Enabled = false makes the plugin report no devices (Fingerprint,
	// Stats and Reserve answer device.ErrPluginDisabled), as the official
	// plugin's key does.
	Enabled           bool   `codec:"enabled"`
	FingerprintPeriod string `codec:"fingerprint_period"`
	// XidUnhealthyPeriod: how long a GPU stays unhealthy after an Xid
	// critical error before it may be reported healthy again.
	XidUnhealthyPeriod string       `codec:"xid_unhealthy_period"`
	IgnoredGPUIDs      []string     `codec:"ignored_gpu_ids"`
	MPSPipeDir         string       `codec:"mps_pipe_dir"`
	MPSLogDir          string       `codec:"mps_log_dir"`
	MPSProfiles        []MPSProfile `codec:"mps_profile"`
	// Fake, when present, replaces NVML by the described GPUs.
	Fake *nvml.FakeConfig `codec:"fake"`
}

// MPSProfile exposes every matching GPU as Shares share devices.
type MPSProfile struct {
	// Name becomes the share device's name suffix: "<model>-<name>".
	Name   string `codec:"name"`
	Shares int    `codec:"shares"`
	// ActiveThreadPercentage per share; 0 means 100/shares (rounded down).
	ActiveThreadPercentage int `codec:"active_thread_percentage"`
	// MemoryLimitMiB per share; 0 means the GPU's memory / shares.
	MemoryLimitMiB int `codec:"memory_limit_mib"`
	// Models restricts the profile to these GPU models; empty = all.
	Models []string `codec:"models"`
}

// ConfigSpec is the HCL schema of Config.
func ConfigSpec() *hclspec.Spec {
	gpu := hclspec.NewObject(map[string]*hclspec.Spec{
		"uuid":                 hclspec.NewAttr("uuid", "string", true),
		"model":                hclspec.NewAttr("model", "string", true),
		"memory_mib":           hclspec.NewAttr("memory_mib", "number", true),
		"compute_capability":   hclspec.NewDefault(hclspec.NewAttr("compute_capability", "string", false), hclspec.NewLiteral(`"8.0"`)),
		"pci_bus_id":           hclspec.NewAttr("pci_bus_id", "string", false),
		"numa_node":            hclspec.NewDefault(hclspec.NewAttr("numa_node", "number", false), hclspec.NewLiteral("-1")),
		"board":                hclspec.NewAttr("board", "string", false),
		"pcie_switch":          hclspec.NewAttr("pcie_switch", "string", false),
		"host_bridge":          hclspec.NewAttr("host_bridge", "string", false),
		"mig":                  hclspec.NewAttr("mig", "bool", false),
		"power_limit_w":        hclspec.NewAttr("power_limit_w", "number", false),
		"unhealthy_file":       hclspec.NewAttr("unhealthy_file", "string", false),
		"max_sm_clock_mhz":     hclspec.NewAttr("max_sm_clock_mhz", "number", false),
		"max_memory_clock_mhz": hclspec.NewAttr("max_memory_clock_mhz", "number", false),
		"bar1_mib":             hclspec.NewAttr("bar1_mib", "number", false),
		"pcie_generation":      hclspec.NewAttr("pcie_generation", "number", false),
		"pcie_width":           hclspec.NewAttr("pcie_width", "number", false),
		"persistence_mode":     hclspec.NewAttr("persistence_mode", "bool", false),
		"display_active":       hclspec.NewAttr("display_active", "bool", false),
		"ecc":                  hclspec.NewAttr("ecc", "bool", false),
		"mig_device": hclspec.NewBlockList("mig_device", hclspec.NewObject(map[string]*hclspec.Spec{
			"uuid":                hclspec.NewAttr("uuid", "string", true),
			"profile":             hclspec.NewAttr("profile", "string", true),
			"memory_mib":          hclspec.NewAttr("memory_mib", "number", true),
			"gpu_instance_id":     hclspec.NewAttr("gpu_instance_id", "number", false),
			"compute_instance_id": hclspec.NewAttr("compute_instance_id", "number", false),
			"sm_count":            hclspec.NewAttr("sm_count", "number", false),
		})),
	})
	link := hclspec.NewObject(map[string]*hclspec.Spec{
		"a":     hclspec.NewAttr("a", "string", true),
		"b":     hclspec.NewAttr("b", "string", true),
		"level": hclspec.NewAttr("level", "string", true),
	})
	fake := hclspec.NewObject(map[string]*hclspec.Spec{
		"driver_version": hclspec.NewDefault(hclspec.NewAttr("driver_version", "string", false), hclspec.NewLiteral(`"550.54.15"`)),
		"cuda_version":   hclspec.NewDefault(hclspec.NewAttr("cuda_version", "string", false), hclspec.NewLiteral(`"12.4"`)),
		"fault_dir":      hclspec.NewAttr("fault_dir", "string", false),
		"gpu":            hclspec.NewBlockList("gpu", gpu),
		"link":           hclspec.NewBlockList("link", link),
	})
	profile := hclspec.NewObject(map[string]*hclspec.Spec{
		"name":                     hclspec.NewAttr("name", "string", true),
		"shares":                   hclspec.NewAttr("shares", "number", true),
		"active_thread_percentage": hclspec.NewAttr("active_thread_percentage", "number", false),
		"memory_limit_mib":         hclspec.NewAttr("memory_limit_mib", "number", false),
		"models":                   hclspec.NewAttr("models", "list(string)", false),
	})
	return hclspec.NewObject(map[string]*hclspec.Spec{
		"enabled":              hclspec.NewDefault(hclspec.NewAttr("enabled", "bool", false), hclspec.NewLiteral("true")),
		"fingerprint_period":   hclspec.NewDefault(hclspec.NewAttr("fingerprint_period", "string", false), hclspec.NewLiteral(`"5s"`)),
		"xid_unhealthy_period": hclspec.NewDefault(hclspec.NewAttr("xid_unhealthy_period", "string", false), hclspec.NewLiteral(`"5m"`)),
		"ignored_gpu_ids":      hclspec.NewAttr("ignored_gpu_ids", "list(string)", false),
		"mps_pipe_dir":         hclspec.NewDefault(hclspec.NewAttr("mps_pipe_dir", "string", false), hclspec.NewLiteral(`"/tmp/nvidia-mps"`)),
		"mps_log_dir":          hclspec.NewDefault(hclspec.NewAttr("mps_log_dir", "string", false), hclspec.NewLiteral(`"/var/log/nvidia-mps"`)),
		"mps_profile":          hclspec.NewBlockList("mps_profile", profile),
		"fake":                 hclspec.NewBlock("fake", false, fake),
	})
}

// settings is the validated, parsed form of Config.
type settings struct {
	Config
	period    time.Duration
	xidPeriod time.Duration
	ignored   map[string]bool
}

// validate checks c; every error names the offending field.
func (c *Config) validate() (*settings, error) {
	s := &settings{Config: *c, ignored: map[string]bool{}}
	var err error
	if s.period, err = time.ParseDuration(c.FingerprintPeriod); err != nil || s.period <= 0 {
		return nil, fmt.Errorf("fingerprint_period: want a positive duration like \"5s\", got %q", c.FingerprintPeriod)
	}
	if s.xidPeriod, err = time.ParseDuration(c.XidUnhealthyPeriod); err != nil || s.xidPeriod < 0 {
		return nil, fmt.Errorf("xid_unhealthy_period: want a duration like \"5m\", got %q", c.XidUnhealthyPeriod)
	}
	for i, id := range c.IgnoredGPUIDs {
		if id == "" {
			return nil, fmt.Errorf("ignored_gpu_ids[%d]: empty id", i)
		}
		s.ignored[id] = true
	}
	if len(c.MPSProfiles) > 0 {
		if c.MPSPipeDir == "" {
			return nil, fmt.Errorf("mps_pipe_dir: must be set when mps_profile blocks exist")
		}
		if c.MPSLogDir == "" {
			return nil, fmt.Errorf("mps_log_dir: must be set when mps_profile blocks exist")
		}
	}
	names := map[string]int{}
	for i, p := range c.MPSProfiles {
		f := func(field string) string { return fmt.Sprintf("mps_profile[%d].%s", i, field) }
		if p.Name == "" {
			return nil, fmt.Errorf("%s: required", f("name"))
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("%s: %q duplicates mps_profile[%d]", f("name"), p.Name, j)
		}
		names[p.Name] = i
		if p.Shares < 1 || p.Shares > 48 {
			return nil, fmt.Errorf("%s: must be between 1 and 48 (MPS clients per GPU), got %d", f("shares"), p.Shares)
		}
		pct := p.ActiveThreadPercentage
		if pct == 0 {
			pct = 100 / p.Shares
		}
		if pct < 1 || pct > 100 {
			return nil, fmt.Errorf("%s: must be between 1 and 100, got %d", f("active_thread_percentage"), p.ActiveThreadPercentage)
		}
		if pct*p.Shares > 100 {
			return nil, fmt.Errorf("%s: %d shares x %d%% = %d%% exceeds 100%% of the GPU", f("active_thread_percentage"), p.Shares, pct, pct*p.Shares)
		}
		if p.MemoryLimitMiB < 0 {
			return nil, fmt.Errorf("%s: must be >= 0, got %d", f("memory_limit_mib"), p.MemoryLimitMiB)
		}
		s.MPSProfiles[i].ActiveThreadPercentage = pct
	}
	if c.Fake != nil {
		if err := c.Fake.Validate(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// DecodeConfig decodes the msgpack config Nomad sends to SetConfig.
func DecodeConfig(msgpackConfig []byte) (*Config, error) {
	var c Config
	if len(msgpackConfig) == 0 {
		return nil, fmt.Errorf("empty plugin config")
	}
	if err := base.MsgPackDecode(msgpackConfig, &c); err != nil {
		return nil, fmt.Errorf("decode plugin config: %w", err)
	}
	return &c, nil
}

// EncodeHCL turns the body of a `config { ... }` block (HCL text) into the
// msgpack bytes the Nomad agent would send, going the agent's way: HCL1 to a
// map, then the plugin's hclspec (defaults, types, unknown keys), then
// msgpack. Errors name the field.
func EncodeHCL(src []byte) ([]byte, error) {
	var m map[string]any
	if err := hclv1.Decode(&m, string(src)); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	spec, diag := hclspecutils.Convert(ConfigSpec())
	if diag.HasErrors() {
		return nil, fmt.Errorf("config schema: %s", diag.Error())
	}
	val, diag, errs := hclutils.ParseHclInterface(m, spec, nil)
	if diag.HasErrors() {
		if len(errs) > 0 {
			return nil, fmt.Errorf("config: %v", errs[0])
		}
		return nil, fmt.Errorf("config: %s", diag.Error())
	}
	b, err := msgpack.Marshal(val, val.Type())
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return b, nil
}

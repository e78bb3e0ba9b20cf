// Command nomad-device-rondo is Rondo's Nomad device plugin for NVIDIA GPUs.
//
// Run by the Nomad client (from plugin_dir, with a `plugin
// "nomad-device-rondo"` block in the agent config) it serves the plugin over
// go-plugin. Run by hand:
//
//	nomad-device-rondo fingerprint [-config file.hcl] [-fake file.hcl] [-require-gpu]
//
// fingerprints once (real NVML unless the config has a `fake` block) and
// prints what it found as JSON. The file holds the body of the agent's
// `config { ... }` block. With -require-gpu it exits 1, with one line on
// stderr, when NVML cannot be loaded or reports no GPU.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"
	deviceplugin "github.com/rondo-sched/rondo/device-plugin"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
	}
	plugins.Serve(func(l log.Logger) any { return deviceplugin.New(l) })
}

func cli(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "fingerprint":
		if err := fingerprint(args[1:], stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "nomad-device-rondo: %v\n", err)
			return 1
		}
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, deviceplugin.PluginName, deviceplugin.PluginVersion)
		return 0
	}
	fmt.Fprintf(stderr, "usage: %s fingerprint [-config file.hcl] [-fake file.hcl] [-require-gpu]\n(with no arguments it serves the Nomad device plugin)\n", deviceplugin.PluginName)
	return 2
}

func fingerprint(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fingerprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "plugin config file (body of the agent's config block)")
	fakePath := fs.String("fake", "", "like -config, but the file must have a fake block")
	requireGPU := fs.Bool("require-gpu", false, "fail (exit 1, one line on stderr) unless the backend loads and reports a GPU")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cfgPath != "" && *fakePath != "" {
		return errors.New("give -config or -fake, not both")
	}
	path := *cfgPath
	if *fakePath != "" {
		path = *fakePath
	}
	var src []byte
	if path != "" {
		var err error
		if src, err = os.ReadFile(path); err != nil {
			return err
		}
	}
	mp, err := deviceplugin.EncodeHCL(src)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := deviceplugin.DecodeConfig(mp)
	if err != nil {
		return err
	}
	if *fakePath != "" && cfg.Fake == nil {
		return fmt.Errorf("%s: -fake needs a fake { ... } block", path)
	}
	// The report holds what the log would say (init_error, xid_events), and
	// a failed -require-gpu check must read as one line.
	logger := log.New(&log.LoggerOptions{Output: stderr, Level: log.Off})
	p := deviceplugin.New(logger)
	if err := p.Configure(cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r, err := p.FingerprintReport()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	if *requireGPU {
		return checkHasGPU(r)
	}
	return nil
}

// checkHasGPU is -require-gpu: the one line says why the host cannot serve
// GPUs to Nomad.
func checkHasGPU(r *deviceplugin.Report) error {
	switch {
	case r.Disabled:
		return errors.New("gpu check failed: the plugin is disabled (enabled = false)")
	case r.InitError != "":
		return fmt.Errorf("gpu check failed: NVML cannot be loaded: %s", r.InitError)
	case len(r.GPUs) == 0:
		return errors.New("gpu check failed: NVML loaded but reports no GPU (all ignored, or none visible)")
	}
	return nil
}

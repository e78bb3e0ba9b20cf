package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/trace"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// simPlacement is the run's CPU and memory placement: --placement, or in
// VC mode the config's (a VC's own, else the config's top-level one, else
// --placement); nil when neither sets one. Servers get --cpus-per-server
// and --mem-per-server (default: Synergy's share, 3 cores and 62.5 GB per
// GPU).
func (c *simulateCmd) simPlacement(cfg *rhcl.Config) (*sim.Placement, error) {
	set := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var mode placement.Mode
	if c.place.mode != "" {
		m, err := placement.ParseMode(c.place.mode)
		if err != nil {
			return nil, fmt.Errorf("--placement %q: want proportional, tune, greedy or opt", c.place.mode)
		}
		mode = m
	}
	placing := mode != "" || cfg != nil && cfg.Placing()
	if !placing {
		for _, name := range []string{"cpus-per-server", "mem-per-server", "synergy-compat"} {
			if set[name] {
				return nil, fmt.Errorf("--%s needs --placement (or a config that sets placement)", name)
			}
		}
		return nil, nil
	}
	per := float64(max(c.perServer, 1))
	p := &sim.Placement{CoresPerServer: synergy.BaseCoresPerGPU * per, MemGBPerServer: synergy.BaseMemGBPerGPU * per,
		Compat: c.place.synergyCompat}
	if set["cpus-per-server"] {
		if !(c.place.cpus > 0) || math.IsInf(c.place.cpus, 0) {
			return nil, fmt.Errorf("--cpus-per-server %v: want a positive number of cores", c.place.cpus)
		}
		p.CoresPerServer = c.place.cpus
	}
	if set["mem-per-server"] {
		if !(c.place.memGB > 0) || math.IsInf(c.place.memGB, 0) {
			return nil, fmt.Errorf("--mem-per-server %v: want a positive number of GB", c.place.memGB)
		}
		p.MemGBPerServer = c.place.memGB
	}
	p.Mode = func(string) placement.Mode { return mode }
	if cfg != nil && cfg.Placing() {
		p.Mode = func(vc string) placement.Mode {
			if m := cfg.PlacementOf(vc); m != "" {
				return placement.Mode(m)
			}
			return mode
		}
		if cfg.Profiles != "" {
			tb, err := synergy.Load(cfg.Profiles)
			if err != nil {
				return nil, err
			}
			p.Profiles = tb
		}
	}
	return p, nil
}

// synergyTrace is --trace-format synergy: Synergy's synthetic workload
// for --trace continuous or static, else --trace FILE read; ok is false
// for other formats.
func (c *simulateCmd) synergyTrace() (src sim.Source, ok bool, err error) {
	switch c.place.traceFormat {
	case "", "gavel":
		if c.place.classSplit != "" {
			return nil, false, fmt.Errorf("--class-split needs --trace-format synergy")
		}
		return nil, false, nil
	case "synergy":
	default:
		return nil, false, fmt.Errorf("--trace-format %q: want gavel, synergy or dl2", c.place.traceFormat)
	}
	switch c.traceArg {
	case "philly":
		return nil, false, fmt.Errorf("--trace-format synergy: want --trace continuous, static or a trace FILE, not --trace philly")
	case "continuous", "static":
		return c.synergySynthetic()
	}
	if c.place.classSplit != "" {
		return nil, false, fmt.Errorf("--class-split needs --trace continuous or static (a trace FILE has its models)")
	}
	jobs, err := trace.ReadSynergyFile(c.traceArg, synergy.Default())
	if err != nil {
		return nil, false, err
	}
	if c.jobs > 0 && c.jobs < len(jobs) {
		jobs = jobs[:c.jobs]
	}
	return &sim.SliceSource{Jobs: jobs}, true, nil
}

// synergySynthetic is Synergy's synthetic workload (trace.SynergyGenerator):
// --trace continuous at --rate (jobs 4000-4999 measured unless --window or
// --jobs says otherwise) or --trace static with --jobs N.
func (c *simulateCmd) synergySynthetic() (sim.Source, bool, error) {
	o := trace.SynergyOptions{Seed: c.seed, Rate: c.rate, MultiGPU: c.multiGPU}
	if c.place.classSplit != "" {
		split, err := trace.ParseSynergySplit(c.place.classSplit)
		if err != nil {
			return nil, false, fmt.Errorf("--%v", err)
		}
		o.Split = split
	}
	if c.traceArg == "static" {
		o.Rate = 0
		if c.jobs <= 0 {
			return nil, false, fmt.Errorf("--trace static needs --jobs N")
		}
	} else if !(c.rate > 0) {
		return nil, false, fmt.Errorf("--rate %v: want a positive number of jobs per hour", c.rate)
	}
	g, err := trace.NewSynergyGenerator(o)
	if err != nil {
		return nil, false, err
	}
	if c.traceArg == "continuous" && c.window == "" && c.jobs == 0 {
		c.window = "4000:5000"
	}
	return &sim.GeneratorSource{G: g, Limit: c.jobs}, true, nil
}

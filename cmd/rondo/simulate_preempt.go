package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/sim"
)

// Preemption that respects the work (#21, docs/preemption.md): restart
// costs per job type (--preemption-cost realistic|FILE) and the engine's
// options for single-engine runs (with --vc-config they come from the
// config's VCs).

// preemptFlags are the engine's preemption options.
type preemptFlags struct {
	minRuntime, reserveAfter float64
	checkpointAware          bool
}

func (p *preemptFlags) register(f *flag.FlagSet) {
	f.Float64Var(&p.minRuntime, "min-runtime", 0, "SECONDS a started job keeps its GPUs before it may be suspended or moved (unless a GPU of it fails); its received time still counts (engine.Config.MinRuntimeS; 0: off)")
	f.BoolVar(&p.checkpointAware, "checkpoint-aware", false, "stop the running job that loses least (work since its last checkpoint, restore cost), skip starts and moves between GPU types that cost more than they gain, and give a victim with unsaved work one round's notice to checkpoint (engine.Config.CheckpointAware)")
	f.Float64Var(&p.reserveAfter, "reserve-after", 0, "SECONDS a waiting gang (scale factor > 1) waits before it gets a reservation of GPUs that smaller jobs only backfill (engine.Config.ReserveAfterS; 0: off)")
}

// set reports whether any of the options is on.
func (p *preemptFlags) set() bool {
	return p.minRuntime != 0 || p.checkpointAware || p.reserveAfter != 0
}

// check validates the options and refuses them where no single engine
// runs: with --vc-config (each VC's config sets them) or DL2's sizer.
func (p *preemptFlags) check(c *simulateCmd) error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"--min-runtime", p.minRuntime}, {"--reserve-after", p.reserveAfter}} {
		if !(v.v >= 0) || math.IsInf(v.v, 0) {
			return fmt.Errorf("%s %v: want a finite number of seconds ≥ 0", v.name, v.v)
		}
	}
	if !p.set() {
		return nil
	}
	if c.vc.config != "" {
		return fmt.Errorf("--min-runtime, --checkpoint-aware and --reserve-after are for a single engine: with --vc-config each VC's settings come from %s", c.vc.config)
	}
	if c.place.traceFormat == "dl2" {
		return fmt.Errorf("--min-runtime, --checkpoint-aware and --reserve-after are options of Gavel's mechanism, not of DL2's sizer (--trace-format dl2)")
	}
	return nil
}

// apply sets the engine's options.
func (p *preemptFlags) apply(e *engine.Config) {
	e.MinRuntimeS, e.CheckpointAware, e.ReserveAfterS = p.minRuntime, p.checkpointAware, p.reserveAfter
}

// restartCosts parses --preemption-cost: a number of seconds (the one
// scalar, as always), realistic (the embedded table) or a CSV file.
func (c *simulateCmd) restartCosts() error {
	s := strings.TrimSpace(c.preemptArg)
	c.preempt, c.costs = 0, nil
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("--preemption-cost %s: want SECONDS ≥ 0, realistic, or a CSV FILE", s)
		}
		c.preempt = v
		return nil
	}
	if s == "realistic" {
		c.costs = sim.RealisticCosts()
	} else {
		costs, err := sim.ReadCostsFile(s)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--preemption-cost %q: not SECONDS, realistic, nor a CSV FILE (%v)", s, err)
		}
		if err != nil {
			return fmt.Errorf("--preemption-cost: %w", err)
		}
		c.costs = costs
	}
	if c.place.traceFormat == "dl2" {
		return fmt.Errorf("--preemption-cost %s: restart costs per job type are not modelled for DL2's jobs (--trace-format dl2); give SECONDS", s)
	}
	if c.ideal {
		return fmt.Errorf("--preemption-cost %s: restart costs per job type need the round-based mechanism, not --ideal", s)
	}
	return nil
}

// writePreemptionLine prints the restart metrics of a run with restart
// costs per job type or the engine's preemption options.
func writePreemptionLine(w io.Writer, o sim.Options, res *sim.Result) {
	e := o.Engine
	if o.Costs == nil && e.MinRuntimeS == 0 && !e.CheckpointAware && e.ReserveAfterS == 0 {
		return
	}
	fmt.Fprintf(w, "restarts: %d (%d migrations), %.1f GPU-h lost to restarts, %d checkpoints on notice, %d jobs reserved for; large-gang (≥ 4 GPUs) wait avg %.2f h, p99 %.2f h\n",
		res.Restarts, res.Migrations, res.LostGPUS/3600, res.Noticed, res.Reserved, res.LargeGangWaitAvgS/3600, res.LargeGangWaitP99S/3600)
}

package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/sizer"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// dl2Flags are the options of `rondo simulate --trace-format dl2`.
type dl2Flags struct {
	model, speeds string
	noise         float64
}

func (d *dl2Flags) register(f *flag.FlagSet) {
	f.StringVar(&d.model, "dl2-model", "", "with --trace-format dl2 --policy dl2: the learned sizer's model FILE (default: the model Rondo ships)")
	f.StringVar(&d.speeds, "speeds", "", "with --trace-format dl2: measured speeds, a CSV FILE of model,ps,workers,epochs_per_hour lines, fitted per model over DL2's Table 1 models (policies/dl2 ReadSpeedCSV)")
	f.Float64Var(&d.noise, "speed-noise", 0.1, "with --trace-format dl2: sigma of each job's speed factor per slot (DL2's environment noise, seeded by --seed; 0: none)")
}

// DL2's testbed, the defaults of --trace-format dl2: 13 servers of 2 GPUs
// and 16 CPUs, 1200 s slots.
const (
	dl2DefaultCluster   = "v100=26"
	dl2DefaultPerServer = 2
	dl2DefaultSlotS     = 1200
)

// dl2Unsupported are simulate's flags that have no meaning for DL2 jobs.
var dl2Unsupported = []string{"vc-config", "ideal", "gavel-compat", "placement", "synergy-compat", "mem-per-server",
	"profiles-on-gpu", "class-split", "faults", "measure-noise", "hide-pairs", "multi-gpu", "multi-priority", "throughputs"}

// runDL2 is `rondo simulate --trace-format dl2`: a DL2 trace (--trace
// FILE of id,model,arrival_s,epochs lines, or generated: --jobs, --seed,
// --rate) sized each round (a DL2 slot, --round, default 1200 s) by
// --policy dl2|drf|fifo|optimus|srtf|tetris through allocator/sizer, in
// DL2's time model (sim.Options.DL2).
func (c *simulateCmd) runDL2() int {
	set := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range dl2Unsupported {
		if set[name] {
			return c.fail(fmt.Errorf("--%s is not supported with --trace-format dl2", name))
		}
	}
	if c.policy == "" {
		return c.fail(fmt.Errorf("--policy is required (with --trace-format dl2: %s)", strings.Join(sizerNames(), ", ")))
	}
	if c.policy != dl2Policy && set["dl2-model"] {
		return c.fail(fmt.Errorf("--dl2-model is for --policy dl2, not %s", c.policy))
	}
	slot := float64(dl2DefaultSlotS)
	if set["round"] {
		slot = c.round
	}
	if !(slot > 0) || math.IsInf(slot, 0) {
		return c.fail(fmt.Errorf("--round %v: want a positive number of seconds", slot))
	}
	if !(c.dl2.noise >= 0) || math.IsInf(c.dl2.noise, 0) {
		return c.fail(fmt.Errorf("--speed-noise %v: want a finite SIGMA ≥ 0", c.dl2.noise))
	}
	clusterArg, perServer, cpus := dl2DefaultCluster, dl2DefaultPerServer, sizer.DefaultCPUsPerServer
	if set["cluster"] {
		clusterArg = c.cluster
	}
	if set["gpus-per-server"] {
		perServer = c.perServer
	}
	if perServer < 1 {
		return c.fail(fmt.Errorf("--gpus-per-server %d: want at least 1", perServer))
	}
	if set["cpus-per-server"] {
		if v := c.place.cpus; !(v >= 1) || v != math.Trunc(v) || v > math.MaxInt32 {
			return c.fail(fmt.Errorf("--cpus-per-server %v: want a whole number of CPUs ≥ 1", v))
		}
		cpus = int(c.place.cpus)
	}
	types, err := sim.ParseCluster(clusterArg)
	if err != nil {
		return c.fail(err)
	}
	prices, err := parsePrices(c.prices)
	if err != nil {
		return c.fail(err)
	}
	models := dl2.Table1()
	if c.dl2.speeds != "" {
		f, err := os.Open(c.dl2.speeds)
		if err != nil {
			return c.fail(err)
		}
		models, err = dl2.ReadSpeedCSV(c.dl2.speeds, f, models)
		f.Close()
		if err != nil {
			return c.fail(err)
		}
	}
	jobs, err := c.dl2Trace(set, models, slot)
	if err != nil {
		return c.fail(err)
	}
	if err := dl2Fits(jobs, models, types, perServer, cpus); err != nil {
		return c.fail(err)
	}
	sz, err := dl2Sizer(c.policy, c.dl2.model, func(format string, args ...any) {
		fmt.Fprintf(c.stderr, "rondo simulate: "+format+"\n", args...)
	})
	if err != nil {
		return c.fail(err)
	}
	d, err := sizerMechanism(sz, models, cpus)
	if err != nil {
		return c.fail(err)
	}
	tj, err := sim.DL2Jobs(models, jobs)
	if err != nil {
		return c.fail(err)
	}
	o := sim.Options{
		Cluster:         sim.Cluster{Types: types, GPUsPerServer: perServer, PricePerHourUS: prices},
		Engine:          engine.Config{Policy: sz.Name(), RoundS: slot},
		Decider:         d,
		DL2:             &sim.DL2{Models: models, Noise: c.dl2.noise, Seed: c.seed},
		PreemptionCostS: c.preempt, StartCostS: c.startCost, MaxTimeS: c.maxTime, MaxActive: c.maxActive,
	}
	if c.window != "" {
		if o.WindowStart, o.WindowEnd, err = parseWindow(c.window); err != nil {
			return c.fail(err)
		}
	}
	return c.simulate(&sim.SliceSource{Jobs: tj}, o)
}

// dl2Trace is the run's DL2 trace: --trace FILE (dl2.ParseTrace: errors
// name the file, line and field), else generated (dl2.Generate: --jobs,
// default 200; --seed; --rate in jobs per hour, default DL2's 2 per
// 1200 s slot) on the slot length.
func (c *simulateCmd) dl2Trace(set map[string]bool, models dl2.Models, slot float64) ([]dl2.TraceJob, error) {
	if c.jobs < 0 {
		return nil, fmt.Errorf("--jobs %d: want a positive number", c.jobs)
	}
	switch {
	case set["trace"] && c.traceArg == "static":
		return nil, fmt.Errorf("--trace-format dl2: want --trace continuous (generated) or a trace FILE, not --trace static")
	case !set["trace"] || c.traceArg == "continuous":
		o := dl2.GenOptions{Jobs: c.jobs, SlotS: slot, Seed: c.seed}
		if set["rate"] {
			if !(c.rate > 0) || math.IsInf(c.rate, 0) {
				return nil, fmt.Errorf("--rate %v: want a positive number of jobs per hour", c.rate)
			}
			o.JobsPerSlot = c.rate * slot / 3600
		}
		return dl2.Generate(o, models), nil
	}
	f, err := os.Open(c.traceArg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	jobs, err := dl2.ParseTrace(c.traceArg, f, models)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s: no jobs", c.traceArg)
	}
	if c.jobs > 0 && c.jobs < len(jobs) {
		jobs = jobs[:c.jobs]
	}
	return jobs, nil
}

// dl2Fits refuses a job whose minimum does not fit the empty cluster (it
// would never run).
func dl2Fits(jobs []dl2.TraceJob, models dl2.Models, types map[string]int, perServer, cpus int) error {
	var servers []dl2.Server
	for _, n := range sim.ServerNodes(types, perServer) {
		g := 0
		for _, c := range n.GPUs {
			g += c
		}
		servers = append(servers, dl2.Server{GPUs: g, CPUs: cpus})
	}
	// One check per model: the minimum depends only on it.
	names := map[string]string{}
	for _, t := range jobs {
		if _, ok := names[t.Model]; !ok {
			names[t.Model] = t.ID
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, model := range keys {
		j := models.JobFor(dl2.TraceJob{ID: names[model], Model: model, Epochs: 1})
		if s := dl2.NewSlot(servers, []dl2.Job{j}, nil); !s.Running(0) {
			d := j.Demand
			return fmt.Errorf("job %s (%s): its minimum (%d worker of %d GPUs and %d CPUs, %d PS of %d CPUs) does not fit the empty cluster (--cluster, --gpus-per-server, --cpus-per-server %d)",
				names[model], model, j.Bounds.MinWorkers, d.WorkerGPUs, d.WorkerCPUs, j.Bounds.MinPS, d.PSCPUs, cpus)
		}
	}
	return nil
}

package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/internal/progress"
	"github.com/rondo-sched/rondo/policies"
)

func init() {
	register("simulate", func() (cli.Command, error) { return newSimulate(), nil })
}

type simulateCmd struct {
	base
	cluster, policy, traceArg, window, tputFile, outDir, prices, cpuProfile string
	faultsFile, preemptArg                                                  string
	perServer, jobs, maxActive                                              int
	rate, round, preempt, startCost, maxTime, measureNoise, hidePairs       float64
	seed                                                                    int64
	multiGPU, multiPriority, jsonOut, compat, ideal, progress, explain      bool
	coldSolve                                                               bool
	vc                                                                      vcFlags
	place                                                                   placeFlags
	dl2                                                                     dl2Flags
	pre                                                                     preemptFlags
	// costs: --preemption-cost realistic|FILE (else nil, and preempt the
	// seconds).
	costs *sim.Costs
}

// placeFlags are the CPU and memory placement options (allocator/placement,
// docs/synergy.md).
type placeFlags struct {
	traceFormat, mode, classSplit string
	cpus, memGB                   float64
	synergyCompat                 bool
	onGPU                         string // --profiles-on-gpu (simulate_het.go)
}

func newSimulate() *simulateCmd {
	c := &simulateCmd{base: newBase("simulate", "Simulate a policy on a trace with the round-based mechanism",
		"--policy NAME [options]")}
	f := c.flags
	f.StringVar(&c.cluster, "cluster", "v100=36,p100=36,k80=36", "GPUs per type (with --trace-format dl2 the default is v100=26 and --gpus-per-server 2: DL2's testbed of 13 servers)")
	f.IntVar(&c.perServer, "gpus-per-server", 1, "GPUs per server")
	f.StringVar(&c.policy, "policy", "", "policy name (see 'rondo policy list'; with --trace-format dl2 a sizing policy: dl2, drf, fifo, optimus, srtf or tetris)")
	f.StringVar(&c.traceArg, "trace", "continuous", "continuous, static, or a trace FILE (Gavel .trace or JSON lines)")
	f.Float64Var(&c.rate, "rate", 4.0, "arrival rate, jobs per hour (continuous traces)")
	f.Int64Var(&c.seed, "seed", 0, "random seed")
	f.BoolVar(&c.multiGPU, "multi-gpu", false, "generate multi-GPU jobs")
	f.BoolVar(&c.multiPriority, "multi-priority", false, "generate high-priority jobs (20% at weight 5)")
	f.IntVar(&c.jobs, "jobs", 0, "number of jobs (static traces; caps continuous ones)")
	f.Float64Var(&c.round, "round", 360, "round length, seconds (with --trace-format dl2: the slot, default 1200)")
	f.StringVar(&c.window, "window", "", "measured job ids START:END (default 4000:5000 for continuous traces, all jobs otherwise)")
	f.StringVar(&c.tputFile, "throughputs", "", "throughput JSON file (default: the embedded Gavel measurements)")
	f.StringVar(&c.outDir, "out", "", "directory for per-job results (jobs.csv)")
	f.BoolVar(&c.jsonOut, "json", false, "print one JSON object with the metrics")
	f.BoolVar(&c.progress, "progress", false, "a progress bar with ETA on stderr even when it is not a terminal (default: only on a terminal)")
	f.BoolVar(&c.compat, "gavel-compat", false, "reproduce the reference implementation's mechanism quirks")
	f.BoolVar(&c.ideal, "ideal", false, "realize the allocation fluidly instead of in rounds")
	f.BoolVar(&c.coldSolve, "cold-solve", false, "single-policy runs: solve every recompute from scratch, as before aware LAS (max_min_fairness_perf) was re-solved incrementally and the space-sharing policies started from the last recompute's basis: the same optimum's value, not always the same optimum (engine.Config.ColdSolve; --gavel-compat always does)")
	f.StringVar(&c.preemptArg, "preemption-cost", "0", "restart costs: SECONDS lost when a job (re)starts after running (checkpoint + restore), or realistic (per job type: start, restore, checkpoint and checkpoint interval from the embedded allocator/sim/costs/realistic.csv; a stop without notice loses the work since the job's last checkpoint), or a CSV FILE of the same columns (model,start_s,restore_s,checkpoint_s,interval_s; docs/preemption.md)")
	f.Float64Var(&c.startCost, "start-cost", 0, "seconds lost by every start on new GPUs, the first included (a real cluster's task start latency)")
	f.StringVar(&c.prices, "prices", "v100=3.06,p100=1.46,k80=0.90", "dollars per GPU-hour, for the cost metric")
	f.Float64Var(&c.maxTime, "max-time", 0, "stop at this virtual time, seconds (0: run to the end of the window)")
	c.vc.register(f)
	c.dl2.register(f)
	c.pre.register(f)
	f.IntVar(&c.maxActive, "max-active", 0, "stop once more than this many jobs are active at once (0: no limit)")
	f.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	f.BoolVar(&c.explain, "explain", false, "tell why each waiting job waits every round (the agent's pending reasons, engine.ExplainQuotas) and count the job-rounds per reason in the JSON's waiting_reasons (costs a few percent of the run's time)")
	f.StringVar(&c.faultsFile, "faults", "", "fault-injection CSV FILE of time_s,kind,target lines (allocator/faults)")
	f.Float64Var(&c.hidePairs, "hide-pairs", 0, "hide this fraction of the table's measured pairs (per GPU type, seeded by --seed) from the packing policy, which sees their matrix-completion estimates instead (estimator.HidePairs); they still run at the table's throughputs")
	f.StringVar(&c.place.traceFormat, "trace-format", "", "format of a --trace FILE: gavel (a Gavel .trace or JSON lines, the default), synergy (Synergy's job_id,model,arrival_s,iterations,gpus lines; models name allocator/synergy profiles) or dl2 (DL2's id,model,arrival_s,epochs lines, models of DL2's Table 1; jobs sized each slot in workers and parameter servers by --policy dl2|drf|fifo|optimus|srtf|tetris); with --trace continuous or static, synergy draws Synergy's synthetic workload instead of Gavel's (models by class, Gavel-like durations, one GPU a job or with --multi-gpu 1/2/4/8, seeded by --seed: 42 is the reference's); with --trace continuous (or no --trace), dl2 generates DL2's workload (--jobs, default 200; --seed; --rate in jobs per hour, default DL2's 2 per slot)")
	f.StringVar(&c.place.classSplit, "class-split", "", "with --trace-format synergy and --trace continuous|static: percent of image/language/speech jobs (default 20/70/10; the paper also uses 33/33/33 and 50/0/50)")
	f.StringVar(&c.place.mode, "placement", "", "CPU and memory placement: proportional, tune, greedy or opt (servers get --cpus-per-server and --mem-per-server; jobs run at their profile's speed for what they get)")
	f.Float64Var(&c.place.cpus, "cpus-per-server", 0, "CPU cores per server, with --placement (default 3 per GPU) or --trace-format dl2 (whole CPUs, default 16)")
	f.Float64Var(&c.place.memGB, "mem-per-server", 0, "memory per server in GB, with --placement (default 62.5 per GPU)")
	f.StringVar(&c.place.onGPU, "profiles-on-gpu", "", "with --placement: scaled (default: a profile, measured on V100s, is scaled to the job's speed on its GPU type: c cores there act as c / ratio on a V100) or same (the profile as measured on every type)")
	f.BoolVar(&c.place.synergyCompat, "synergy-compat", false, "with --placement: credit only the two speeds Synergy's reference simulator credits (best case or proportional) and re-place every job every round at no cost, no leftover step")
	f.Float64Var(&c.measureNoise, "measure-noise", 0, "jobs report measured throughputs, true × exp(N(0, SIGMA)) (seeded by --seed), that the round's estimator learns (0: decide on the true throughputs)")
	return c
}

func parseWindow(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi <= lo {
		return 0, 0, fmt.Errorf("--window %q: want START:END with 0 <= START < END", s)
	}
	return lo, hi, nil
}

func parsePrices(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || f < 0 {
			return nil, fmt.Errorf("--prices %q: want type=dollars[,...]", s)
		}
		out[strings.TrimSpace(k)] = f
	}
	return out, nil
}

func (c *simulateCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if err := c.restartCosts(); err != nil {
		return c.fail(err)
	}
	if err := c.pre.check(c); err != nil {
		return c.fail(err)
	}
	if c.place.traceFormat == "dl2" {
		return c.runDL2()
	}
	var dl2Set error
	c.flags.Visit(func(f *flag.Flag) {
		if f.Name == "dl2-model" || f.Name == "speeds" || f.Name == "speed-noise" {
			dl2Set = fmt.Errorf("--%s needs --trace-format dl2", f.Name)
		}
	})
	if dl2Set != nil {
		return c.fail(dl2Set)
	}
	if !(c.measureNoise >= 0) || math.IsInf(c.measureNoise, 0) {
		return c.fail(fmt.Errorf("--measure-noise %v: want a finite SIGMA ≥ 0", c.measureNoise))
	}
	if c.vc.config != "" {
		if c.coldSolve {
			// The VCs' engines are the agent's (allocator/round).
			return c.fail(fmt.Errorf("--cold-solve is for single-policy runs, not --vc-config"))
		}
		if !c.phillyTrace() {
			return c.runVCSim()
		}
		if c.faultsFile != "" {
			return c.fail(fmt.Errorf("--faults with --vc-config needs a Gavel trace (--trace continuous|static|FILE), not a Philly one"))
		}
		if c.measureNoise != 0 {
			return c.fail(fmt.Errorf("--measure-noise with --vc-config needs a Gavel trace (--trace continuous|static|FILE), not a Philly one"))
		}
		return c.runVC()
	}
	if c.policy == "" {
		return c.fail(fmt.Errorf("--policy is required"))
	}
	types, err := sim.ParseCluster(c.cluster)
	if err != nil {
		return c.fail(err)
	}
	prices, err := parsePrices(c.prices)
	if err != nil {
		return c.fail(err)
	}
	tb := throughputs.Default()
	if c.tputFile != "" {
		if tb, err = throughputs.Load(c.tputFile); err != nil {
			return c.fail(err)
		}
	}
	o := sim.Options{
		Cluster:     sim.Cluster{Types: types, GPUsPerServer: c.perServer, PricePerHourUS: prices},
		Engine:      engine.Config{Policy: c.policy, RoundS: c.round, GavelCompat: c.compat, Seed: c.seed, ColdSolve: c.coldSolve},
		Throughputs: tb, Ideal: c.ideal, PreemptionCostS: c.preempt, StartCostS: c.startCost, MaxTimeS: c.maxTime,
		MaxActive: c.maxActive, MeasureNoise: c.measureNoise, Costs: c.costs, Explain: c.explain,
	}
	c.pre.apply(&o.Engine)
	if o.HiddenPairs, err = c.hiddenPairs(tb); err != nil {
		return c.fail(err)
	}
	if canon, _ := policies.Canonical(c.policy); canon == dl2Policy {
		return c.fail(fmt.Errorf("--policy dl2 sizes DL2 jobs in workers and parameter servers: run it with --trace-format dl2 (or a dl2 VC of --vc-config)"))
	}
	if canon, _ := policies.Canonical(c.policy); canon == rhcl.GandivaFairPolicy {
		// Gandiva-fair's own mechanism on the cluster's servers, every
		// user at the default tickets (--vc-config declares tickets).
		if c.ideal {
			return c.fail(fmt.Errorf("--ideal needs a policy of Gavel's mechanism, not gandiva_fair"))
		}
		m, err := fairMechanism(rhcl.VC{Policy: rhcl.GandivaFairPolicy}, c.round, false)
		if err != nil {
			return c.fail(err)
		}
		o.Decider, o.Nodes = &round.Single{Mechanism: m}, sim.ServerNodes(types, c.perServer)
		if c.pre.set() {
			return c.fail(fmt.Errorf("--min-runtime, --checkpoint-aware and --reserve-after are options of Gavel's mechanism (the engine), not of gandiva_fair's"))
		}
	}
	if c.pre.set() && c.ideal {
		return c.fail(fmt.Errorf("--min-runtime, --checkpoint-aware and --reserve-after need the round-based mechanism, not --ideal"))
	}
	if c.measureNoise > 0 && c.ideal {
		return c.fail(fmt.Errorf("--measure-noise is not supported with --ideal (nothing runs in rounds to measure)"))
	}
	if c.faultsFile != "" {
		if o.Faults, err = faults.ReadFile(c.faultsFile); err != nil {
			return c.fail(err)
		}
	}
	if o.Placement, err = c.simPlacement(nil); err != nil {
		return c.fail(err)
	}
	if err = c.profileScaling(o.Placement); err != nil {
		return c.fail(err)
	}
	if o.Placement != nil && o.Placement.Compat {
		// The reference's time model: rounds on the grid 1 + k × round
		// (its static replay starts at t = 1 s; its synthetic continuous
		// workload at t = 0), every job holding its resources to the
		// round's end and finishing there.
		o.RoundGrid, o.GridOriginS, o.FinishAtRoundEnd = true, 1, true
		if c.place.traceFormat == "synergy" && c.traceArg == "continuous" {
			o.GridOriginS = 0
		}
	}
	src, err := c.source(tb, nil)
	if err != nil {
		return c.fail(err)
	}
	if c.window != "" {
		if o.WindowStart, o.WindowEnd, err = parseWindow(c.window); err != nil {
			return c.fail(err)
		}
	}
	return c.simulate(src, o)
}

// hiddenPairs is --hide-pairs: nil at 0, else the table with that
// fraction of its pairs hidden and estimated (seeded by --seed).
func (c *simulateCmd) hiddenPairs(tb *throughputs.Table) (*estimator.Hidden, error) {
	if !(c.hidePairs >= 0 && c.hidePairs < 1) {
		return nil, fmt.Errorf("--hide-pairs %v: want a fraction in [0, 1)", c.hidePairs)
	}
	if c.hidePairs == 0 {
		return nil, nil
	}
	return estimator.HidePairs(tb, c.hidePairs, uint64(c.seed), estimator.DefaultOptions)
}

// source is the --trace: Gavel's continuous or static generator, or a
// trace file (check, if set, vets each job of a JSON-lines file).
func (c *simulateCmd) source(tb *throughputs.Table, check func(trace.Job) error) (sim.Source, error) {
	if src, ok, err := c.synergyTrace(); ok || err != nil {
		return src, err
	}
	switch c.traceArg {
	case "continuous", "static":
		rate := c.rate
		if c.traceArg == "static" {
			rate = 0
			if c.jobs <= 0 {
				return nil, fmt.Errorf("--trace static needs --jobs N")
			}
		}
		g, err := trace.NewGenerator(trace.Options{Seed: c.seed, Rate: rate, MultiGPU: c.multiGPU,
			MultiPriority: c.multiPriority, Throughputs: tb})
		if err != nil {
			return nil, err
		}
		if c.traceArg == "continuous" && c.window == "" && c.jobs == 0 {
			c.window = "4000:5000"
		}
		return &sim.GeneratorSource{G: g, Limit: c.jobs}, nil
	default:
		jobs, err := trace.ReadFileCheck(c.traceArg, check)
		if err != nil {
			return nil, err
		}
		if c.jobs > 0 && c.jobs < len(jobs) {
			jobs = jobs[:c.jobs]
		}
		return &sim.SliceSource{Jobs: jobs}, nil
	}
}

// simulate runs o on src and prints the result (text or --json, --out).
func (c *simulateCmd) simulate(src sim.Source, o sim.Options) int {
	if os.Getenv("GOGC") == "" {
		// A run allocates short-lived rounds' data on a small heap
		// (~60 MiB): collecting at 4x the live heap instead of 2x cuts
		// the run's CPU by about a quarter (docs/performance.md,
		// "Simulator: the Figure 8 point").
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	if bar := progress.NewIf(c.stderr, c.progress, "simulate", simTotal(src, o)); bar != nil {
		// Jobs finished (of the measured window) with an ETA, on stderr
		// only: --json's stdout stays one object.
		o.Progress = func(now float64, rounds, active, done int) {
			bar.Set(done, fmt.Sprintf("t=%.1fh rounds=%d active=%d", now/3600, rounds, active))
		}
		defer bar.Done(false)
	}
	if c.cpuProfile != "" {
		pf, err := os.Create(c.cpuProfile)
		if err != nil {
			return c.fail(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return c.fail(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	res, err := sim.Run(src, o)
	if err != nil {
		return c.fail(err)
	}
	if h := o.HiddenPairs; h != nil {
		res.HiddenPairs, res.HiddenPairMRE = h.Pairs, h.MRE
	}
	if c.outDir != "" {
		if err := writeJobsCSV(c.outDir, res.Jobs); err != nil {
			return c.fail(err)
		}
	}
	if c.jsonOut {
		if err := json.NewEncoder(c.stdout).Encode(res); err != nil {
			return c.fail(err)
		}
	} else {
		fmt.Fprintf(c.stdout, "policy %s: %d/%d jobs in window done, avg JCT %.2f h (p50 %.2f h, p99 %.2f h), makespan %.2f h\n",
			res.Policy, res.JobsDone, res.JobsInWindow, res.AvgJCTS/3600, res.P50JCTS/3600, res.P99JCTS/3600, res.MakespanS/3600)
		fmt.Fprintf(c.stdout, "utilization %.3f, %d rounds, %d recomputes, %d preemptions, solve p50 %.1f ms max %.1f ms, cost $%.0f, wall %.1f s\n",
			res.Utilization, res.Rounds, res.Recomputes, res.Preemptions, res.SolveMSP50, res.SolveMSMax, res.CostUSD, res.WallS)
		if o.Faults != nil {
			fmt.Fprintf(c.stdout, "faults: %d GPU failures, %d micro-tasks interrupted (preemptions include their jobs)\n",
				res.GPUFailures, res.FaultInterruptions)
		}
		if h := o.HiddenPairs; h != nil {
			fmt.Fprintf(c.stdout, "hidden pairs: %d, estimated by matrix completion (normalized throughput MAE %.3f, MRE %.1f%%)\n",
				h.Pairs, h.MAE, 100*h.MRE)
		}
		if o.MeasureNoise > 0 {
			fmt.Fprintf(c.stdout, "measured throughputs (noise sigma %g): estimates off by %.2f%% on average\n",
				o.MeasureNoise, 100*res.EstimateErrorMean)
		}
		writePreemptionLine(c.stdout, o, res)
		writeVCLines(c.stdout, res)
	}
	if !res.Finished {
		fmt.Fprintf(c.stderr, "rondo simulate: stopped at t=%.0f s before every measured job finished\n", res.EndS)
		return 2
	}
	return 0
}

func writeJobsCSV(dir string, jobs []sim.JobResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "jobs.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "model", "scale_factor", "priority", "arrival_s", "start_s", "finish_s", "jct_s", "total_steps", "rho", "cost_usd", "in_window", "done"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, j := range jobs {
		_ = w.Write([]string{strconv.Itoa(j.ID), j.Model, strconv.Itoa(j.ScaleFactor), g(j.Priority), g(j.ArrivalS), g(j.StartS),
			g(j.FinishS), g(j.JCTS), g(j.TotalSteps), g(j.Rho), g(j.CostUSD), strconv.FormatBool(j.InWindow), strconv.FormatBool(j.Done)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// simTotal is how many finished jobs end the run, for the progress bar:
// the measured window, else the trace's jobs (0: not known ahead).
func simTotal(src sim.Source, o sim.Options) int {
	if o.WindowEnd > 0 {
		return o.WindowEnd - o.WindowStart
	}
	switch s := src.(type) {
	case *sim.SliceSource:
		return len(s.Jobs)
	case *sim.GeneratorSource:
		return s.Limit
	case *vcAssigner:
		return simTotal(s.src, o)
	}
	return 0
}

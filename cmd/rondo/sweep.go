package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/sim/sweep"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/internal/progress"
)

func init() {
	register("simulate sweep", func() (cli.Command, error) { return newSweep(), nil })
}

type sweepCmd struct {
	base
	cluster, policies, rates, seeds, traceArg, window, tputFile, outDir, title string
	traceFormat, classSplit                                                    string
	perServer, jobs, parallel, maxActive                                       int
	round, maxTime, cdfRate, yMax, cpus, memGB                                 float64
	multiGPU, multiPriority, compat, ideal, resume, plotOnly, synergyCompat    bool
	progress                                                                   bool
	nomad                                                                      sweepNomad
}

func newSweep() *sweepCmd {
	c := &sweepCmd{base: newBase("simulate sweep", "Simulate policies × rates × seeds in parallel and plot average JCT vs input rate",
		"--policies A,B --rates LO:HI:STEP --seeds 0:2 --out DIR [options]")}
	f := c.flags
	f.StringVar(&c.cluster, "cluster", "v100=36,p100=36,k80=36", "GPUs per type")
	f.IntVar(&c.perServer, "gpus-per-server", 1, "GPUs per server")
	f.StringVar(&c.policies, "policies", "", "comma-separated policy specs: NAME[+ideal][+compat|+default][+proportional|+tune|+greedy|+opt] (the last: CPU/memory placement, servers sized by --cpus-per-server and --mem-per-server)")
	f.StringVar(&c.rates, "rates", "0.4:6.0:0.4", "input rates, jobs/h: a list (0.8,2.4) or LO:HI:STEP")
	f.StringVar(&c.seeds, "seeds", "0:2", "seeds: a list (0,1,2) or LO:HI (inclusive)")
	f.StringVar(&c.traceArg, "trace", "continuous", "continuous or static")
	f.BoolVar(&c.multiGPU, "multi-gpu", false, "generate multi-GPU jobs")
	f.BoolVar(&c.multiPriority, "multi-priority", false, "generate high-priority jobs (20% at weight 5)")
	f.IntVar(&c.jobs, "jobs", 0, "number of jobs (static traces; caps continuous ones)")
	f.Float64Var(&c.round, "round", 360, "round length, seconds")
	f.StringVar(&c.window, "window", "", "measured job ids START:END (default 4000:5000 for continuous traces, all jobs otherwise)")
	f.StringVar(&c.tputFile, "throughputs", "", "throughput JSON file (default: the embedded Gavel measurements)")
	f.BoolVar(&c.compat, "gavel-compat", false, "reproduce the reference implementation's mechanism quirks")
	f.BoolVar(&c.ideal, "ideal", false, "realize the allocation fluidly instead of in rounds")
	f.Float64Var(&c.maxTime, "max-time", 0, "stop a run at this virtual time, seconds (0: 4x the window's last arrival + 2,000 h)")
	f.IntVar(&c.maxActive, "max-active", 2500, "stop a run once more jobs than this are active (the rate is not sustained); 0: no limit")
	f.IntVar(&c.parallel, "parallel", runtime.GOMAXPROCS(0), "concurrent runs; with -on-nomad the points in Nomad at once (default there 0: no limit, Nomad queues them)")
	f.StringVar(&c.outDir, "out", "", "output directory (runs.csv, summary.csv, results.json, jct_vs_rate.svg, jct_cdf.svg)")
	f.Float64Var(&c.cdfRate, "cdf-rate", 0, "rate of the JCT CDF plot (default: the highest rate every policy finished)")
	f.BoolVar(&c.resume, "resume", false, "reuse the finished runs journaled in DIR/runs.jsonl by an earlier, interrupted sweep")
	f.BoolVar(&c.plotOnly, "plot-only", false, "run nothing: summarize and plot the runs journaled in DIR/runs.jsonl")
	f.StringVar(&c.traceFormat, "trace-format", "", "synergy: Synergy's synthetic workload (models by class, Gavel-like durations, --multi-gpu for its 1/2/4/8-GPU draws; seed 42 is the reference's) instead of Gavel's")
	f.StringVar(&c.classSplit, "class-split", "", "with --trace-format synergy: percent of image/language/speech jobs (default 20/70/10)")
	f.Float64Var(&c.cpus, "cpus-per-server", 0, "CPU cores per server for +PLACEMENT specs (default 3 per GPU)")
	f.Float64Var(&c.memGB, "mem-per-server", 0, "memory per server in GB for +PLACEMENT specs (default 62.5 per GPU)")
	f.BoolVar(&c.synergyCompat, "synergy-compat", false, "+PLACEMENT specs run in Synergy's reference model (two speeds, re-placed every round, its round grid; see rondo simulate)")
	f.StringVar(&c.title, "title", "", "figure title")
	f.BoolVar(&c.progress, "progress", false, "a progress bar with ETA on stderr even when it is not a terminal (default: only on a terminal)")
	f.Float64Var(&c.yMax, "ymax", 0, "top of the JCT axis, hours (0: automatic)")
	c.nomad.register(f)
	return c
}

// parseFloats reads "a,b,c" or "lo:hi:step" (inclusive, rounded to the step's decimals).
func parseFloats(s string) ([]float64, error) {
	if parts := strings.Split(s, ":"); len(parts) == 3 {
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("%q: want LO:HI:STEP", s)
			}
			v[i] = f
		}
		if v[2] <= 0 || v[1] < v[0] {
			return nil, fmt.Errorf("%q: want LO <= HI and STEP > 0", s)
		}
		var out []float64
		for k := 0; ; k++ {
			x := math.Round((v[0]+float64(k)*v[2])*1e9) / 1e9
			if x > v[1]+1e-9 {
				break
			}
			out = append(out, x)
		}
		return out, nil
	}
	var out []float64
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: want a comma-separated list or LO:HI:STEP", s)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: empty list", s)
	}
	return out, nil
}

func parseSeeds(s string) ([]int64, error) {
	if a, b, ok := strings.Cut(s, ":"); ok {
		lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		if err1 != nil || err2 != nil || hi < lo {
			return nil, fmt.Errorf("--seeds %q: want LO:HI", s)
		}
		var out []int64
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out, nil
	}
	var out []int64
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: want a list or LO:HI", s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds %q: empty", s)
	}
	return out, nil
}

func (c *sweepCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.policies == "" || c.outDir == "" {
		return c.fail(fmt.Errorf("--policies and --out are required"))
	}
	if err := c.nomad.check(c.flags); err != nil {
		return c.fail(err)
	}
	if c.nomad.on && !flagGiven(c.flags, "parallel") {
		c.parallel = 0
	}
	types, err := sim.ParseCluster(c.cluster)
	if err != nil {
		return c.fail(err)
	}
	rates, err := parseFloats(c.rates)
	if err != nil {
		return c.fail(fmt.Errorf("--rates %v", err))
	}
	seeds, err := parseSeeds(c.seeds)
	if err != nil {
		return c.fail(err)
	}
	tb := throughputs.Default()
	if c.tputFile != "" {
		if tb, err = throughputs.Load(c.tputFile); err != nil {
			return c.fail(err)
		}
	}
	cfg := sweep.Config{Seeds: seeds, Rates: rates, Parallel: c.parallel,
		Trace: sweep.Trace{MultiGPU: c.multiGPU, MultiPriority: c.multiPriority, Jobs: c.jobs},
		Options: sim.Options{
			Cluster:     sim.Cluster{Types: types, GPUsPerServer: c.perServer, PricePerHourUS: sim.DefaultPrices},
			Engine:      engine.Config{RoundS: c.round, GavelCompat: c.compat},
			Throughputs: tb, Ideal: c.ideal, MaxTimeS: c.maxTime, MaxActive: c.maxActive,
		}}
	placing := false
	for _, p := range strings.Split(c.policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			sp, err := sweep.ParseSpec(p)
			if err != nil {
				return c.fail(err)
			}
			placing = placing || sp.Placement != ""
			cfg.Policies = append(cfg.Policies, p)
		}
	}
	switch c.traceArg {
	case "continuous":
		if c.window == "" && c.jobs == 0 {
			c.window = "4000:5000"
		}
	case "static":
		cfg.Trace.Static = true
		if c.jobs <= 0 {
			return c.fail(fmt.Errorf("--trace static needs --jobs N"))
		}
	default:
		return c.fail(fmt.Errorf("--trace %q: want continuous or static", c.traceArg))
	}
	if err := c.placementOptions(&cfg, placing); err != nil {
		return c.fail(err)
	}
	if c.window != "" {
		if cfg.Options.WindowStart, cfg.Options.WindowEnd, err = parseWindow(c.window); err != nil {
			return c.fail(err)
		}
	}
	if c.maxTime == 0 && !cfg.Trace.Static && cfg.Options.WindowEnd > 0 {
		// Generous: a sustained rate finishes its window well before this.
		end := float64(cfg.Options.WindowEnd)
		cfg.MaxTimeFor = func(rate float64) float64 { return 4*end/rate*3600 + 2000*3600 }
	}
	if err := os.MkdirAll(c.outDir, 0o755); err != nil {
		return c.fail(err)
	}
	journal := filepath.Join(c.outDir, "runs.jsonl")
	if c.resume || c.plotOnly {
		if cfg.Done, err = sweep.ReadJournal(journal); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.stderr, "resuming: %d runs already done\n", len(cfg.Done))
	} else if err := os.Remove(journal); err != nil && !os.IsNotExist(err) {
		return c.fail(err)
	}
	jf, err := os.OpenFile(journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return c.fail(err)
	}
	defer jf.Close()
	start := time.Now()
	executed := 0
	// The runs left (resumed ones excluded) with an ETA, under the per-run
	// lines; on stderr, and only on a terminal unless -progress.
	wantBar := progress.Enabled(c.stderr, c.progress)
	var bar *progress.Bar
	defer func() { bar.Done(true) }()
	// logLine prints a line above the bar (or alone without one).
	logLine := func(line string) {
		if bar == nil {
			fmt.Fprintln(c.stderr, line)
			return
		}
		bar.Line(line)
	}
	// onRun reports one finished run; journal: append it to runs.jsonl
	// (not a point Nomad failed to run, so that -resume retries it).
	onRun := func(done, total int, r *sweep.Run, journal bool) {
		executed++
		if bar == nil && wantBar {
			bar = progress.New(c.stderr, "sweep", total)
		}
		if journal {
			if err := sweep.AppendJournal(jf, r); err != nil {
				fmt.Fprintf(c.stderr, "rondo simulate sweep: journal: %v\n", err)
			}
		}
		status := "ok"
		switch {
		case r.Error != "":
			status = "error: " + r.Error
		case !r.Finished():
			status = fmt.Sprintf("unfinished at t=%.0f h", r.Result.EndS/3600)
		default:
			status = fmt.Sprintf("avg JCT %.2f h", r.Result.AvgJCTS/3600)
		}
		wall := 0.0
		if r.Result != nil {
			wall = r.Result.WallS
		}
		line := fmt.Sprintf("[%d/%d %.0fs] %s rate=%g seed=%d: %s (%.1f s, %.0f sim-h/s)", done, total,
			time.Since(start).Seconds(), r.Policy, r.Rate, r.Seed, status, wall, r.SimHoursPerWallS)
		logLine(line)
		if bar != nil {
			bar.Set(done, "")
		}
	}
	cfg.Progress = func(done, total int, r *sweep.Run) { onRun(done, total, r, true) }
	var runs []sweep.Run
	failedOnNomad := 0
	switch {
	case c.plotOnly:
		runs = cfg.Done
	case c.nomad.on:
		if runs, failedOnNomad, err = c.executeOnNomad(cfg, onRun, logLine); err != nil {
			return c.fail(err)
		}
	default:
		if runs, err = sweep.Execute(cfg); err != nil {
			return c.fail(err)
		}
	}
	bar.Done(true)
	rep := &sweep.Report{Command: "rondo " + strings.Join(os.Args[1:], " "), Runs: runs, Points: sweep.Summarize(runs),
		ElapsedS: time.Since(start).Seconds(), Parallel: c.parallel}
	rep.SimHours, rep.RunWallS = sweep.Throughput(runs)
	if c.plotOnly || executed == 0 {
		rep.ElapsedS = 0 // nothing ran (or all resumed); the runs' own wall times are kept
	} else if rep.ElapsedS > 0 {
		rep.SimHoursPerWallS = rep.SimHours / rep.ElapsedS
	}
	if err := sweep.WriteFiles(c.outDir, rep); err != nil {
		return c.fail(err)
	}
	note := fmt.Sprintf("%s, seeds %s, %s", c.cluster, c.seeds, map[bool]string{true: "Gavel-compat mechanism", false: "Rondo mechanism"}[c.compat])
	if p := cfg.Options.Placement; p != nil {
		note = fmt.Sprintf("%s (%d per server, %g cores, %g GB), seeds %s, %s", c.cluster, c.perServer, p.CoresPerServer, p.MemGBPerServer, c.seeds,
			map[bool]string{true: "Synergy-compat model", false: "Rondo's model"}[p.Compat])
	}
	if cfg.Trace.Synergy {
		split := cfg.Trace.ClassSplit
		if split == [3]float64{} {
			split = trace.DefaultSynergySplit
		}
		note += fmt.Sprintf(", Synergy trace %g/%g/%g", split[0], split[1], split[2])
	}
	if c.multiGPU {
		note += ", multi-GPU trace"
	}
	title := c.title
	if title == "" {
		title = "Average JCT vs input rate"
	}
	if len(rates) > 1 && !cfg.Trace.Static {
		fig := sweep.JCTFigure(rep.Points, title, note, c.yMax)
		if err := os.WriteFile(filepath.Join(c.outDir, "jct_vs_rate.svg"), fig.SVG(), 0o644); err != nil {
			return c.fail(err)
		}
	}
	cdfRate := c.cdfRate
	if cdfRate == 0 {
		cdfRate = sweep.HighestCommonRate(rep.Points)
	}
	cdfTitle := "JCT CDF"
	if !cfg.Trace.Static {
		cdfTitle = fmt.Sprintf("JCT CDF at %g jobs/hr", cdfRate)
	}
	fig := sweep.CDFFigure(runs, cdfRate, cdfTitle, note)
	if err := os.WriteFile(filepath.Join(c.outDir, "jct_cdf.svg"), fig.SVG(), 0o644); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "%-36s %6s %8s %12s %10s %10s\n", "policy", "rate", "finished", "avg JCT (h)", "sd (h)", "makespan(h)")
	for _, p := range rep.Points {
		fmt.Fprintf(c.stdout, "%-36s %6g %5d/%-2d %12.2f %10.2f %10.1f\n", p.Policy, p.Rate, p.Finished, p.Runs, p.AvgJCTH, p.AvgJCTHSD, p.MakespanH)
	}
	switch {
	case c.plotOnly:
		fmt.Fprintf(c.stdout, "%d journaled runs, %.0f simulated hours in %.0f run-seconds (%.0f sim-h per run-second); results in %s\n",
			len(runs), rep.SimHours, rep.RunWallS, rep.SimHours/math.Max(rep.RunWallS, 1e-9), c.outDir)
	case c.nomad.on:
		fmt.Fprintf(c.stdout, "%d runs, %.0f simulated hours in %.0f s (%.0f sim-h per wall-second; %.0f per run-second), on Nomad, %s; results in %s\n",
			len(runs), rep.SimHours, rep.ElapsedS, rep.SimHoursPerWallS, rep.SimHours/math.Max(rep.RunWallS, 1e-9),
			map[bool]string{true: "no limit", false: fmt.Sprintf("%d at a time", c.parallel)}[c.parallel <= 0], c.outDir)
	default:
		fmt.Fprintf(c.stdout, "%d runs, %.0f simulated hours in %.0f s (%.0f sim-h per wall-second; %.0f per run-second), parallel %d; results in %s\n",
			len(runs), rep.SimHours, rep.ElapsedS, rep.SimHoursPerWallS, rep.SimHours/math.Max(rep.RunWallS, 1e-9), c.parallel, c.outDir)
	}
	if failedOnNomad > 0 {
		return c.fail(fmt.Errorf("%d of %d points failed on Nomad (above, and in runs.csv's error column); run the same command with -resume to retry only them", failedOnNomad, len(runs)))
	}
	return 0
}

// placementOptions are the Synergy options: --trace-format synergy and
// --class-split (the trace), and for +PLACEMENT specs the servers' cores
// and memory and --synergy-compat (with the reference's time model).
func (c *sweepCmd) placementOptions(cfg *sweep.Config, placing bool) error {
	set := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch c.traceFormat {
	case "", "gavel":
		if c.classSplit != "" {
			return fmt.Errorf("--class-split needs --trace-format synergy")
		}
	case "synergy":
		cfg.Trace.Synergy = true
		if c.classSplit != "" {
			split, err := trace.ParseSynergySplit(c.classSplit)
			if err != nil {
				return fmt.Errorf("--%v", err)
			}
			cfg.Trace.ClassSplit = split
		}
	default:
		return fmt.Errorf("--trace-format %q: want gavel or synergy", c.traceFormat)
	}
	if !placing {
		for _, name := range []string{"cpus-per-server", "mem-per-server", "synergy-compat"} {
			if set[name] {
				return fmt.Errorf("--%s needs a +PLACEMENT policy spec (e.g. fifo+tune)", name)
			}
		}
		return nil
	}
	per := float64(max(c.perServer, 1))
	p := &sim.Placement{CoresPerServer: synergy.BaseCoresPerGPU * per, MemGBPerServer: synergy.BaseMemGBPerGPU * per, Compat: c.synergyCompat}
	if set["cpus-per-server"] {
		if !(c.cpus > 0) || math.IsInf(c.cpus, 0) {
			return fmt.Errorf("--cpus-per-server %v: want a positive number of cores", c.cpus)
		}
		p.CoresPerServer = c.cpus
	}
	if set["mem-per-server"] {
		if !(c.memGB > 0) || math.IsInf(c.memGB, 0) {
			return fmt.Errorf("--mem-per-server %v: want a positive number of GB", c.memGB)
		}
		p.MemGBPerServer = c.memGB
	}
	cfg.Options.Placement = p
	if p.Compat {
		// The reference's time model (as rondo simulate --synergy-compat):
		// rounds on its grid (t = 0 for its continuous workload, 1 for a
		// static one), jobs finishing at the round's end.
		cfg.Options.RoundGrid, cfg.Options.FinishAtRoundEnd = true, true
		if cfg.Trace.Static {
			cfg.Options.GridOriginS = 1
		}
	}
	return nil
}

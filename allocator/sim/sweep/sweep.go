// Package sweep runs the simulator over policies × input rates × seeds on a
// worker pool, summarizes the runs (mean ± sd over seeds, unfinished runs
// dropped) and draws Gavel's figures: average JCT against input rate and
// a JCT CDF at one rate, as SVG written by hand (no plotting dependency).
package sweep

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// Trace says which synthetic trace every run draws.
type Trace struct {
	// Static puts every job at t = 0 (Gavel's lam = 0); Jobs is then required.
	Static        bool
	MultiGPU      bool
	MultiPriority bool
	// Jobs caps a continuous trace (0: endless) and sizes a static one.
	Jobs int
	// Synergy draws Synergy's synthetic workload (trace.SynergyGenerator,
	// seeded by the run's seed; MultiGPU keeps its 1/2/4/8-GPU draws)
	// instead of Gavel's; ClassSplit is its image/language/speech split
	// (zero: 20/70/10). MultiPriority does not apply.
	Synergy    bool
	ClassSplit [3]float64
}

// Config is one sweep.
type Config struct {
	// Policies are specs: a policy name, optionally followed by modifiers
	// "+ideal" (fluid baseline), "+compat" or "+default" (mechanism mode,
	// overriding Options.Engine.GavelCompat), and a CPU/memory placement
	// mode "+proportional", "+tune", "+greedy" or "+opt" (needs
	// Options.Placement: its servers and compat setting; the spec's mode
	// replaces its Mode). The spec labels the curve.
	Policies []string
	Rates    []float64
	Seeds    []int64
	Trace    Trace
	// Options is every run's template; the policy, seed, ideal and compat
	// fields are set per run. Options.Progress is ignored.
	Options sim.Options
	// MaxTimeFor, if set, gives a run's virtual-time limit from its rate
	// (overriding Options.MaxTimeS).
	MaxTimeFor func(rate float64) float64
	// Parallel is the number of concurrent runs (default GOMAXPROCS).
	Parallel int
	// Progress, if set, is called after each run, one call at a time.
	Progress func(done, total int, r *Run)
	// Done holds runs finished earlier (e.g. read back from a journal with
	// ReadJournal); matching tasks are not run again.
	Done []Run
}

// Run is one simulation's outcome.
type Run struct {
	Policy string      `json:"policy"`
	Rate   float64     `json:"rate"`
	Seed   int64       `json:"seed"`
	Result *sim.Result `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
	// SimHoursPerWallS is simulated hours per wall-clock second of this run.
	SimHoursPerWallS float64 `json:"sim_hours_per_wall_s"`
	// JCTs of the measured jobs that finished, seconds (for CDFs).
	JCTs []float64 `json:"-"`
}

// Finished reports whether every measured job finished.
func (r *Run) Finished() bool { return r.Error == "" && r.Result != nil && r.Result.Finished }

// Spec is a parsed policy spec.
type Spec struct {
	Label  string
	Policy string
	Ideal  bool
	Compat *bool
	// Placement is the CPU/memory placement mode ("" : none).
	Placement placement.Mode
}

// ParseSpec reads "name[+ideal][+compat|+default][+proportional|+tune|+greedy|+opt]".
func ParseSpec(s string) (Spec, error) {
	parts := strings.Split(strings.TrimSpace(s), "+")
	sp := Spec{Label: strings.TrimSpace(s), Policy: strings.TrimSpace(parts[0])}
	if sp.Policy == "" {
		return sp, fmt.Errorf("sweep: empty policy in %q", s)
	}
	for _, m := range parts[1:] {
		switch strings.TrimSpace(m) {
		case "ideal":
			sp.Ideal = true
		case "compat":
			v := true
			sp.Compat = &v
		case "default":
			v := false
			sp.Compat = &v
		case string(placement.Proportional), string(placement.Tune), string(placement.Greedy), string(placement.Opt):
			if sp.Placement != "" {
				return sp, fmt.Errorf("sweep: two placement modes in %q", s)
			}
			sp.Placement = placement.Mode(strings.TrimSpace(m))
		default:
			return sp, fmt.Errorf("sweep: unknown modifier %q in %q (want ideal, compat, default, proportional, tune, greedy or opt)", m, s)
		}
	}
	return sp, nil
}

type task struct {
	idx  int
	spec Spec
	rate float64
	seed int64
}

// RunPoint is one run of a sweep: a policy at an arrival rate and a seed.
type RunPoint struct {
	Spec Spec
	Rate float64 // jobs per hour; 0 for a static trace
	Seed int64
}

// Points checks cfg and lists its runs in the sweep's order: policy (as
// given), rate (a static trace has the one rate 0), seed. Execute and
// `rondo simulate sweep -on-nomad` run these.
func Points(cfg Config) ([]RunPoint, error) {
	if len(cfg.Policies) == 0 || len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("sweep: need at least one policy and one seed")
	}
	rates := cfg.Rates
	if cfg.Trace.Static {
		rates = []float64{0}
		if cfg.Trace.Jobs <= 0 {
			return nil, fmt.Errorf("sweep: a static trace needs a job count")
		}
	} else if len(rates) == 0 {
		return nil, fmt.Errorf("sweep: need at least one rate")
	}
	for _, r := range rates {
		if !cfg.Trace.Static && (r <= 0 || math.IsNaN(r) || math.IsInf(r, 0)) {
			return nil, fmt.Errorf("sweep: rate %v: want a positive number of jobs per hour", r)
		}
	}
	var out []RunPoint
	for _, p := range cfg.Policies {
		sp, err := ParseSpec(p)
		if err != nil {
			return nil, err
		}
		if sp.Placement != "" && cfg.Options.Placement == nil {
			return nil, fmt.Errorf("sweep: %q: a placement mode needs servers with cores and memory (Options.Placement)", p)
		}
		for _, r := range rates {
			for _, s := range cfg.Seeds {
				out = append(out, RunPoint{Spec: sp, Rate: r, Seed: s})
			}
		}
	}
	return out, nil
}

// RunKey identifies a run by its policy label, rate and seed (a resumed
// sweep skips the runs it has).
func RunKey(policy string, rate float64, seed int64) string {
	return fmt.Sprintf("%s|%g|%d", policy, rate, seed)
}

// Execute runs the sweep and returns the runs ordered by policy (as
// given), rate and seed. A run that fails is recorded with its error; only
// a bad configuration is returned as an error.
func Execute(cfg Config) ([]Run, error) {
	points, err := Points(cfg)
	if err != nil {
		return nil, err
	}
	tasks := make([]task, len(points))
	for i, p := range points {
		tasks[i] = task{idx: i, spec: p.Spec, rate: p.Rate, seed: p.Seed}
	}
	runs := make([]Run, len(tasks))
	prior := map[string]Run{}
	for _, r := range cfg.Done {
		prior[RunKey(r.Policy, r.Rate, r.Seed)] = r
	}
	var queue []task
	for _, t := range tasks {
		if r, ok := prior[RunKey(t.spec.Label, t.rate, t.seed)]; ok {
			runs[t.idx] = r
			continue
		}
		queue = append(queue, t)
	}
	// Start the expensive runs first so the pool drains evenly (longest
	// first): high rates, and within a rate the packing policies, whose
	// runs at high load cost several times the others' (Gandiva at 6.0
	// jobs/h ≈ 5× agnostic LAS's, docs/performance.md). Results keep the
	// task order whatever the start order.
	sort.SliceStable(queue, func(i, j int) bool {
		if queue[i].rate != queue[j].rate {
			return queue[i].rate > queue[j].rate
		}
		return costRank(queue[i].spec) > costRank(queue[j].spec)
	})
	par := cfg.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	ch := make(chan task)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range min(par, len(queue)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				r := runOne(cfg, t)
				runs[t.idx] = r
				if cfg.Progress != nil {
					mu.Lock()
					done++
					cfg.Progress(done, len(queue), &r)
					mu.Unlock()
				}
			}
		}()
	}
	for _, t := range queue {
		ch <- t
	}
	close(ch)
	wg.Wait()
	return runs, nil
}

// costRank orders policies by their cost at high load, most costly first
// (OPT placement solves an integer program every round).
func costRank(sp Spec) int {
	switch policy := sp.Policy; {
	case sp.Placement == placement.Opt:
		return 3
	case policy == "gandiva":
		return 2
	case strings.HasSuffix(policy, "_packed"):
		return 1
	}
	return 0
}

func runOne(cfg Config, t task) (out Run) {
	out = Run{Policy: t.spec.Label, Rate: t.rate, Seed: t.seed}
	defer func() {
		if p := recover(); p != nil {
			out.Error = fmt.Sprint("panic: ", p)
		}
	}()
	o := cfg.Options
	o.Progress = nil
	o.Engine.Policy = t.spec.Policy
	o.Engine.Seed = t.seed
	o.Ideal = t.spec.Ideal
	if cfg.MaxTimeFor != nil {
		o.MaxTimeS = cfg.MaxTimeFor(t.rate)
	}
	if t.spec.Compat != nil {
		o.Engine.GavelCompat = *t.spec.Compat
	}
	if t.spec.Placement != "" {
		p := *o.Placement
		mode := t.spec.Placement
		p.Mode = func(string) placement.Mode { return mode }
		o.Placement = &p
	}
	var g sim.Generator
	var err error
	if cfg.Trace.Synergy {
		g, err = trace.NewSynergyGenerator(trace.SynergyOptions{Seed: t.seed, Rate: t.rate, MultiGPU: cfg.Trace.MultiGPU,
			Split: cfg.Trace.ClassSplit})
	} else {
		g, err = trace.NewGenerator(trace.Options{Seed: t.seed, Rate: t.rate, MultiGPU: cfg.Trace.MultiGPU,
			MultiPriority: cfg.Trace.MultiPriority, Throughputs: o.Throughputs})
	}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	start := time.Now()
	res, err := sim.Run(&sim.GeneratorSource{G: g, Limit: cfg.Trace.Jobs}, o)
	wall := time.Since(start).Seconds()
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Result = res
	if wall > 0 {
		out.SimHoursPerWallS = res.EndS / 3600 / wall
	}
	for _, j := range res.Jobs {
		if j.InWindow && j.Done {
			out.JCTs = append(out.JCTs, j.JCTS)
		}
	}
	res.Jobs = nil // per-job rows are not kept; JCTs are
	return out
}

// Point is one (policy, rate) over seeds: finished runs only.
type Point struct {
	Policy   string  `json:"policy"`
	Rate     float64 `json:"rate"`
	Runs     int     `json:"runs"`
	Finished int     `json:"finished"`
	// Means and population standard deviations over finished runs.
	AvgJCTH     float64 `json:"avg_jct_h"`
	AvgJCTHSD   float64 `json:"avg_jct_h_sd"`
	MakespanH   float64 `json:"makespan_h"`
	MakespanHSD float64 `json:"makespan_h_sd"`
	RhoAvg      float64 `json:"ftf_rho_avg"`
	RhoMax      float64 `json:"ftf_rho_max"`
	Utilization float64 `json:"utilization"`
	// Per-seed average JCTs, hours (NaN-free: unfinished seeds omitted).
	SeedJCTH []float64 `json:"seed_avg_jct_h"`
}

// Summarize groups runs by (policy, rate), keeping the policies' order and
// sorting rates.
func Summarize(runs []Run) []Point {
	type key struct {
		p string
		r float64
	}
	order := map[string]int{}
	groups := map[key][]*Run{}
	var keys []key
	for i := range runs {
		r := &runs[i]
		if _, ok := order[r.Policy]; !ok {
			order[r.Policy] = len(order)
		}
		k := key{r.Policy, r.Rate}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if order[keys[i].p] != order[keys[j].p] {
			return order[keys[i].p] < order[keys[j].p]
		}
		return keys[i].r < keys[j].r
	})
	var out []Point
	for _, k := range keys {
		p := Point{Policy: k.p, Rate: k.r, Runs: len(groups[k])}
		var jct, mk, rho, rmax, util []float64
		for _, r := range groups[k] {
			if !r.Finished() {
				continue
			}
			p.Finished++
			jct = append(jct, r.Result.AvgJCTS/3600)
			mk = append(mk, r.Result.MakespanS/3600)
			rho = append(rho, r.Result.FTFRhoAvg)
			rmax = append(rmax, r.Result.FTFRhoMax)
			util = append(util, r.Result.Utilization)
		}
		p.SeedJCTH = jct
		p.AvgJCTH, p.AvgJCTHSD = MeanSD(jct)
		p.MakespanH, p.MakespanHSD = MeanSD(mk)
		p.RhoAvg, _ = MeanSD(rho)
		p.RhoMax, _ = MeanSD(rmax)
		p.Utilization, _ = MeanSD(util)
		out = append(out, p)
	}
	return out
}

// MeanSD is the mean and population standard deviation (numpy's default);
// zeros for an empty slice.
func MeanSD(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	ss := 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return m, math.Sqrt(ss / float64(len(v)))
}

// Throughput is simulated hours over the sum of runs' wall seconds, and
// over the sweep's elapsed wall seconds when wallS > 0.
func Throughput(runs []Run) (simH, runWallS float64) {
	for _, r := range runs {
		if r.Result != nil {
			simH += r.Result.EndS / 3600
			runWallS += r.Result.WallS
		}
	}
	return simH, runWallS
}

// HighestCommonRate is the highest rate at which every policy has a
// finished run (the lowest rate if there is none).
func HighestCommonRate(points []Point) float64 {
	pols := policyOrder(points)
	ok := map[float64]int{}
	lowest := math.Inf(1)
	for _, p := range points {
		lowest = math.Min(lowest, p.Rate)
		if p.Finished > 0 {
			ok[p.Rate]++
		}
	}
	best := math.Inf(-1)
	for r, n := range ok {
		if n == len(pols) && r > best {
			best = r
		}
	}
	if math.IsInf(best, -1) {
		return lowest
	}
	return best
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/philly"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// vcFlags are the options of 'rondo simulate --vc-config'.
type vcFlags struct {
	config, seeds, shares, gpus string
	load, opp, maxDur           float64
	firstFit, timeShare         bool
	vcPolicy, oppPolicy         string
}

func (v *vcFlags) register(f *flag.FlagSet) {
	f.StringVar(&v.config, "vc-config", "", "virtual-cluster mode: cluster config (cells and VCs, or quota-only VCs); with --trace continuous|static|FILE the VCs run in the simulator through the agent's deciders; with --trace philly (the default here) or a Philly CSV (*.csv), a cells config, the comparison quota-only vs cells vs private clusters (three runs of the same simulator)")
	f.StringVar(&v.seeds, "seeds", "", "virtual-cluster comparison: comma-separated seeds (default: --seed)")
	f.StringVar(&v.shares, "vc-share", "", "virtual-cluster mode: shares of the offered GPU time, vc=weight,... (default: quota GPUs)")
	f.StringVar(&v.gpus, "vc-gpus", "", "virtual-cluster mode: restrict VCs to jobs of these GPU counts, vc=1|2,... (default: all)")
	f.Float64Var(&v.load, "load", 0.8, "virtual-cluster comparison: offered load, fraction of the cluster's GPUs")
	f.Float64Var(&v.opp, "opportunistic", 0.2, "virtual-cluster mode: fraction of jobs submitted as opportunistic (drawn per job)")
	f.Float64Var(&v.maxDur, "max-duration", 0, "virtual-cluster comparison: cap job durations, seconds (0: none)")
	f.BoolVar(&v.firstFit, "first-fit", false, "virtual-cluster comparison: accepted and ignored (warned): the quota-only baseline is the agent's round.Quota, which has no first-fit placement")
	f.BoolVar(&v.timeShare, "time-sharing", false, "virtual-cluster comparison: accepted, no effect: every run time-shares in rounds of --round s, each VC under its HCL policy")
	f.StringVar(&v.vcPolicy, "vc-policy", "", "virtual-cluster comparison: override VC policies, vc=policy,... (every system and private cluster)")
	f.StringVar(&v.oppPolicy, "opp-policy", rhcl.DefaultVCPolicy, "virtual-cluster comparison: policy of opportunistic jobs; only the agent's, "+rhcl.DefaultVCPolicy+", is accepted")
}

// vcPolicies is each VC's policy from the config, with --vc-policy overrides.
func vcPolicies(cfg *rhcl.Config, s string) ([]string, error) {
	over := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("--vc-policy %q: want vc=policy,...", s)
		}
		if err := rhcl.ValidPolicy(v); err != nil {
			return nil, fmt.Errorf("--vc-policy: %w", err)
		}
		over[k] = v
	}
	var out []string
	for _, v := range cfg.VCs {
		p := v.Policy
		if o, ok := over[v.Name]; ok {
			p = o
			delete(over, v.Name)
		}
		out = append(out, p)
	}
	for k := range over {
		return nil, fmt.Errorf("--vc-policy: unknown vc %q", k)
	}
	return out, nil
}

// vcSeeds is --seeds for the VC simulation (default: --seed); the Philly
// generator takes unsigned seeds.
func vcSeeds(s string, def int64) ([]uint64, error) {
	seeds := []int64{def}
	if strings.TrimSpace(s) != "" {
		var err error
		if seeds, err = parseSeeds(s); err != nil {
			return nil, err
		}
	}
	out := make([]uint64, 0, len(seeds))
	for _, v := range seeds {
		if v < 0 {
			return nil, fmt.Errorf("seed %d must be non-negative", v)
		}
		out = append(out, uint64(v))
	}
	return out, nil
}

func parseVCGPUs(s string, known map[string]bool) (map[string][]int, error) {
	out := map[string][]int{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || !known[k] {
			return nil, fmt.Errorf("--vc-gpus %q: want known-vc=g|g...[,...]", s)
		}
		for _, g := range strings.Split(v, "|") {
			n, err := strconv.Atoi(strings.TrimSpace(g))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--vc-gpus %q: %q is not a GPU count", s, g)
			}
			out[k] = append(out[k], n)
		}
	}
	return out, nil
}

func parseShares(s string, known map[string]bool) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(f > 0) {
			return nil, fmt.Errorf("--vc-share %q: want vc=positive weight[,...]", s)
		}
		if !known[k] {
			return nil, fmt.Errorf("--vc-share: unknown vc %q", k)
		}
		out[k] = f
	}
	return out, nil
}

// runVC is 'rondo simulate --vc-config C --trace philly|FILE.csv': the
// virtual-cluster comparison on a Philly trace, three runs of the one
// simulator (allocator/sim VC mode, rounds on a fixed grid) with the same
// jobs and the agent's deciders (vcDecider): (a) quota-only, the config's
// cells turned into shares in GPUs per type (round.CellShares); (b) the
// cells config itself; and each VC's guaranteed jobs alone on its quota
// under each logic. Each VC runs its HCL policy (--vc-policy overrides).
func (c *simulateCmd) runVC() int {
	traceSet := false
	c.flags.Visit(func(f *flag.Flag) { traceSet = traceSet || f.Name == "trace" })
	cfg, diags := rhcl.LoadPath(c.vc.config)
	if diags.HasErrors() {
		return c.fail(errors.New(rhcl.FormatDiagnostics(diags)))
	}
	if cfg.QuotaOnly() || len(cfg.Cells) == 0 || len(cfg.VCs) == 0 {
		return c.fail(fmt.Errorf("%s: the comparison on a Philly trace needs cells and VCs with quotas (its quota-only baseline is derived from them); run quota-only VCs with a Gavel trace (--trace continuous|static|FILE)", c.vc.config))
	}
	pols, err := vcPolicies(cfg, c.vc.vcPolicy)
	if err != nil {
		return c.fail(err)
	}
	for i := range cfg.VCs {
		cfg.VCs[i].Policy = pols[i]
	}
	if err := checkVCSizers(cfg); err != nil {
		return c.fail(err) // a dl2 VC's model file
	}
	if c.vc.oppPolicy != rhcl.DefaultVCPolicy {
		return c.fail(fmt.Errorf("--opp-policy %q: opportunistic jobs run under the agent's policy for them, %s (the only value accepted)", c.vc.oppPolicy, rhcl.DefaultVCPolicy))
	}
	if c.vc.firstFit {
		fmt.Fprintln(c.stderr, "rondo simulate: warning: --first-fit is ignored: the quota-only baseline is round.Quota, the agent's, which places by its own rule")
	}
	spec := specFromConfig(cfg)
	var dist []philly.Pair
	switch {
	case !traceSet || c.traceArg == "philly":
		dist, err = philly.Embedded()
	default:
		var f *os.File
		if f, err = os.Open(c.traceArg); err == nil {
			dist, err = philly.ReadCSV(f)
			f.Close()
		}
	}
	if err != nil {
		return c.fail(err)
	}
	seeds, err := vcSeeds(c.vc.seeds, c.seed)
	if err != nil {
		return c.fail(err)
	}
	known := map[string]bool{}
	for _, v := range spec.VCs {
		known[v.Name] = true
	}
	shares, err := parseShares(c.vc.shares, known)
	if err != nil {
		return c.fail(err)
	}
	vcGPUs, err := parseVCGPUs(c.vc.gpus, known)
	if err != nil {
		return c.fail(err)
	}
	jobs := c.jobs
	if jobs <= 0 {
		jobs = 2000
	}
	quotaShares, err := round.CellShares(spec)
	if err != nil {
		return c.fail(err)
	}
	quota := map[string]int{}
	for v, m := range quotaShares {
		for _, n := range m {
			quota[v] += n
		}
	}
	gpus := 0
	for _, cell := range cfg.Cells {
		gpus += cfgGPUs(cfg, cell.Type)
	}
	var tenants []philly.Tenant
	for _, v := range spec.VCs {
		w, ok := shares[v.Name]
		if !ok {
			w = float64(quota[v.Name])
		}
		if w > 0 {
			tenants = append(tenants, philly.Tenant{VC: v.Name, Share: w, GPUs: vcGPUs[v.Name]})
		}
	}
	tb := throughputs.Default()
	if c.tputFile != "" {
		if tb, err = throughputs.Load(c.tputFile); err != nil {
			return c.fail(err)
		}
	}
	types := cfgLeafTypes(cfg)
	o, err := c.compareOptions(cfg, quotaShares, quota, tb)
	if err != nil {
		return c.fail(err)
	}
	var results []*sim.CompareResult
	for _, seed := range seeds {
		tr, err := philly.Generate(dist, philly.Options{Seed: seed, Jobs: jobs, Tenants: tenants, ClusterGPUs: gpus,
			Load: c.vc.load, Opportunistic: c.vc.opp, MaxDurationS: c.vc.maxDur, WorkShares: true})
		if err != nil {
			return c.fail(err)
		}
		sj, err := philly.SimJobs(tr, tb, types[0], types)
		if err != nil {
			return c.fail(err)
		}
		r, err := sim.Compare(sj, o)
		if err != nil {
			return c.fail(fmt.Errorf("seed %d: %w", seed, err))
		}
		results = append(results, r)
	}
	sum, err := sim.Summarize(results)
	if err != nil {
		return c.fail(err)
	}
	if c.outDir != "" {
		if err := writeVCOut(c.outDir, results, sum); err != nil {
			return c.fail(err)
		}
	}
	if c.jsonOut {
		if err := json.NewEncoder(c.stdout).Encode(map[string]any{"results": results, "summary": sum}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	var vp []string
	for _, v := range cfg.VCs {
		vp = append(vp, v.Name+"="+v.Policy)
	}
	fmt.Fprintf(c.stdout, "%d GPUs (%s), %d jobs per seed, load %.2f, %.0f%% opportunistic, seeds %v, rounds of %.0f s, VC policies %s\n\n",
		gpus, strings.Join(types, ","), jobs, c.vc.load, 100*c.vc.opp, seeds, c.round, strings.Join(vp, ","))
	if err := sim.WriteMarkdown(c.stdout, sum); err != nil {
		return c.fail(err)
	}
	return 0
}

// compareOptions builds the comparison's systems from a cells config: the
// shared cluster (its cells' nodes) under the cells decider and under the
// quota-only decider of the same shares, and each VC's private cluster
// (one top cell per quota cell) under each.
func (c *simulateCmd) compareOptions(cfg *rhcl.Config, shares map[string]map[string]int, quota map[string]int, tb *throughputs.Table) (sim.CompareOptions, error) {
	warn := func(msg string, args ...any) {
		fmt.Fprintf(c.stderr, "rondo simulate: warning: %s%s\n", msg, kvString(args))
	}
	setup := func(nodesOf, decide *rhcl.Config) func() (sim.Setup, error) {
		return func() (sim.Setup, error) {
			nodes, err := cellNodes(nodesOf)
			if err != nil {
				return sim.Setup{}, err
			}
			d, err := vcDecider(decide, c.round, false, warn)
			if err != nil {
				return sim.Setup{}, err
			}
			return sim.Setup{Nodes: nodes, Decider: d}, nil
		}
	}
	o := sim.CompareOptions{
		Base: sim.Options{Engine: engine.Config{RoundS: c.round, Policy: "VC comparison"}, Throughputs: tb,
			PreemptionCostS: c.preempt, Costs: c.costs, StartCostS: c.startCost, MaxTimeS: c.maxTime},
		Cells: setup(cfg, cfg),
		Quota: setup(cfg, quotaOnlyConfig(cfg, shares)),
	}
	for i, v := range cfg.VCs {
		pc := privateConfig(cfg, i)
		o.VCs = append(o.VCs, sim.CompareVC{Name: v.Name, QuotaGPUs: quota[v.Name],
			PrivateCells: setup(pc, pc), PrivateQuota: setup(pc, quotaOnlyConfig(pc, map[string]map[string]int{v.Name: shares[v.Name]}))})
	}
	// Fail early on a config the deciders refuse.
	for _, mk := range []func() (sim.Setup, error){o.Cells, o.Quota} {
		if _, err := mk(); err != nil {
			return o, err
		}
	}
	return o, nil
}

// quotaOnlyConfig is a cells config as quota-only VCs: no cells, each VC
// the given share in GPUs per type (round.CellShares: its quota's GPUs),
// its policy, weight and entities.
func quotaOnlyConfig(cfg *rhcl.Config, shares map[string]map[string]int) *rhcl.Config {
	q := &rhcl.Config{RoundSeconds: cfg.RoundSeconds, CellTypes: cfg.CellTypes}
	for _, v := range cfg.VCs {
		g := map[string]int{}
		for t, n := range shares[v.Name] {
			g[t] = n
		}
		q.VCs = append(q.VCs, rhcl.VC{Name: v.Name, GPUs: g, Policy: v.Policy, Weight: v.Weight, Entities: v.Entities})
	}
	return q
}

// privateConfig is VC i's private cluster: one top cell per cell of its
// quota (nodes named <vc>-p<k>/<i>) and its pinned cells, the VC alone.
func privateConfig(cfg *rhcl.Config, i int) *rhcl.Config {
	v := cfg.VCs[i]
	spec := specFromConfig(cfg)
	p := &rhcl.Config{RoundSeconds: cfg.RoundSeconds, CellTypes: cfg.CellTypes}
	for _, q := range spec.VCs[i].Quota {
		for range q.Count {
			p.Cells = append(p.Cells, rhcl.Cell{Type: q.Type, Name: fmt.Sprintf("%s-p%d", v.Name, len(p.Cells))})
		}
	}
	for _, c := range cfg.Cells {
		if c.Pinned == v.Name || slices.Contains(v.Pinned, c.Name) {
			p.Cells = append(p.Cells, rhcl.Cell{Type: c.Type, Name: c.Name, Pinned: v.Name})
		}
	}
	pv := v
	pv.Pinned = nil
	p.VCs = []rhcl.VC{pv}
	return p
}

// cfgLeafTypes is the config's GPU types in cell type order; the first is
// the reference type of Philly durations.
func cfgLeafTypes(cfg *rhcl.Config) []string {
	var out []string
	for _, t := range cfg.CellTypes {
		if t.Child != "" {
			continue
		}
		g := t.GPUType
		if g == "" {
			g = t.Name
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// cfgGPUs is the number of GPUs in a cell of the named type.
func cfgGPUs(cfg *rhcl.Config, typ string) int {
	byName := map[string]rhcl.CellType{}
	for _, t := range cfg.CellTypes {
		byName[t.Name] = t
	}
	n := 1
	for t := byName[typ]; t.Child != ""; t = byName[t.Child] {
		n *= t.Count
	}
	return n
}

func writeVCOut(dir string, results []*sim.CompareResult, sum sim.CompareSummary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"results": results, "summary": sum}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "vc-results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "vc-summary.md"))
	if err != nil {
		return err
	}
	if err := sim.WriteMarkdown(f, sum); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// phillyTrace reports whether --vc-config runs the VC comparison (sim.Compare) on a
// Philly trace: --trace unset or philly, or a Philly CSV (a *.csv file).
// Any other --trace (continuous, static, a Gavel or JSON-lines file) runs
// the VCs in allocator/sim (runVCSim).
func (c *simulateCmd) phillyTrace() bool {
	set := false
	c.flags.Visit(func(f *flag.Flag) { set = set || f.Name == "trace" })
	return !set || c.traceArg == "philly" || strings.HasSuffix(strings.ToLower(c.traceArg), ".csv")
}

// vcCapacity is what each VC may hold, in GPUs per GPU type: its gpus
// share (quota-only), or its quota and pinned cells (round.CellShares).
func vcCapacity(cfg *rhcl.Config) (map[string]map[string]int, error) {
	if !cfg.QuotaOnly() {
		return round.CellShares(specFromConfig(cfg))
	}
	out := map[string]map[string]int{}
	for _, v := range cfg.VCs {
		out[v.Name] = maps.Clone(v.GPUs)
	}
	return out, nil
}

// cellNodes is the cluster a config of cells describes: one node per
// node-level cell, named by its cell's nomad_node (or the i-th of its top
// cell's nomad_nodes), else, for a cell that selects nodes by node_pool /
// node_class, `<top cell>/<i>` (i: the node's index in its top cell) with
// that pool and class; its GPUs are the chain's leaf type.
func cellNodes(cfg *rhcl.Config) ([]sim.Node, error) {
	a, err := cells.New(specFromConfig(cfg))
	if err != nil {
		return nil, err
	}
	cellOf := map[string]rhcl.Cell{}
	for _, c := range cfg.Cells {
		cellOf[c.Name] = c
	}
	var nodes []sim.Node
	idx := map[string]int{} // node cell address -> nodes index
	perTop := map[string]int{}
	for _, pg := range a.PhysicalGPUs() {
		k, ok := idx[pg.Node]
		if !ok {
			top, _, _ := strings.Cut(pg.Node, "/")
			cell := cellOf[top]
			i := perTop[top]
			perTop[top]++
			name := fmt.Sprintf("%s/%d", top, i)
			switch {
			case cell.NomadNode != "":
				name = cell.NomadNode
			case i < len(cell.NomadNodes):
				name = cell.NomadNodes[i]
			}
			k = len(nodes)
			idx[pg.Node] = k
			nodes = append(nodes, sim.Node{Name: name, Pool: cell.NodePool, Class: cell.NodeClass, GPUs: map[string]int{}})
		}
		nodes[k].GPUs[pg.Type]++
	}
	return nodes, nil
}

// vcAssigner gives each job of a Gavel trace its VC and class: a job that
// names its vc (JSON-lines traces) keeps it and its class; any other is
// drawn a VC, with the weights of --vc-share (default: each VC's GPUs),
// among the VCs that can run it (a GPU type of the VC's capacity with at
// least its scale factor and a throughput for it, and --vc-gpus), and is
// opportunistic with probability --opportunistic unless marked so. Two
// draws per job from one generator seeded --seed, whatever the job.
type vcAssigner struct {
	src     sim.Source
	rng     *rand.Rand
	names   []string
	weights []float64
	cap     map[string]map[string]int
	gpus    map[string][]int
	opp     float64
	tb      *throughputs.Table
}

func (a *vcAssigner) fits(vc string, j trace.Job) bool {
	if g := a.gpus[vc]; len(g) > 0 && !containsInt(g, j.ScaleFactor) {
		return false
	}
	return fitsCapacity(a.cap[vc], j, a.tb)
}

func fitsCapacity(cap map[string]int, j trace.Job, tb *throughputs.Table) bool {
	for t, n := range cap {
		v, ok := tb.Isolated(j.Key(), t)
		if j.PSMax > 0 { // a two-role (DL2) job runs on any type: its model is DL2's
			v, ok = 1, true
		}
		if ok && v > 0 && n >= max(j.ScaleFactor, 1) {
			return true
		}
	}
	return false
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (a *vcAssigner) Next() (trace.Job, bool, error) {
	j, ok, err := a.src.Next()
	if !ok || err != nil {
		return j, ok, err
	}
	u, v := a.rng.Float64(), a.rng.Float64()
	if j.VC != "" {
		return j, true, nil
	}
	total := 0.0
	for i, n := range a.names {
		if a.fits(n, j) {
			total += a.weights[i]
		}
	}
	if total == 0 {
		return j, false, fmt.Errorf("job %d (%s, %d GPUs): no VC can run it (their shares, --vc-share, --vc-gpus)", j.ID, j.Model, j.ScaleFactor)
	}
	x := u * total
	for i, n := range a.names {
		if !a.fits(n, j) {
			continue
		}
		j.VC = n
		if x -= a.weights[i]; x < 0 {
			break
		}
	}
	j.Opportunistic = j.Opportunistic || v < a.opp
	return j, true, nil
}

// runVCSim is 'rondo simulate --vc-config C --trace continuous|static|FILE':
// the VCs run in allocator/sim (same time model and metrics as a plain
// run, GPU types of the config, gangs, --faults by node name) through the
// decider the agent builds from the same config (vcDecider).
func (c *simulateCmd) runVCSim() int {
	set := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"policy", "ideal", "seeds", "load", "max-duration", "first-fit", "time-sharing", "vc-policy", "opp-policy"} {
		if set[name] {
			return c.fail(fmt.Errorf("--%s does not apply to --vc-config with a Gavel trace (the VCs' policies come from the config; one run per --seed)", name))
		}
	}
	cfg, diags := rhcl.LoadPath(c.vc.config)
	if diags.HasErrors() {
		return c.fail(errors.New(rhcl.FormatDiagnostics(diags)))
	}
	if err := checkVCSizers(cfg); err != nil {
		return c.fail(err) // a dl2 VC's model file
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
		Cluster:     sim.Cluster{GPUsPerServer: c.perServer, PricePerHourUS: prices},
		Engine:      engine.Config{RoundS: c.round, GavelCompat: c.compat, Seed: c.seed},
		Throughputs: tb, PreemptionCostS: c.preempt, Costs: c.costs, StartCostS: c.startCost, MaxTimeS: c.maxTime,
		MaxActive: c.maxActive, MeasureNoise: c.measureNoise, Explain: c.explain,
	}
	if o.HiddenPairs, err = c.hiddenPairs(tb); err != nil {
		return c.fail(err)
	}
	capacity, err := vcCapacity(cfg)
	if err != nil {
		return c.fail(err)
	}
	switch {
	case cfg.QuotaOnly():
		o.Engine.Policy = "quota-only VCs"
		types, err := sim.ParseCluster(c.cluster)
		if err != nil {
			return c.fail(err)
		}
		for _, v := range cfg.VCs {
			for t, n := range v.GPUs {
				if n > types[t] {
					return c.fail(fmt.Errorf("%s: vc %q: a share of %d %s GPUs, --cluster has %d", c.vc.config, v.Name, n, t, types[t]))
				}
			}
		}
		o.Nodes = sim.ServerNodes(types, c.perServer)
	case len(cfg.Cells) > 0 && len(cfg.VCs) > 0:
		o.Engine.Policy = "VCs of cells"
		if o.Nodes, err = cellNodes(cfg); err != nil {
			return c.fail(err)
		}
	case len(cfg.VCs) > 0 && ownMechanism(cfg.VCs[0]):
		// One gandiva_fair VC over the whole --cluster (its users and
		// tickets from the config), or one dl2 VC, as the agent runs it.
		o.Engine.Policy = cfg.VCs[0].Policy
		types, err := sim.ParseCluster(c.cluster)
		if err != nil {
			return c.fail(err)
		}
		o.Nodes = sim.ServerNodes(types, c.perServer)
		capacity = map[string]map[string]int{cfg.VCs[0].Name: types}
	default:
		return c.fail(fmt.Errorf("%s: declares neither cells and VCs nor quota-only VCs (gpus = {...}) nor a gandiva_fair or dl2 VC", c.vc.config))
	}
	warn := func(msg string, args ...any) {
		fmt.Fprintf(c.stderr, "rondo simulate: warning: %s%s\n", msg, kvString(args))
	}
	o.Pairs = shareGroup(cfg, "") != nil // some VC's policy packs and allows sharing
	if o.Decider, err = vcDecider(cfg, c.round, false, warn); err != nil {
		return c.fail(err)
	}
	for _, v := range cfg.VCs {
		if isDL2(v) {
			// Two-role jobs of the trace (JSON lines with ps_min, ps_max)
			// train in DL2's time model, without speed noise.
			o.DL2 = &sim.DL2{Seed: c.seed}
		}
	}
	if o.Decider == nil { // the one gandiva_fair or dl2 VC
		m, err := vcMechanism(cfg.VCs[0], c.round, false, warn)
		if err != nil {
			return c.fail(err)
		}
		o.Decider = &round.Single{Mechanism: m}
	}
	if o.Placement, err = c.simPlacement(cfg); err != nil {
		return c.fail(err)
	}
	if err = c.profileScaling(o.Placement); err != nil {
		return c.fail(err)
	}
	if c.faultsFile != "" {
		if o.Faults, err = faults.ReadFile(c.faultsFile); err != nil {
			return c.fail(err)
		}
	}
	known := map[string]bool{}
	var names []string
	for _, v := range cfg.VCs {
		known[v.Name] = true
		names = append(names, v.Name)
	}
	shares, err := parseShares(c.vc.shares, known)
	if err != nil {
		return c.fail(err)
	}
	vcGPUs, err := parseVCGPUs(c.vc.gpus, known)
	if err != nil {
		return c.fail(err)
	}
	if !(c.vc.opp >= 0 && c.vc.opp <= 1) {
		return c.fail(fmt.Errorf("--opportunistic %v: want a fraction in [0, 1]", c.vc.opp))
	}
	as := &vcAssigner{rng: rand.New(rand.NewPCG(uint64(c.seed), 0x7663)), cap: capacity, gpus: vcGPUs, opp: c.vc.opp, tb: tb}
	for _, n := range names {
		w, ok := shares[n]
		if !ok {
			for _, g := range capacity[n] {
				w += float64(g)
			}
		}
		as.names, as.weights = append(as.names, n), append(as.weights, w)
	}
	// A job that names its vc must name a declared one its class can use.
	check := func(j trace.Job) error {
		if j.VC == "" {
			return nil
		}
		if !known[j.VC] {
			// The agent's words for it (a rejected job, allocator/agent).
			return fmt.Errorf("vc: VC %q is not declared in %s (declared: %s)", j.VC, c.vc.config, strings.Join(names, ", "))
		}
		if !j.Opportunistic && !fitsCapacity(capacity[j.VC], j, tb) {
			return fmt.Errorf("vc: a %d-GPU %s job fits no GPU type of vc %q", j.ScaleFactor, j.Model, j.VC)
		}
		return nil
	}
	if as.src, err = c.source(tb, check); err != nil {
		return c.fail(err)
	}
	if c.window != "" {
		if o.WindowStart, o.WindowEnd, err = parseWindow(c.window); err != nil {
			return c.fail(err)
		}
	}
	return c.simulate(as, o)
}

// kvString formats a warning's key-value pairs.
func kvString(args []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	return b.String()
}

// writeVCLines prints a VC run's per-VC metrics (nothing for other runs).
func writeVCLines(w io.Writer, res *sim.Result) {
	line := func(what string, v sim.VCResult) {
		fmt.Fprintf(w, "%s: %d/%d jobs done, avg JCT %.2f h (p50 %.2f h, p95 %.2f h), avg queue %.2f h, %d preemptions\n",
			what, v.JobsDone, v.Jobs, v.AvgJCTS/3600, v.P50JCTS/3600, v.P95JCTS/3600, v.AvgQueueS/3600, v.Preemptions)
	}
	for _, v := range res.VCs {
		line("vc "+v.Name, v)
	}
	if res.Opportunistic != nil {
		line("opportunistic", *res.Opportunistic)
	}
}

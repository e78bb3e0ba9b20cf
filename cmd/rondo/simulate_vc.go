package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/philly"
	"github.com/rondo-sched/rondo/allocator/vcsim"
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
	f.StringVar(&v.config, "vc-config", "", "virtual-cluster mode: cluster config (cells and VCs); --trace philly or a Philly-format CSV")
	f.StringVar(&v.seeds, "seeds", "", "virtual-cluster mode: comma-separated seeds (default: --seed)")
	f.StringVar(&v.shares, "vc-share", "", "virtual-cluster mode: shares of the offered GPU time, vc=weight,... (default: quota GPUs)")
	f.StringVar(&v.gpus, "vc-gpus", "", "virtual-cluster mode: restrict VCs to jobs of these GPU counts, vc=1|2,... (default: all)")
	f.Float64Var(&v.load, "load", 0.8, "virtual-cluster mode: offered load, fraction of the cluster's GPUs")
	f.Float64Var(&v.opp, "opportunistic", 0.2, "virtual-cluster mode: fraction of jobs submitted as opportunistic")
	f.Float64Var(&v.maxDur, "max-duration", 0, "virtual-cluster mode: cap job durations, seconds (0: none)")
	f.BoolVar(&v.firstFit, "first-fit", false, "virtual-cluster mode: baseline places by first fit instead of best fit")
	f.BoolVar(&v.timeShare, "time-sharing", false, "virtual-cluster mode: both layers, rounds of --round s: each VC's policy (HCL) time-shares its jobs on its cells, vs its private cluster")
	f.StringVar(&v.vcPolicy, "vc-policy", "", "virtual-cluster mode with --time-sharing: override VC policies, vc=policy,...")
	f.StringVar(&v.oppPolicy, "opp-policy", "max_min_fairness_perf", "virtual-cluster mode with --time-sharing: policy for opportunistic jobs")
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

// runVC is 'rondo simulate --vc-config': the virtual-cluster comparison
// (quota-only baseline, cells, private clusters) on a Philly trace.
func (c *simulateCmd) runVC() int {
	traceSet := false
	c.flags.Visit(func(f *flag.Flag) { traceSet = traceSet || f.Name == "trace" })
	cfg, diags := rhcl.LoadPath(c.vc.config)
	if diags.HasErrors() {
		return c.fail(errors.New(rhcl.FormatDiagnostics(diags)))
	}
	spec := specFromConfig(cfg)
	var dist []philly.Pair
	var err error
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
	gpus := 0
	quota := map[string]int{}
	for _, v := range cfg.VCs {
		for _, q := range v.Quota {
			quota[v.Name] += q.Count * cfgGPUs(cfg, q.Type)
		}
	}
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
	if c.vc.timeShare {
		return c.runVCTimeSharing(cfg, dist, seeds, tenants, jobs, gpus)
	}
	var results []*vcsim.Result
	for _, seed := range seeds {
		tr, err := philly.Generate(dist, philly.Options{Seed: seed, Jobs: jobs, Tenants: tenants, ClusterGPUs: gpus,
			Load: c.vc.load, Opportunistic: c.vc.opp, MaxDurationS: c.vc.maxDur, WorkShares: true})
		if err != nil {
			return c.fail(err)
		}
		r, err := vcsim.Compare(tr, vcsim.Options{Spec: spec, FirstFit: c.vc.firstFit})
		if err != nil {
			return c.fail(fmt.Errorf("seed %d: %w", seed, err))
		}
		results = append(results, r)
	}
	sum, err := vcsim.Summarize(results)
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
	fmt.Fprintf(c.stdout, "%d GPUs, %d jobs per seed, load %.2f, %.0f%% opportunistic, seeds %v, FIFO inside each VC\n\n",
		gpus, jobs, c.vc.load, 100*c.vc.opp, seeds)
	if err := vcsim.WriteMarkdown(c.stdout, sum); err != nil {
		return c.fail(err)
	}
	return 0
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

func writeVCOut(dir string, results []*vcsim.Result, sum vcsim.Summary) error {
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
	if err := vcsim.WriteMarkdown(f, sum); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runVCTimeSharing is 'rondo simulate --vc-config C --time-sharing'.
func (c *simulateCmd) runVCTimeSharing(cfg *rhcl.Config, dist []philly.Pair, seeds []uint64, tenants []philly.Tenant, jobs, gpus int) int {
	spec := specFromConfig(cfg)
	pols, err := vcPolicies(cfg, c.vc.vcPolicy)
	if err != nil {
		return c.fail(err)
	}
	if err := rhcl.ValidPolicy(c.vc.oppPolicy); err != nil {
		return c.fail(fmt.Errorf("--opp-policy: %w", err))
	}
	var results []*vcsim.TimeShareResult
	for _, seed := range seeds {
		tr, err := philly.Generate(dist, philly.Options{Seed: seed, Jobs: jobs, Tenants: tenants, ClusterGPUs: gpus,
			Load: c.vc.load, Opportunistic: c.vc.opp, MaxDurationS: c.vc.maxDur, WorkShares: true})
		if err != nil {
			return c.fail(err)
		}
		r, err := vcsim.CompareTimeSharing(tr, vcsim.TimeShareOptions{Spec: spec, Policies: pols, OppPolicy: c.vc.oppPolicy,
			RoundS: c.round, Seed: int64(seed)})
		if err != nil {
			return c.fail(fmt.Errorf("seed %d: %w", seed, err))
		}
		results = append(results, r)
	}
	if c.jsonOut {
		if err := json.NewEncoder(c.stdout).Encode(map[string]any{"results": results}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	fmt.Fprintf(c.stdout, "%d GPUs, %d jobs per seed, load %.2f, %.0f%% opportunistic, seeds %v, rounds of %.0f s, each VC's policy inside its cells\n\n",
		gpus, jobs, c.vc.load, 100*c.vc.opp, seeds, c.round)
	if err := vcsim.WriteTimeShareMarkdown(c.stdout, results); err != nil {
		return c.fail(err)
	}
	return 0
}

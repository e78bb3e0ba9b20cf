package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/preflight"
	"github.com/rondo-sched/rondo/allocator/state"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

func init() {
	register("config", func() (cli.Command, error) { return &configCmd{}, nil })
	register("config validate", func() (cli.Command, error) { return newConfigValidate(), nil })
}

type configCmd struct{}

func (*configCmd) Synopsis() string { return "Check the allocator's HCL configuration" }
func (*configCmd) Help() string {
	return "Usage: rondo config <subcommand>\n\n  Check the allocator's HCL configuration (cells, VCs, policies).\n"
}
func (*configCmd) Run([]string) int { return cli.RunResultHelp }

type configValidate struct {
	base
	live      bool
	nomad     nomadFlags
	pool      string
	statePath string
	timeout   time.Duration
}

func newConfigValidate() *configValidate {
	c := &configValidate{base: newBase("config validate",
		"Validate a config file or directory; print a summary or the errors; with -nomad check the live cluster too", "[-nomad [nomad flags]] FILE|DIR")}
	c.flags.BoolVar(&c.live, "nomad", false, "also check the live Nomad cluster (preflight): nodes, pools and classes the cells name, the GPU clients' plugin and GPU types, the token's capabilities, preemption; one line per finding, exit 1 on an error")
	c.nomad.register(c.flags)
	c.flags.StringVar(&c.pool, "pool", "", "with -nomad: the agent's GPU node pool (default the config's agent { pool }, else "+rnomad.DefaultPool+")")
	c.flags.StringVar(&c.statePath, "state-path", state.DefaultPath, "with -nomad: the agent's state variable path (its variables are probed next to it)")
	c.flags.DurationVar(&c.timeout, "timeout", 30*time.Second, "with -nomad: how long the checks may take")
	return c
}

func (c *configValidate) Run(args []string) (code int) {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.flags.NArg() != 1 {
		return c.fail(fmt.Errorf("want one FILE or DIR, got %d arguments", c.flags.NArg()))
	}
	path := c.flags.Arg(0)
	cfg, diags := rhcl.LoadPath(path)
	if diags.HasErrors() {
		for _, d := range diags {
			fmt.Fprintln(c.stderr, rhcl.FormatDiagnostic(d))
		}
		return 1
	}
	for _, w := range configWarnings(diags) {
		fmt.Fprintln(c.stderr, w) // e.g. the deprecated round_seconds
	}
	if err := checkVCSizers(cfg); err != nil {
		fmt.Fprintln(c.stderr, err) // a dl2 VC's model file
		return 1
	}
	if _, _, err := throughputTable(cfg); err != nil {
		fmt.Fprintln(c.stderr, err) // the throughputs file
		return 1
	}
	tree := rhcl.NewTypeTree(cfg.CellTypes)
	gpus := 0
	for _, cell := range cfg.Cells {
		gpus += tree.Count(cell.Type, 1)
	}
	if c.live {
		defer func() { code = c.preflight(cfg, code) }()
	}
	if cfg.QuotaOnly() {
		// Quota-only shares are checked against the cluster at run time.
		asked := map[string]int{}
		for _, v := range cfg.VCs {
			for t, n := range v.GPUs {
				asked[t] += n
			}
		}
		types := slices.Sorted(maps.Keys(asked))
		parts := make([]string, len(types))
		for i, t := range types {
			parts[i] = fmt.Sprintf("%s %d", t, asked[t])
		}
		fmt.Fprintf(c.stdout, "%s: ok (%d quota-only VCs asking %s GPUs, round %ds)\n",
			path, len(cfg.VCs), strings.Join(parts, ", "), cfg.RoundSeconds)
		return 0
	}
	fmt.Fprintf(c.stdout, "%s: ok (%d cell types, %d cells, %d GPUs, %d VCs, round %ds)\n",
		path, len(cfg.CellTypes), len(cfg.Cells), gpus, len(cfg.VCs), cfg.RoundSeconds)
	return 0
}

// preflight checks the live cluster (allocator/preflight) after the
// config itself passed (code 0): one line per finding on stdout; any
// error makes the exit code 1, with a one-line summary on stderr.
func (c *configValidate) preflight(cfg *rhcl.Config, code int) int {
	if code != 0 {
		return code
	}
	nc, err := c.nomad.config(cfg.Nomad)
	if err != nil {
		return c.fail(err)
	}
	if err := withTimeout(nc, c.timeout); err != nil {
		return c.fail(err)
	}
	// The agent's namespaces: its home one (the state and lock live there)
	// first, then those the VCs list; with "*" the home one (namespaces.go).
	home := rnomad.HomeNamespace(nc.Namespace)
	nss := []string{home}
	if nc.Namespace != rhcl.AllNamespaces {
		for _, ns := range cfg.Namespaces() {
			if !slices.Contains(nss, ns) {
				nss = append(nss, ns)
			}
		}
	}
	nc.Namespace = home
	client, err := api.NewClient(nc)
	if err != nil {
		return c.fail(err)
	}
	pool := c.pool
	if pool == "" {
		pool = cfg.Agent.Pool
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	fs := preflight.Run(ctx, client, cfg, preflight.Options{Pool: pool, Namespaces: nss,
		StatePath: c.statePath, TypeOf: func(d *api.NodeDeviceResource) string {
			return rnomad.DeviceType(d, cfg.TypeNames()) // as the agent names them
		}})
	for _, f := range fs {
		fmt.Fprintln(c.stdout, f)
	}
	oks, warnings, errs := preflight.Count(fs)
	if errs > 0 {
		return c.fail(fmt.Errorf("%s: the cluster at %s fails %d checks (%d ok, %d warnings): see the error lines above",
			c.flags.Arg(0), nc.Address, errs, oks, warnings))
	}
	fmt.Fprintf(c.stdout, "%s: the cluster at %s passes (%d ok, %d warnings)\n", c.flags.Arg(0), nc.Address, oks, warnings)
	return 0
}

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/cli"
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

type configValidate struct{ base }

func newConfigValidate() *configValidate {
	return &configValidate{base: newBase("config validate",
		"Validate a config file or directory; print a summary or the errors", "FILE|DIR")}
}

func (c *configValidate) Run(args []string) int {
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

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

func init() {
	register("job run", func() (cli.Command, error) { return newJobRun(), nil })
}

type jobRun struct {
	base
	address string
	output  bool
	vars    multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newJobRun() *jobRun {
	c := &jobRun{base: newBase("job run", "Submit a Nomad job file that may carry a Rondo policy { } stanza",
		"[options] FILE")}
	c.flags.StringVar(&c.address, "address", "", "Nomad HTTP address (default: $NOMAD_ADDR or http://127.0.0.1:4646); token from $NOMAD_TOKEN")
	c.flags.BoolVar(&c.output, "output", false, "print the job as JSON (with the policy as rondo.* meta) instead of submitting it")
	c.flags.Var(&c.vars, "var", "HCL2 variable key=value, as for nomad job run (repeatable)")
	return c
}

// Run translates the stanza into rondo.* job meta and hands the rest of the
// file to Nomad's own parser, so everything Nomad accepts still works; the
// job then waits for admission like any other opted-in job.
func (c *jobRun) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.flags.NArg() != 1 {
		return c.fail(errors.New("expected exactly one job file"))
	}
	path := c.flags.Arg(0)
	job, err := parseJobFile(path, c.vars)
	if err != nil {
		return c.fail(err)
	}
	if c.output {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]*api.Job{"Job": job}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	cfg := api.DefaultConfig()
	if c.address != "" {
		cfg.Address = c.address
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return c.fail(err)
	}
	resp, _, err := client.Jobs().Register(job, nil)
	if err != nil {
		return c.fail(fmt.Errorf("submitting %s: %w", path, err))
	}
	fmt.Fprintf(c.stdout, "Job %q submitted (evaluation %s); it runs once Rondo admits it.\n", *job.ID, resp.EvalID)
	return 0
}

// parseJobFile reads a job file, lifts its policy stanza into job meta and
// parses the rest with Nomad's HCL2 job parser.
func parseJobFile(path string, vars []string) (*api.Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	policy, found, rest, diags := rhcl.SplitJobFile(path, src)
	if diags.HasErrors() {
		return nil, errors.New(rhcl.FormatDiagnostics(diags))
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: path, Body: rest, ArgVars: vars, AllowFS: true, Strict: true})
	if err != nil {
		return nil, err
	}
	if found {
		if job.Meta == nil {
			job.Meta = map[string]string{}
		}
		for k, v := range policy.ToMeta() {
			if old, ok := job.Meta[k]; ok && old != v {
				return nil, fmt.Errorf("%s: meta %q = %q conflicts with the policy stanza (%q)", path, k, old, v)
			}
			job.Meta[k] = v
		}
	}
	return job, nil
}

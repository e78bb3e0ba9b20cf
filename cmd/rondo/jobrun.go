package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
	nomadb "github.com/rondo-sched/rondo/allocator/nomad"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

func init() {
	register("job run", func() (cli.Command, error) { return newJobRun(), nil })
}

type jobRun struct {
	base
	nomad      nomadFlags
	output     bool
	vars       multiFlag
	varFiles   multiFlag
	checkIndex string
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newJobRun() *jobRun {
	c := &jobRun{base: newBase("job run", "Submit a Nomad job file that may carry a Rondo policy { } stanza",
		"[options] FILE")}
	c.nomad.register(c.flags)
	c.flags.BoolVar(&c.output, "output", false, "print the job as JSON (with the policy as rondo.* meta) instead of submitting it")
	c.flags.Var(&c.vars, "var", "HCL2 variable key=value, as for nomad job run (repeatable; NOMAD_VAR_* from the environment too)")
	c.flags.Var(&c.varFiles, "var-file", "HCL2 variable file, as for nomad job run (repeatable)")
	c.flags.StringVar(&c.checkIndex, "check-index", "", "register only if the job's modify index is N (0: only if the job does not exist), as for nomad job run")
	return c
}

// Run translates the stanza into rondo.* job meta and hands the rest of the
// file to Nomad's own parser, so everything Nomad accepts still works; the
// job then waits for admission like any other opted-in job. Re-running a
// job Rondo has admitted keeps Rondo's count, pins, pool and priority
// (rondo.CarryPlacement): the update changes only what the file changed.
func (c *jobRun) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.flags.NArg() != 1 {
		return c.fail(errors.New("expected exactly one job file"))
	}
	var index uint64
	enforce := c.checkIndex != ""
	if enforce {
		var err error
		if index, err = strconv.ParseUint(c.checkIndex, 10, 64); err != nil {
			return c.fail(fmt.Errorf("-check-index %q: not a modify index", c.checkIndex))
		}
	}
	path := c.flags.Arg(0)
	job, err := parseJobFile(path, c.vars, c.varFiles)
	if err != nil {
		return c.fail(err)
	}
	for _, w := range scalingWarnings(job) {
		fmt.Fprintln(c.stderr, "warning:", w)
	}
	if c.output {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]*api.Job{"Job": job}); err != nil {
			return c.fail(err)
		}
		return 0
	}
	cfg, err := c.nomad.config(rhcl.Nomad{}) // a namespace in the job file wins, as for nomad job run
	if err != nil {
		return c.fail(err)
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return c.fail(err)
	}
	// As nomad job run: the job's own region and namespace win.
	if job.Region != nil && *job.Region != "" {
		client.SetRegion(*job.Region)
	}
	if job.Namespace != nil && *job.Namespace != "" {
		client.SetNamespace(*job.Namespace)
	}
	kept := false
	if old, _, err := client.Jobs().Info(*job.ID, nil); err == nil {
		var notes []string
		kept, notes = nomadb.CarryPlacement(old, job)
		for _, n := range notes {
			fmt.Fprintln(c.stderr, "warning:", n)
		}
		if kept && !enforce {
			// A round that changes the job between this read and the
			// register fails the register instead of being undone.
			enforce, index = true, deref(old.JobModifyIndex)
		}
	} else if !isNotFound(err) {
		return c.fail(fmt.Errorf("reading job %q: %w", *job.ID, err))
	}
	opts := &api.RegisterOptions{}
	if enforce {
		opts.EnforceIndex, opts.ModifyIndex = true, index
	}
	resp, _, err := client.Jobs().RegisterOpts(job, opts, nil)
	if err != nil {
		if m := enforceIndexRe.FindStringSubmatch(err.Error()); len(m) == 2 {
			return c.fail(fmt.Errorf("%s: job not updated", m[1]))
		}
		return c.fail(fmt.Errorf("submitting %s: %w", path, err))
	}
	if resp.Warnings != "" {
		fmt.Fprintln(c.stderr, "warning:", strings.TrimSpace(resp.Warnings))
	}
	if kept {
		fmt.Fprintf(c.stdout, "Job %q updated (evaluation %s); Rondo admitted it: its count, GPUs, nodes and pool are kept.\n", *job.ID, resp.EvalID)
		return 0
	}
	fmt.Fprintf(c.stdout, "Job %q submitted (evaluation %s); it runs once Rondo admits it.\n", *job.ID, resp.EvalID)
	return 0
}

// enforceIndexRe extracts Nomad's check-index error, as nomad job run does.
var enforceIndexRe = regexp.MustCompile(`\((` + api.RegisterEnforceIndexErrPrefix + `.*)\)`)

func isNotFound(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 404
	}
	return strings.Contains(err.Error(), "404")
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// scalingWarnings: what the Nomad backend would warn about the job's GPU
// group's scaling block (nomad.ScalingBounds), for an opted-in job.
func scalingWarnings(job *api.Job) []string {
	if job.Meta[rhcl.MetaVC] == "" {
		return nil
	}
	pol, err := rhcl.PolicyFromMeta(job.Meta)
	if err != nil {
		return nil // reported by the agent as bad meta
	}
	var warns []string
	for _, tg := range job.TaskGroups {
		if tg.Scaling == nil || !gpuRequest(tg) {
			continue
		}
		_, w := nomadb.ScalingBounds(deref(job.ID), pol, tg)
		warns = append(warns, w...)
	}
	return warns
}

func gpuRequest(tg *api.TaskGroup) bool {
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d.Name == "gpu" || d.Name == "nvidia/gpu" || strings.HasPrefix(d.Name, "nvidia/gpu/") {
				return true
			}
		}
	}
	return false
}

// parseJobFile reads a job file, lifts its policy stanza into job meta and
// parses the rest with Nomad's HCL2 job parser.
func parseJobFile(path string, vars, varFiles []string) (*api.Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	policy, found, rest, diags := rhcl.SplitJobFile(path, src)
	if diags.HasErrors() {
		return nil, errors.New(rhcl.FormatDiagnostics(diags))
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: path, Body: rest, ArgVars: vars, VarFiles: varFiles,
		Envs: os.Environ(), AllowFS: true, Strict: true})
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

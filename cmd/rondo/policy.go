package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/policies"
)

func init() {
	register("policy", func() (cli.Command, error) { return &policyCmd{}, nil })
	register("policy solve", func() (cli.Command, error) { return newPolicySolve(), nil })
	register("policy list", func() (cli.Command, error) { return newPolicyList(), nil })
}

type policyCmd struct{}

func (*policyCmd) Synopsis() string { return "Solve and list scheduling policies" }
func (*policyCmd) Help() string {
	return "Usage: rondo policy <subcommand> [options]\n\n  Solve and list Gavel's scheduling policies.\n"
}
func (*policyCmd) Run([]string) int { return cli.RunResultHelp }

type policySolve struct {
	base
	policy string
	input  string
}

func newPolicySolve() *policySolve {
	c := &policySolve{base: newBase("policy solve", "Solve one policy on a JSON problem and print the allocation as JSON",
		"--policy NAME [--input FILE|-]")}
	c.flags.StringVar(&c.policy, "policy", "", "policy name (see 'rondo policy list')")
	c.flags.StringVar(&c.input, "input", "-", "problem JSON file, or - for standard input")
	return c
}

func (c *policySolve) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.policy == "" {
		return c.fail(fmt.Errorf("--policy is required (one of: %s)", strings.Join(policies.Names(), ", ")))
	}
	r, err := openInput(c.input)
	if err != nil {
		return c.fail(err)
	}
	defer r.Close()
	p, err := policies.ReadProblem(r)
	if err != nil {
		return c.fail(fmt.Errorf("%s: %w", inputName(c.input), err))
	}
	a, err := policies.Solve(c.policy, p)
	if err != nil {
		return c.fail(err)
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(a); err != nil {
		return c.fail(err)
	}
	return 0
}

func inputName(path string) string {
	if path == "" || path == "-" {
		return "<stdin>"
	}
	return path
}

type policyList struct{ base }

func newPolicyList() *policyList {
	return &policyList{base: newBase("policy list", "List the policy names", "")}
}

func (c *policyList) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	for _, n := range policies.Names() {
		fmt.Fprintln(c.stdout, n)
	}
	return 0
}

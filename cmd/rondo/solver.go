package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/policies/lp"
)

// solving are the commands that solve policies with COIN-OR Clp. The
// others (status, job, vc, node, config validate, policy list, cells plan,
// version) need no solver, so a binary built with -tags noclp and without
// cgo (`make client`) serves them.
var solving = []string{"agent", "demo", "policy solve", "simulate", "simulate sweep"}

// withSolver is the command table as this build can run it: without Clp
// the solving commands fail at once with lp.ErrNoClp, not at their first
// solve (help still works).
func withSolver(cmds map[string]cli.CommandFactory) map[string]cli.CommandFactory {
	if lp.Available() {
		return cmds
	}
	out := make(map[string]cli.CommandFactory, len(cmds))
	for name, f := range cmds {
		out[name] = f
	}
	for _, name := range solving {
		f, ok := cmds[name]
		if !ok {
			continue
		}
		out[name] = func() (cli.Command, error) {
			c, err := f()
			if err != nil {
				return nil, err
			}
			return noSolver{Command: c, name: name}, nil
		}
	}
	return out
}

type noSolver struct {
	cli.Command
	name string
}

func (n noSolver) Run(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return cli.RunResultHelp
		}
	}
	fmt.Fprintf(os.Stderr, "rondo %s: %v\n", n.name, lp.ErrNoClp)
	return 1
}

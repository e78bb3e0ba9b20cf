// Command rondo is Rondo's single binary: the allocator agent, the simulator,
// the policy solver and the cell planner, as HashiCorp-style subcommands.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/internal/version"
)

// commands maps a subcommand path ("policy solve") to its factory. Each
// command file adds its own entries from an init function, so that adding a
// subcommand touches one file.
var commands = map[string]cli.CommandFactory{}

func register(name string, f cli.CommandFactory) {
	if _, dup := commands[name]; dup {
		panic("rondo: command registered twice: " + name)
	}
	commands[name] = f
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	c := cli.NewCLI("rondo", version.Version)
	c.Args = args
	c.Commands = withSolver(commands)
	// Shell completion: `rondo -autocomplete-install` (bash, zsh, fish);
	// each command completes its flags (complete.go).
	c.Autocomplete = true
	c.HelpWriter = os.Stdout
	c.ErrorWriter = os.Stderr
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rondo: %v\n", err)
		return 1
	}
	if code == 127 { // unknown subcommand: the CLI printed the help already
		return 1
	}
	return code
}

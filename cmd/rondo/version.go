package main

import (
	"fmt"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/internal/version"
)

func init() {
	register("version", func() (cli.Command, error) { return newVersionCmd(), nil })
}

type versionCmd struct{ base }

func newVersionCmd() *versionCmd {
	return &versionCmd{base: newBase("version", "Print the build's version and Go version", "")}
}

func (c *versionCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	fmt.Fprintf(c.stdout, "rondo %s (%s)\n", version.Version, version.GoVersion())
	return 0
}

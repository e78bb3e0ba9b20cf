package main

import (
	"fmt"

	"github.com/hashicorp/cli"
)

func init() {
	register("demo", func() (cli.Command, error) {
		return &demoCmd{base: newBase("demo", "Run the embedded demo cluster (the README's main job)", "")}, nil
	})
}

type demoCmd struct{ base }

func (c *demoCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	fmt.Fprintln(c.stdout, "rondo demo: the embedded Nomad demo cluster is not built yet (issue: the Nomad allocator).")
	fmt.Fprintln(c.stdout, "Meanwhile try: rondo policy list; rondo policy solve --policy las --input policies/testdata/worked_example.json")
	return 0
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/agent"
)

func init() {
	register("node", func() (cli.Command, error) { return &nodeCmd{}, nil })
	register("node status", func() (cli.Command, error) { return newNodeStatus(), nil })
}

type nodeCmd struct{}

func (*nodeCmd) Synopsis() string { return "Show the nodes, their GPUs and the jobs on them" }
func (*nodeCmd) Help() string {
	return "Usage: rondo node status [options] [NODE]\n\n  The nodes as the running agent saw them in its last round.\n"
}
func (*nodeCmd) Run([]string) int { return cli.RunResultHelp }

func newNodeStatus() *view {
	v := newView("node status", "Show the nodes (pool, class, ready) and their GPUs: type, health, cell, share use and the jobs on them",
		"[options] [NODE]", byVC|byUser, 0, 1)
	v.get = func(ctx context.Context, c *agentClient, o *viewOptions, args []string) (any, *agent.Status, error) {
		s, err := c.status(ctx)
		if err != nil {
			return nil, nil, err
		}
		nodes := filterNodes(s, o)
		if len(args) == 0 {
			return nodes, s, nil
		}
		n, err := findNode(nodes, args[0])
		if err != nil {
			return nil, s, err
		}
		return n, s, nil
	}
	v.text = func(w io.Writer, d any) {
		switch d := d.(type) {
		case agent.NodeStatus:
			printNode(w, d)
		case []agent.NodeStatus:
			printNodes(w, d)
		}
	}
	return v
}

// filterNodes keeps, with -vc or -user, the GPUs that run jobs of that VC
// or user and the nodes that have such GPUs (never nil: -json prints []).
func filterNodes(s *agent.Status, o *viewOptions) []agent.NodeStatus {
	out := []agent.NodeStatus{}
	if o.vc == "" && o.user == "" {
		return append(out, s.Nodes...)
	}
	keep := map[string]bool{}
	for _, j := range s.Jobs {
		keep[j.ID] = o.keepJob(j)
	}
	for _, n := range s.Nodes {
		var gpus []agent.GPUStatus
		for _, g := range n.GPUs {
			for _, j := range g.Jobs {
				if keep[j] {
					gpus = append(gpus, g)
					break
				}
			}
		}
		if len(gpus) > 0 {
			n.GPUs = gpus
			out = append(out, n)
		}
	}
	return out
}

// findNode finds a node by name, id or a unique id prefix.
func findNode(nodes []agent.NodeStatus, q string) (agent.NodeStatus, error) {
	var hits []agent.NodeStatus
	for _, n := range nodes {
		if n.Name == q || n.ID == q {
			return n, nil
		}
		if strings.HasPrefix(n.ID, q) {
			hits = append(hits, n)
		}
	}
	if len(hits) == 1 {
		return hits[0], nil
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if len(hits) > 1 {
		return agent.NodeStatus{}, fmt.Errorf("node %q: the prefix of %d node ids; give more of it", q, len(hits))
	}
	return agent.NodeStatus{}, fmt.Errorf("node %q is unknown to the agent (its nodes: %s)", q, strings.Join(names, ", "))
}

// printNodes prints one line per node, then one per GPU.
func printNodes(w io.Writer, nodes []agent.NodeStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Node\tID\tPool\tClass\tReady\tGPUs\tHealthy\tUsed")
	for _, n := range nodes {
		healthy, used := 0, 0
		for _, g := range n.GPUs {
			if g.Healthy {
				healthy++
			}
			if len(g.Jobs) > 0 {
				used++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Name, shortID(n.ID), orDash(n.Pool), orDash(n.Class), yesNo(n.Ready),
			len(n.GPUs), healthy, used)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Node\tGPU\tType\tHealth\tCell\tShare\tJobs")
	for _, n := range nodes {
		gpuRows(tw, n, n.Name+"\t")
	}
	tw.Flush()
}

// printNode prints one node and its GPUs.
func printNode(w io.Writer, n agent.NodeStatus) {
	fmt.Fprintf(w, "Node:     %s\nID:       %s\nPool:     %s\nClass:    %s\nReady:    %s\n\n", n.Name, n.ID, orDash(n.Pool),
		orDash(n.Class), yesNo(n.Ready))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tType\tHealth\tCell\tShare\tJobs")
	gpuRows(tw, n, "")
	tw.Flush()
}

func gpuRows(tw io.Writer, n agent.NodeStatus, prefix string) {
	for _, g := range n.GPUs {
		health, share := "healthy", "-"
		if !g.Healthy {
			health = "unhealthy"
		}
		if g.Share > 0 {
			share = fmt.Sprintf("%.2g", g.Share)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\n", prefix, g.ID, g.Type, health, orDash(g.Cell), share, orDash(strings.Join(g.Jobs, ", ")))
	}
}

// shortID is the first 8 characters of a node id, as nomad prints it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

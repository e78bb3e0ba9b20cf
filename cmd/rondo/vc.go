package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/agent"
)

func init() {
	register("vc", func() (cli.Command, error) { return &vcCmd{}, nil })
	register("vc status", func() (cli.Command, error) { return newVCStatus(), nil })
}

type vcCmd struct{}

func (*vcCmd) Synopsis() string { return "Show the virtual clusters' shares and use" }
func (*vcCmd) Help() string {
	return "Usage: rondo vc status [options] [VC]\n\n  The virtual clusters as the running agent saw them in its last round.\n"
}
func (*vcCmd) Run([]string) int { return cli.RunResultHelp }

func newVCStatus() *view {
	v := newView("vc status", "Show each VC's quota, used, borrowed and lent GPUs per type, entitled vs received GPU time, running and pending jobs",
		"[options] [VC]", byVC, 0, 1)
	v.get = func(ctx context.Context, c *agentClient, o *viewOptions, args []string) (any, *agent.Status, error) {
		s, err := c.status(ctx)
		if err != nil {
			return nil, nil, err
		}
		want := o.vc
		if len(args) == 1 {
			want = args[0]
		}
		if want == "" {
			return s.VCs, s, nil
		}
		for _, v := range s.VCs {
			if v.Name == want {
				if len(args) == 1 {
					return v, s, nil
				}
				return []agent.VC{v}, s, nil
			}
		}
		var names []string
		for _, v := range s.VCs {
			names = append(names, v.Name)
		}
		return nil, s, fmt.Errorf("vc %q is unknown to the agent (its VCs: %s)", want, strings.Join(names, ", "))
	}
	v.text = func(w io.Writer, d any) {
		switch d := d.(type) {
		case agent.VC:
			printVC(w, d)
		case []agent.VC:
			printVCs(w, d)
		}
	}
	return v
}

// printVCs prints one line per VC (policy, jobs, GPU time), then one per
// VC and GPU type (quota, used, borrowed, lent).
func printVCs(w io.Writer, vcs []agent.VC) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VC\tPolicy\tRunning\tPending\tEntitled GPU-h\tReceived GPU-h\tReceived/Entitled")
	for _, v := range vcs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", v.Name, v.Policy, v.Running, v.Pending, gpuHours(v.EntitledGPUS),
			gpuHours(v.ReceivedGPUS), ratio(v.ReceivedGPUS, v.EntitledGPUS))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VC\tType\tQuota\tUsed\tBorrowed\tLent")
	for _, v := range vcs {
		vcTypes(tw, v, v.Name+"\t")
	}
	tw.Flush()
}

// printVC prints one VC in full: its share or cells, entities, jobs, GPU
// time, use per type and, for a gandiva_fair VC, its users.
func printVC(w io.Writer, v agent.VC) {
	line := func(k, format string, a ...any) { fmt.Fprintf(w, "%-10s"+format+"\n", append([]any{k + ":"}, a...)...) }
	line("VC", "%s", v.Name)
	line("Policy", "%s", v.Policy)
	if len(v.GPUs) > 0 {
		line("Share", "%s GPUs", kv(v.GPUs))
	}
	if len(v.Cells) > 0 {
		line("Cells", "%s", kv(v.Cells))
	}
	if len(v.Entities) > 0 {
		var parts []string
		for _, e := range slices.Sorted(maps.Keys(v.Entities)) {
			parts = append(parts, fmt.Sprintf("%s=%g", e, v.Entities[e]))
		}
		line("Entities", "%s", strings.Join(parts, ", "))
	}
	line("Jobs", "%d running, %d pending", v.Running, v.Pending)
	line("GPU time", "entitled %s GPU-h, received %s GPU-h (received/entitled %s)", gpuHours(v.EntitledGPUS),
		gpuHours(v.ReceivedGPUS), ratio(v.ReceivedGPUS, v.EntitledGPUS))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Type\tQuota\tUsed\tBorrowed\tLent")
	vcTypes(tw, v, "")
	tw.Flush()
	types := map[string]bool{}
	for _, u := range v.Users {
		for t := range u.Share {
			types[t] = true
		}
	}
	printUsers(w, []agent.VC{v}, slices.Sorted(maps.Keys(types)))
}

// vcTypes writes a VC's rows per GPU type (its quota's and those it uses),
// each after prefix; a quota the agent does not know is "-".
func vcTypes(tw io.Writer, v agent.VC, prefix string) {
	types := map[string]bool{}
	for _, m := range []map[string]int{v.Quota, v.Used, v.Borrowed, v.Lent} {
		for t := range m {
			types[t] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(types)) {
		quota := "-"
		if v.Quota != nil {
			quota = fmt.Sprint(v.Quota[t])
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%d\t%d\n", prefix, t, quota, v.Used[t], v.Borrowed[t], v.Lent[t])
	}
}

// kv prints a map as k=v, sorted by key.
func kv(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// gpuHours prints GPU-seconds as GPU-hours: two decimals from 1, three
// significant digits below.
func gpuHours(s float64) string {
	h := s / 3600
	switch {
	case h == 0:
		return "0"
	case h >= 100:
		return fmt.Sprintf("%.0f", h)
	case h >= 1:
		return fmt.Sprintf("%.2f", h)
	}
	return fmt.Sprintf("%.3g", h)
}

// ratio is a / b with two decimals ("-" when b is 0).
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/agent"
)

func init() {
	register("status", func() (cli.Command, error) { return newStatusCmd(), nil })
}

func newStatusCmd() *view {
	v := newView("status", "Show the running agent's rounds, GPU usage and jobs", "[options]", byVC|byUser|byState, 0, 0)
	v.get = func(ctx context.Context, c *agentClient, o *viewOptions, _ []string) (any, *agent.Status, error) {
		s, err := c.status(ctx)
		if err != nil {
			return nil, nil, err
		}
		s.Jobs = o.jobs(s.Jobs)
		if o.vc != "" {
			s.VCs = slices.DeleteFunc(s.VCs, func(v agent.VC) bool { return v.Name != o.vc })
		}
		return s, s, nil
	}
	v.text = func(w io.Writer, d any) { printStatus(w, d.(*agent.Status)) }
	return v
}

// printStatus prints the status for people: the agent, rounds, VCs, usage
// per GPU type, a gandiva_fair VC's users and the jobs.
func printStatus(w io.Writer, s *agent.Status) {
	fmt.Fprintf(w, "Cluster:    %s\nPolicy:     %s\nRound:      %d (every %gs)\n", s.Cluster, s.Policy, s.Round, s.RoundSeconds)
	if !s.NextRound.IsZero() {
		fmt.Fprintf(w, "Next round: %s (in %s)\n", s.NextRound.Format(time.TimeOnly), time.Until(s.NextRound).Round(time.Second))
	}
	fmt.Fprintf(w, "Leader:     %s\n", leaderLine(s))
	var vcs []string
	for _, v := range s.VCs {
		vcs = append(vcs, v.Name+" ("+v.Policy+")")
	}
	fmt.Fprintf(w, "VCs:        %s\n", strings.Join(vcs, ", "))
	if s.LastError != "" {
		fmt.Fprintf(w, "Last error: %s\n", s.LastError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nType\tGPUs\tUsed\tFailed\tThroughputs")
	types := make([]string, 0, len(s.Types))
	for t := range s.Types {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		u := s.Types[t]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", t, u.Total, u.Used, u.Failed, sourcesOn(s.Jobs, t))
	}
	tw.Flush()
	printUsers(w, s.VCs, types)
	fmt.Fprintln(w)
	printJobs(w, s.Jobs)
}

// sourcesOn counts where the active jobs' throughputs on GPU type t come
// from: "2 measured, 3 estimated, 1 defaulted" ("-" for none), so that an
// operator sees on which types the policy decides on guesses.
func sourcesOn(jobs []agent.JobStatus, t string) string {
	n := map[string]int{}
	for _, j := range jobs {
		if v, ok := j.Throughputs[t]; ok && j.State != "done" {
			n[v.Source]++
		}
	}
	var parts []string
	for _, src := range []string{"measured", "estimated", "table", "defaulted"} { // engine.Source*

		if n[src] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[src], src))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// leaderLine is "yes" for the leader, else "standby; leader at ADDR".
func leaderLine(s *agent.Status) string {
	switch {
	case s.Leader:
		return "yes"
	case s.LeaderAddr != "":
		return "standby; leader at " + s.LeaderAddr
	}
	return "standby; leader unknown"
}

// printUsers prints each gandiva_fair VC's users (tickets, GPUs per type
// before and after trading) and its trades.
func printUsers(w io.Writer, vcs []agent.VC, types []string) {
	for _, v := range vcs {
		if len(v.Users) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nUsers of VC %s (GPUs per type: fair share -> after trading; migrations %d)\n", v.Name, v.Migrations)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, "User\tTickets")
		for _, t := range types {
			fmt.Fprintf(tw, "\t%s", t)
		}
		fmt.Fprintln(tw)
		for _, u := range v.Users {
			fmt.Fprintf(tw, "%s\t%d", u.User, u.Tickets)
			for _, t := range types {
				if u.FairShare[t] == u.Share[t] {
					fmt.Fprintf(tw, "\t%.2f", u.Share[t])
				} else {
					fmt.Fprintf(tw, "\t%.2f -> %.2f", u.FairShare[t], u.Share[t])
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		for _, tr := range v.Trades {
			fmt.Fprintf(w, "Trade: %s buys %.2f %s from %s at %.2f %s each\n", tr.Buyer, tr.Amount, tr.Fast, tr.Seller, tr.Price, tr.Slow)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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

type statusCmd struct {
	base
	addr  string
	json  bool
	token string
}

// tokenFlag is -token of the command that runs (status): the Nomad ACL
// token sent to the agent's status API; NOMAD_TOKEN when unset.
var tokenFlag string

// statusToken is the token fetchStatus sends.
func statusToken() string {
	if tokenFlag != "" {
		return tokenFlag
	}
	return os.Getenv("NOMAD_TOKEN")
}

func newStatusCmd() *statusCmd {
	c := &statusCmd{base: newBase("status", "Show the running agent's rounds, GPU usage and jobs", "[-addr URL] [-json]")}
	c.flags.StringVar(&c.addr, "addr", "http://127.0.0.1:4700", "the agent's status API")
	c.flags.BoolVar(&c.json, "json", false, "print the raw JSON")
	c.flags.StringVar(&tokenFlag, "token", "", "Nomad ACL token for the status API (default NOMAD_TOKEN)")
	return c
}

func (c *statusCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	s, err := fetchStatus(c.addr)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(s)
		return 0
	}
	fmt.Fprintf(c.stdout, "Cluster:    %s\nPolicy:     %s\nRound:      %d (every %gs)\n", s.Cluster, s.Policy, s.Round, s.RoundSeconds)
	fmt.Fprintf(c.stdout, "Leader:     %s\n", leaderLine(s))
	if !s.NextRound.IsZero() {
		fmt.Fprintf(c.stdout, "Next round: %s (in %s)\n", s.NextRound.Format(time.TimeOnly), time.Until(s.NextRound).Round(time.Second))
	}
	var vcs []string
	for _, v := range s.VCs {
		vcs = append(vcs, v.Name+" ("+v.Policy+")")
	}
	fmt.Fprintf(c.stdout, "VCs:        %s\n", strings.Join(vcs, ", "))
	if s.LastError != "" {
		fmt.Fprintf(c.stdout, "Last error: %s\n", s.LastError)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nType\tGPUs\tUsed\tFailed")
	types := make([]string, 0, len(s.Types))
	for t := range s.Types {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		u := s.Types[t]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", t, u.Total, u.Used, u.Failed)
	}
	tw.Flush()
	printUsers(c.stdout, s.VCs, types)
	fmt.Fprintln(c.stdout)
	printJobs(c.stdout, s.Jobs)
	return 0
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

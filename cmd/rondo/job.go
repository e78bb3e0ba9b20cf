package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/agent"
)

func init() {
	register("job", func() (cli.Command, error) { return &jobCmd{}, nil })
	register("job list", func() (cli.Command, error) { return newJobList(), nil })
	register("job status", func() (cli.Command, error) { return newJobStatus(), nil })
}

type jobCmd struct{}

func (*jobCmd) Synopsis() string { return "List Rondo's jobs or show one" }
func (*jobCmd) Help() string {
	return "Usage: rondo job <list|status> [options]\n\n  Jobs as the running agent saw them in its last round.\n"
}
func (*jobCmd) Run([]string) int { return cli.RunResultHelp }

// fetchStatus reads the agent's status API.
func fetchStatus(addr string) (*agent.Status, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(strings.TrimSuffix(addr, "/") + "/v1/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", addr, resp.Status)
	}
	var s agent.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

type jobList struct {
	base
	addr string
}

func newJobList() *jobList {
	c := &jobList{base: newBase("job list", "List active jobs: state, GPU type, GPUs, progress", "[-addr URL]")}
	c.flags.StringVar(&c.addr, "addr", "http://127.0.0.1:4700", "the agent's status API")
	return c
}

func (c *jobList) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	s, err := fetchStatus(c.addr)
	if err != nil {
		return c.fail(err)
	}
	printJobs(c.stdout, s.Jobs)
	return 0
}

func printJobs(w interface{ Write([]byte) (int, error) }, jobs []agent.JobStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Job\tState\tType\tGPUs\tProgress")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f/%.0f\n", j.ID, j.State, j.Type, j.ScaleFactor, j.TotalSteps-j.RemainingSteps, j.TotalSteps)
	}
	tw.Flush()
}

type jobStatus struct {
	base
	addr string
}

func newJobStatus() *jobStatus {
	c := &jobStatus{base: newBase("job status", "Show one job: state, GPU ids, progress", "[-addr URL] JOB")}
	c.flags.StringVar(&c.addr, "addr", "http://127.0.0.1:4700", "the agent's status API")
	return c
}

func (c *jobStatus) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.flags.NArg() != 1 {
		return c.fail(fmt.Errorf("want one JOB, got %d arguments", c.flags.NArg()))
	}
	s, err := fetchStatus(c.addr)
	if err != nil {
		return c.fail(err)
	}
	for _, j := range s.Jobs {
		if j.ID == c.flags.Arg(0) {
			fmt.Fprintf(c.stdout, "ID:       %s\nState:    %s\nType:     %s\nGPUs:     %d %s\nProgress: %.0f/%.0f steps\n",
				j.ID, j.State, j.Type, j.ScaleFactor, strings.Join(j.GPUs, ","), j.TotalSteps-j.RemainingSteps, j.TotalSteps)
			return 0
		}
	}
	return c.fail(fmt.Errorf("job %q is not active (finished, unknown, or not opted in)", c.flags.Arg(0)))
}

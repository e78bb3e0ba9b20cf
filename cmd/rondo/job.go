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
	req, err := http.NewRequest("GET", strings.TrimSuffix(addr, "/")+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	if tok := statusToken(); tok != "" {
		req.Header.Set("X-Nomad-Token", tok)
	}
	resp, err := hc.Do(req)
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
	fmt.Fprintln(tw, "Job\tVC\tState\tType\tGPUs\tRounds\tProgress\tSteps/s\tETA")
	for _, j := range jobs {
		typ := orDash(j.Type)
		if j.With != "" {
			typ += " shared with " + j.With // space sharing: an MPS share of each GPU
		}
		state := j.State
		if j.Refused != "" {
			state = "refused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f/%.0f\t%s\t%s\n", j.ID, orDash(j.VC), state, typ, j.ScaleFactor,
			j.Rounds, j.TotalSteps-j.RemainingSteps, j.TotalSteps, rate(j.Throughput), eta(j.ETA))
	}
	tw.Flush()
	for _, j := range jobs {
		if j.Refused != "" {
			fmt.Fprintf(w, "%s refused: %s\n", j.ID, j.Refused)
		}
	}
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
			fmt.Fprintf(c.stdout, "ID:         %s\nVC:         %s\nState:      %s\nType:       %s\nGPUs:       %d %s\nRounds:     %d\nProgress:   %.0f/%.0f steps\nThroughput: %s steps/s\nETA:        %s\n",
				j.ID, orDash(j.VC), j.State, orDash(j.Type), j.ScaleFactor, strings.Join(j.GPUs, ","), j.Rounds,
				j.TotalSteps-j.RemainingSteps, j.TotalSteps, rate(j.Throughput), eta(j.ETA))
			if j.With != "" {
				fmt.Fprintf(c.stdout, "Shared with: %s (each on an MPS share of the GPUs)\n", j.With)
			}
			if j.MaxWorkers > 0 {
				fmt.Fprintf(c.stdout, "Workers:    %d (elastic %d..%d)\n", j.Workers, j.MinWorkers, j.MaxWorkers)
				if j.MaxPS > 0 {
					fmt.Fprintf(c.stdout, "PS:         %d (%d..%d)\n", j.PS, j.MinPS, j.MaxPS)
				}
			}
			return 0
		}
	}
	return c.fail(fmt.Errorf("job %q is unknown to the agent (not opted in, or finished before it started)", c.flags.Arg(0)))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rate(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func eta(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

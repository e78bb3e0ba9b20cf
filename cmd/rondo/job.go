package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
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
	return "Usage: rondo job <list|status|run> [options]\n\n  Jobs as the running agent saw them in its last round (list, status), or submit one (run).\n"
}
func (*jobCmd) Run([]string) int { return cli.RunResultHelp }

func newJobList() *view {
	v := newView("job list", "List jobs: user, VC, state, why it waits, queue position, GPUs, progress, ETA", "[options]",
		byVC|byUser|byState, 0, 0)
	v.get = func(ctx context.Context, c *agentClient, o *viewOptions, _ []string) (any, *agent.Status, error) {
		s, err := c.status(ctx)
		if err != nil {
			return nil, nil, err
		}
		return o.jobs(s.Jobs), s, nil
	}
	v.text = func(w io.Writer, d any) { printJobs(w, d.([]agent.JobStatus)) }
	return v
}

// printJobs prints one line per job: who and where, its state and why it
// waits, its place in its VC's queue, its GPUs, progress and ETA.
func printJobs(w io.Writer, jobs []agent.JobStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Job\tUser\tVC\tState\tGPUs\tQueue\tPriority\tWaiting\tProgress\tETA\tReason")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, orDash(j.User), orDash(j.VC), jobState(j), jobGPUs(j),
			queue(j.QueuePosition), num(j.Priority), seconds(j.WaitS), jobProgress(j), etaIn(j.ETA), orDash(whyOf(j)))
	}
	tw.Flush()
}

// jobState is the job's state, "refused" for a job its gandiva_fair VC
// refuses.
func jobState(j agent.JobStatus) string {
	if j.Refused != "" {
		return "refused"
	}
	return j.State
}

// jobGPUs: how many GPUs of which type it holds (running), else how many
// it asks for; with its partner when it shares them.
func jobGPUs(j agent.JobStatus) string {
	if j.State != "running" || len(j.GPUs) == 0 {
		return fmt.Sprint(j.ScaleFactor)
	}
	s := fmt.Sprintf("%d %s", len(j.GPUs), j.Type)
	if j.With != "" {
		s += " shared with " + j.With // space sharing: an MPS share of each GPU
	}
	return s
}

// whyOf is why the job waits (or was refused, or its notice).
func whyOf(j agent.JobStatus) string {
	switch {
	case j.Refused != "":
		return j.Refused
	case j.Pending != "":
		return j.Pending
	case j.State != "running" && j.State != "done":
		return j.Reason
	case j.CheckpointNow:
		return j.Reason
	}
	return ""
}

func jobProgress(j agent.JobStatus) string {
	s := fmt.Sprintf("%.0f/%.0f", j.TotalSteps-j.RemainingSteps, j.TotalSteps)
	if j.TotalSteps > 0 {
		s += fmt.Sprintf(" (%.0f%%)", 100*(j.TotalSteps-j.RemainingSteps)/j.TotalSteps)
	}
	return s
}

func newJobStatus() *view {
	v := newView("job status", "Show one job: state, why it waits, GPUs, progress, its history of rounds", "[options] JOB", 0, 1, 1)
	v.get = func(ctx context.Context, c *agentClient, _ *viewOptions, args []string) (any, *agent.Status, error) {
		s, err := c.status(ctx)
		if err != nil {
			return nil, nil, err
		}
		j, ok, err := c.job(ctx, s, args[0])
		if err != nil {
			return nil, s, err
		}
		if !ok {
			return nil, s, fmt.Errorf("job %q is unknown to the agent (not opted in, or finished before it started)", args[0])
		}
		return j, s, nil
	}
	v.text = func(w io.Writer, d any) { printJob(w, d.(agent.JobStatus)) }
	return v
}

// printJob prints one job in full, its history of rounds last.
func printJob(w io.Writer, j agent.JobStatus) {
	line := func(k, format string, a ...any) { fmt.Fprintf(w, "%-12s"+format+"\n", append([]any{k + ":"}, a...)...) }
	line("ID", "%s", j.ID)
	if j.User != "" {
		line("User", "%s", j.User)
	}
	if j.Namespace != "" {
		line("Namespace", "%s", j.Namespace)
	}
	line("VC", "%s", orDash(j.VC))
	line("State", "%s", jobState(j))
	if j.Refused != "" {
		line("Refused", "%s", j.Refused)
	}
	if j.Pending != "" {
		kind := ""
		if j.PendingKind != "" {
			kind = " (" + j.PendingKind + ")"
		}
		line("Pending", "%s%s", j.Pending, kind)
	}
	if j.QueuePosition > 0 {
		line("Queue", "%s in %s, priority %s", queue(j.QueuePosition), orDash(j.VC), num(j.Priority))
	}
	if j.WaitS > 0 {
		line("Waiting", "%s", seconds(j.WaitS))
	}
	line("Type", "%s", orDash(j.Type))
	line("GPUs", "%s", strings.TrimSpace(fmt.Sprintf("%d %s", j.ScaleFactor, strings.Join(j.GPUs, ","))))
	line("Rounds", "%d", j.Rounds)
	line("Progress", "%.0f/%.0f steps", j.TotalSteps-j.RemainingSteps, j.TotalSteps)
	line("Throughput", "%s steps/s", rate(j.Throughput))
	if len(j.Throughputs) > 0 {
		line("Per type", "%s", perType(j.Throughputs))
	}
	if j.ETA == nil {
		line("ETA", "-")
	} else {
		line("ETA", "%s (%s)", eta(j.ETA), etaIn(j.ETA))
	}
	if j.With != "" {
		fmt.Fprintf(w, "Shared with: %s (each on an MPS share of the GPUs)\n", j.With)
	}
	if j.MaxWorkers > 0 {
		line("Workers", "%d (elastic %d..%d)", j.Workers, j.MinWorkers, j.MaxWorkers)
		if j.MaxPS > 0 {
			line("PS", "%d (%d..%d)", j.PS, j.MinPS, j.MaxPS)
		}
	}
	if j.Intent != "" || j.Reason != "" {
		line("Last plan", "%s", strings.TrimPrefix(orDash(j.Intent)+": "+j.Reason, "-: "))
	}
	if j.CheckpointNow {
		line("Notice", "checkpoint now, it stops next round")
	}
	if len(j.History) == 0 {
		return
	}
	fmt.Fprintln(w, "\nHistory")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Round\tTime\tIntent\tType\tGPUs\tReason")
	for _, e := range j.History {
		gpus := "-"
		if e.GPUs > 0 {
			gpus = fmt.Sprint(e.GPUs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Round, e.Time.Local().Format(time.DateTime), e.Intent, orDash(e.Type), gpus, orDash(e.Reason))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// perType lists a job's throughput on each GPU type with its source:
// "a100-80gb 7.00 measured, h100-80gb 14.10 estimated".
func perType(m map[string]agent.TypeThroughput) string {
	parts := make([]string, 0, len(m))
	for _, t := range slices.Sorted(maps.Keys(m)) {
		v := m[t]
		parts = append(parts, fmt.Sprintf("%s %s %s", t, rate(v.Value), v.Source))
	}
	return strings.Join(parts, ", ")
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

// etaIn is how long until t: "in 3m20s", "now" once passed.
func etaIn(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := time.Until(*t)
	if d <= 0 {
		return "now"
	}
	return "in " + seconds(d.Seconds())
}

// seconds prints a span of seconds as 45s, 3m20s, 2h5m, 3d4h ("-" for none).
func seconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// queue is a queue position (#1: next), "-" for none.
func queue(pos int) string {
	if pos <= 0 {
		return "-"
	}
	return fmt.Sprintf("#%d", pos)
}

// num prints a priority or ratio with three significant digits ("-" for 0).
func num(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}

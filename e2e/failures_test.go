package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// failuresConfig: one engine, no cells, so that any GPU can take any job;
// the tasks block gives the jobs their checkpoint directory and the lease
// API (the job specs set neither).
const failuresConfig = `round_seconds = 4
tasks {
  checkpoint_root = %q
  lease_address   = %q
}
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// bareJobHCL is jobHCL without the checkpoint directory, the lease address
// and the workload identity: Rondo adds them at admission.
func (s *stack) bareJobHCL(id, model string, steps int) string {
	spec := s.jobHCL(id, model, steps, 1)
	var out []string
	skip := 0
	for _, line := range strings.Split(spec, "\n") {
		tl := strings.TrimSpace(line)
		switch {
		case skip > 0:
			if tl == "}" {
				skip--
			}
			continue
		case strings.HasPrefix(tl, "identity {"):
			skip = 1
			continue
		case strings.HasPrefix(tl, "RONDO_CHECKPOINT_DIR"), strings.HasPrefix(tl, "RONDO_LEASE_ADDR"):
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestFailuresOnNomad covers issue #5's "Nomad server restarts, node loss
// and GPU unhealthy events trigger a reset and a re-plan" (the unhealthy
// GPU is TestAllocatorOnNomad/UnhealthyGPUVacated) on two clients of two
// V100s each, three never-finishing jobs, 4 s rounds:
//
//   - Node loss: the client holding a job is killed with its tasks (a
//     machine gone). Once Nomad marks it down, the next round recomputes
//     the allocation over the two GPUs left, every job that ran there runs
//     again on the other client from its checkpoint, and no job ever has
//     two live allocations; /v1/status counts only the surviving GPUs.
//   - Server restart: the Nomad server is stopped and started again (same
//     data directory). The agent's rounds fail while it is down (logged,
//     not fatal), the agent keeps or re-takes its leader lock, rounds
//     carry on numbered from the durable state and the first of them
//     recomputes the allocation; jobs that ran through the restart keep
//     their allocations (no restart), and no received time goes backwards.
func TestFailuresOnNomad(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	s := startStackOpts(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("v100-b", "v100", 2)},
		"", func(o *cluster.Options) {
			// A lost client is marked down ~5-8 s after its last heartbeat
			// (defaults: 10 s TTL + 10 s grace). The failover TTL keeps
			// the clients up across the server restart.
			o.ServerHCL = `  min_heartbeat_ttl = "3s"
  heartbeat_grace = "5s"
  failover_heartbeat_ttl = "60s"`
		})
	if err := os.WriteFile(s.cfgPath, []byte(fmt.Sprintf(failuresConfig, s.ckpt, "http://"+s.leaseAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := s.c.API
	ids := []string{"f0", "f1", "f2"}
	for _, id := range ids {
		spec := s.bareJobHCL(id, "ResNet-18 (batch size 64)", 1000000000)
		if strings.Contains(spec, "RONDO_CHECKPOINT_DIR") || strings.Contains(spec, "RONDO_LEASE_ADDR") || strings.Contains(spec, "identity") {
			t.Fatalf("bare job spec still sets Rondo's env:\n%s", spec)
		}
		s.submitSpec(id, spec)
	}
	a := s.startAgent("4s")
	// Three jobs, four GPUs: every job runs.
	s.waitFor(90*time.Second, "all three jobs running", func() (bool, error) {
		for _, id := range ids {
			l := liveAllocs(c, id)
			if len(l) != 1 || l[0].ClientStatus != "running" {
				return false, nil
			}
		}
		return true, nil
	})
	// Rondo gave the tasks their checkpoint directory, lease address and
	// identity: the trainers report through the lease API (saved in the
	// state) and checkpoint under the configured root.
	store := state.NewStore(c, state.Options{})
	s.waitFor(30*time.Second, "every job reporting progress through the lease API", func() (bool, error) {
		st, err := store.Load(context.Background())
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			if st.Progress[id] <= 0 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, id := range ids {
		job, _, err := c.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		task := job.TaskGroups[0].Tasks[0]
		if got, want := task.Env[rnomad.CheckpointEnv], filepath.Join(s.ckpt, "${NOMAD_JOB_ID}"); got != want {
			t.Errorf("job %s: %s = %q, want %q", id, rnomad.CheckpointEnv, got, want)
		}
		if got := task.Env[rnomad.LeaseAddrEnv]; got != "http://"+s.leaseAddr {
			t.Errorf("job %s: %s = %q", id, rnomad.LeaseAddrEnv, got)
		}
	}
	nodeName := nodeNames(t, c)
	// Lose the client of f0 (so at least one job must move).
	lost := nodeName[liveAllocs(c, "f0")[0].NodeID]
	var moved []string
	kept := map[string]string{} // job -> allocation on the surviving client
	for _, id := range ids {
		al := liveAllocs(c, id)[0]
		if nodeName[al.NodeID] == lost {
			moved = append(moved, id)
		} else {
			kept[id] = al.ID
		}
	}
	// The trainer checkpoints every 0.5 s: what the lost jobs had done at
	// the kill is in their checkpoints, which a restart from scratch would
	// overwrite with less.
	before := map[string]float64{}
	for _, id := range moved {
		before[id] = s.checkpointSteps(id)
	}
	roundAtKill := s.status(a).Round
	t.Logf("killing client %s (jobs %v there, kept %v), round %d", lost, moved, kept, roundAtKill)
	killed := time.Now()
	if err := s.c.KillClient(lost); err != nil {
		t.Fatal(err)
	}
	s.waitNodeDown(lost)
	downAt := time.Now()
	t.Logf("node %s down %.1fs after the kill", lost, downAt.Sub(killed).Seconds())
	// Every job runs again within a few rounds: two on the surviving GPUs
	// at a time (three jobs, two GPUs: they rotate, so wait until each job
	// has been seen running on the survivor since the node went down).
	ranAgain := map[string]bool{}
	s.waitFor(90*time.Second, "every job running on the surviving client", func() (bool, error) {
		for _, id := range ids {
			l := liveAllocs(c, id)
			if len(l) > 1 {
				return false, fmt.Errorf("job %s has %d live allocations", id, len(l))
			}
			if len(l) == 1 && l[0].ClientStatus == "running" && nodeName[l[0].NodeID] != lost {
				ranAgain[id] = true
			}
		}
		return len(ranAgain) == len(ids), nil
	})
	t.Logf("every job ran on the survivor %.1fs after the node went down", time.Since(downAt).Seconds())
	for _, id := range moved {
		if got := s.checkpointSteps(id); got < before[id] {
			t.Errorf("job %s resumed below its checkpoint: %.0f < %.0f steps", id, got, before[id])
		}
	}
	st := s.status(a)
	if u := st.Types["v100"]; u.Total != 2 {
		t.Errorf("status counts %d V100s after the node loss, want 2 (the survivor's)", u.Total)
	}
	for _, j := range st.Jobs {
		for _, g := range j.GPUs {
			if strings.Contains(g, lost) {
				t.Errorf("job %s placed on the lost client's GPU %s", j.ID, g)
			}
		}
	}
	if !recomputedAfter(a.logs(), roundAtKill) {
		t.Errorf("no round after %d recomputed the allocation", roundAtKill)
	}

	// Server restart, between rounds: a round still waiting for its
	// starts and stops when the server goes away waits the outage out (or
	// times out waiting) instead of failing to observe Nomad. Three jobs
	// on two GPUs rotate every round, so wait until a round's enforcement
	// is over: the state is saved once more after the round's record.
	settled := s.status(a).Round
	s.waitFor(30*time.Second, "a round enforced after the recompute", func() (bool, error) {
		st := s.status(a)
		return st.Round > settled && st.StateSavedAt.After(st.LastRound), nil
	})
	// Jobs running now should run through the restart untouched.
	pre := s.status(a)
	running := map[string]string{}
	for _, id := range ids {
		if l := liveAllocs(c, id); len(l) == 1 && l[0].ClientStatus == "running" {
			running[id] = l[0].ID
		}
	}
	t.Logf("restarting the Nomad server at round %d; running %v", pre.Round, running)
	s.c.Server.Stop(30 * time.Second)
	// A round or two fails while the server is away.
	time.Sleep(9 * time.Second)
	if err := s.c.RestartServer(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var post = pre
	s.waitFor(120*time.Second, "two rounds after the server restart", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("the agent exited:\n%s", tail(a.logs(), 3000))
		default:
		}
		post = s.status(a)
		return post.LastRound.After(restarted) && post.Round >= pre.Round+2 && post.LastError == "", nil
	})
	t.Logf("rounds resumed: round %d %.1fs after the restart", post.Round, post.LastRound.Sub(restarted).Seconds())
	logs := a.logs()
	if !strings.Contains(logs, "round failed") {
		t.Errorf("no round failed while the server was down (was it down during a round?)")
	}
	// Nomad seen again after failed rounds: the allocation is recomputed.
	if !recomputedAfter(logs, pre.Round) {
		t.Errorf("no round after the restart (round %d on) recomputed the allocation", pre.Round+1)
	}
	// Jobs kept through the restart are the same allocations, unless the
	// policy moved them after it (then the agent logged it).
	for id, alloc := range running {
		l := liveAllocs(c, id)
		if len(l) > 1 {
			t.Errorf("job %s has %d live allocations after the restart", id, len(l))
		}
		if len(l) == 1 && l[0].ID != alloc && !eventAfter(logs, id, restarted) {
			t.Errorf("job %s restarted across the server restart without a decision: %s -> %s", id, alloc, l[0].ID)
		}
	}
	preJobs := map[string]map[string]float64{}
	for _, j := range pre.Jobs {
		preJobs[j.ID] = j.ReceivedS
	}
	for _, j := range post.Jobs {
		for typ, v := range preJobs[j.ID] {
			if j.ReceivedS[typ] < v-1e-6 {
				t.Errorf("job %s received time on %s went backwards across the restart: %.1f -> %.1f", j.ID, typ, v, j.ReceivedS[typ])
			}
		}
	}
	for _, id := range ids {
		noOverlapLost(t, c, id, killed)
	}
	if testing.Verbose() {
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "round") || strings.Contains(line, "leader") || strings.Contains(line, ": job=") || os.Getenv("RONDO_E2E_FULL_LOG") != "" {
				t.Log(line)
			}
		}
	}
}

// nodeNames maps the cluster's node ids to their names.
func nodeNames(t *testing.T, c *api.Client) map[string]string {
	t.Helper()
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, n := range nodes {
		names[n.ID] = n.Name
	}
	return names
}

// waitNodeDown waits (a minute at most) until Nomad marks the client down.
func (s *stack) waitNodeDown(name string) {
	s.t.Helper()
	s.waitFor(60*time.Second, "Nomad to mark "+name+" down", func() (bool, error) {
		nodes, _, err := s.c.API.Nodes().List(nil)
		if err != nil {
			return false, nil // the server restarting
		}
		for _, n := range nodes {
			if n.Name == name {
				return n.Status == "down", nil
			}
		}
		return false, fmt.Errorf("node %s not listed", name)
	})
}

var roundLine = regexp.MustCompile(`round: round=(\d+) .*recomputed=true`)

// recomputedAfter reports whether a round numbered above n recomputed.
func recomputedAfter(logs string, n int) bool {
	for _, m := range roundLine.FindAllStringSubmatch(logs, -1) {
		if r, _ := strconv.Atoi(m[1]); r > n {
			return true
		}
	}
	return false
}

// eventAfter reports whether the agent logged an enforcement event for job
// after t (log lines start with an RFC 3339 timestamp).
func eventAfter(logs, job string, t time.Time) bool {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "job="+job) {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", f[0])
		if err != nil || ts.Before(t) {
			continue
		}
		for _, ev := range []string{"suspend:", "resume:", "migrate:", "preempt:", "admit:"} {
			if strings.Contains(line, ev) {
				return true
			}
		}
	}
	return false
}

// noOverlapLost is noOverlap for a job that may have had an allocation on
// a client killed at lostAt (zero: none was): Nomad never learns when such
// a task ended, so its span ends at lostAt. It returns how many ran.
func noOverlapLost(t *testing.T, c *api.Client, id string, lostAt time.Time) int {
	t.Helper()
	return noOverlapWith(t, c, id, func(a *api.AllocationListStub, ts *api.TaskState) time.Time {
		if !lostAt.IsZero() && (a.ClientStatus == "lost" || (ts.FinishedAt.IsZero() && ts.StartedAt.Before(lostAt) && a.ClientStatus != "running")) {
			return lostAt
		}
		return time.Time{}
	})
}

// noOverlapWith checks that no two task runs of a job overlap in time, a
// run ending at its finish, else at lostAt's answer (when it died with its
// client: zero if it did not), else now. It returns how many ran.
func noOverlapWith(t *testing.T, c *api.Client, id string, lostAt func(*api.AllocationListStub, *api.TaskState) time.Time) int {
	t.Helper()
	allocs, _, err := c.Jobs().Allocations(id, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		start, end time.Time
		alloc      string
	}
	var spans []span
	for _, a := range allocs {
		ts := a.TaskStates["train"]
		if ts == nil || ts.StartedAt.IsZero() {
			continue
		}
		end := ts.FinishedAt
		if lost := lostAt(a, ts); !lost.IsZero() && (end.IsZero() || lost.Before(end)) {
			end = lost
		}
		if end.IsZero() {
			end = time.Now()
		}
		spans = append(spans, span{ts.StartedAt, end, a.ID})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			t.Errorf("job %s ran twice at once: %s %v-%v and %s %v-%v", id, spans[i-1].alloc, spans[i-1].start, spans[i-1].end,
				spans[i].alloc, spans[i].start, spans[i].end)
		}
	}
	return len(spans)
}

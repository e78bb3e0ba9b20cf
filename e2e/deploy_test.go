package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// docStep is one shell block of docs/operations.md: its e2e name (from
// its first line, "# e2e: NAME") and text.
type docStep struct{ name, text string }

// operationsSteps reads docs/operations.md's ```sh blocks. Every block
// must name its step or say why the test does not run it, so that a
// command added to the guide is run or explained.
func operationsSteps(t *testing.T, root string) []docStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []docStep
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(string(b), -1) {
		first, _, _ := strings.Cut(m[1], "\n")
		name, ok := strings.CutPrefix(first, "# e2e: ")
		switch {
		case !ok:
			t.Fatalf("docs/operations.md: a sh block without '# e2e: NAME' or '# e2e: not run: REASON':\n%s", m[1])
		case strings.HasPrefix(name, "not run: "):
			continue
		}
		steps = append(steps, docStep{name, m[1]})
	}
	return steps
}

// TestAgentAsNomadJob: the operations guide on a cluster with ACLs (a GPU
// client, two plain clients for the agents): every command of
// docs/operations.md runs, in order; the agent runs as
// jobs/deploy/rondo-agent.nomad.hcl (two raw_exec instances on distinct nodes,
// the token a workload identity with the allocator policy, the config from
// a Nomad Variable); an opted-in 1-GPU job is admitted by it; the leader's
// process is killed (the guide's failover drill) and the standby takes
// over: it reports leader=true, its rounds advance, the job keeps running
// and never has two allocations at once. The guide's upgrade (a new
// rondo_binary, the job run again) and its revert to version 0 roll out
// for real: after each, the job's newest version runs as two healthy
// instances, one leads, rounds advance and the job keeps its one
// allocation and its reports.
func TestAgentAsNomadJob(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	root := moduleRoot(t)
	nomad := NomadBinary(t)
	steps := operationsSteps(t, root)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	plugins := filepath.Join(tmp, "plugins")
	for dir, pkg := range map[string]string{plugins: "./cmd/nomad-device-rondo", bin: "./cmd/rondo", bin + "/t": "./cmd/rondo-trainer"} {
		BuildPlugin(t, pkg, dir)
	}
	os.Rename(bin+"/t/rondo-trainer", bin+"/rondo-trainer")
	if err := os.Symlink(nomad, filepath.Join(bin, "nomad")); err != nil {
		t.Fatal(err)
	}
	// A short root: the Task API socket's path (<data dir>/alloc/<uuid>/
	// agent/secrets/api.sock) must fit a unix socket's 108 bytes.
	dir, err := os.MkdirTemp("", "rd-")
	if err != nil {
		t.Fatal(err)
	}
	gpu := cluster.UniformClient("gpu-a", "v100", 2)
	c, err := cluster.Start(cluster.Options{Dir: dir, Nomad: nomad, PluginDir: plugins, ACL: true, LogLevel: "INFO",
		Clients: []cluster.ClientSpec{gpu, {Name: "ctl-a", NodePool: "default"}, {Name: "ctl-b", NodePool: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.Logs(3000))
		}
		os.RemoveAll(dir)
	})
	t.Logf("cluster up after %.1fs", time.Since(start).Seconds())
	t.Cleanup(func() {
		if t.Failed() {
			agentLogs(t, c)
		}
	})

	// The guide's working directory: the files it tells the operator to
	// write, and the repository's jobs/.
	work := filepath.Join(tmp, "work")
	ckpt := filepath.Join(tmp, "ckpt")
	files := map[string]string{
		"cluster.hcl": fmt.Sprintf(`agent {
  round = "3s"
}

vc "research" {
  policy = "max_min_fairness_perf"
}

tasks {
  checkpoint_root = %q
}
`, ckpt),
		"rondo-agent.vars.hcl": fmt.Sprintf("rondo_binary = %q\nleader_ttl = \"10s\"\n", filepath.Join(bin, "rondo")),
		"team-train.vars.hcl":  fmt.Sprintf("command = %q\nvc = \"research\"\n", filepath.Join(bin, "rondo-trainer")),
	}
	os.MkdirAll(work, 0o755)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "jobs"), filepath.Join(work, "jobs")); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(tmp, "env.sh")
	ran := map[string]bool{}
	env := append(cluster.WithoutEnv(cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "NOMAD_ADDR"), "NOMAD_TOKEN"), "RONDO_ADDR"),
		"NOMAD_ADDR="+c.Address, "NOMAD_TOKEN="+c.ManagementToken, "PATH="+bin+":"+os.Getenv("PATH"))
	// run runs one step with bash, its exports kept for the next steps.
	run := func(name string) string {
		t.Helper()
		i := slices.IndexFunc(steps, func(s docStep) bool { return s.name == name })
		if i < 0 {
			t.Fatalf("docs/operations.md has no step %q", name)
		}
		s := steps[i]
		script := fmt.Sprintf("set -euo pipefail\n[ -f %[1]q ] && . %[1]q\n%s\nexport -p > %[1]q\n", envFile, s.text)
		// An upgrade or revert follows its deployment (healthy_deadline 3m).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.WaitDelay = time.Second
		cmd.Dir, cmd.Env = work, env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("step %s: %v\n%s\n%s", name, err, s.text, out)
		}
		t.Logf("step %s (%.1fs):\n%s", name, time.Since(t0).Seconds(), tail(string(out), 1500))
		ran[name] = true
		return string(out)
	}
	runAll := func(names ...string) {
		for _, n := range names {
			run(n)
		}
	}

	runAll("nodes", "policy", "config", "run-agent")
	// Two instances on distinct clients of pool default.
	allocs := agentAllocs(t, c.API)
	if len(allocs) != 2 || allocs[0].NodeID == allocs[1].NodeID {
		t.Fatalf("agent allocations: %d on nodes %v", len(allocs), allocNodes(allocs))
	}
	leaderAlloc, leaderAddr := waitLeader(t, c, "", 60*time.Second)
	t.Logf("leader %s at %s after %.1fs", leaderAlloc[:8], leaderAddr, time.Since(start).Seconds())
	out := run("find-agent")
	if !strings.Contains(out, "Leader: ") {
		t.Errorf("rondo status printed no leader line:\n%s", out)
	}

	runAll("submit")
	waitFor(t, 60*time.Second, "team-train admitted and running", func() (bool, error) {
		return len(runningAllocs(c.API, "team-train")) == 1 && agentStatus(t, c, leaderAddr).state("team-train") == "running", nil
	})
	job, _, err := c.API.Jobs().Info("team-train", nil)
	if err != nil || job.NodePool == nil || *job.NodePool != "rondo" {
		t.Fatalf("team-train not admitted into pool rondo: %v %v", err, job.NodePool)
	}
	out = run("watch")
	if !regexp.MustCompile(`(?m)^team-train\s.*running`).MatchString(out) {
		t.Errorf("rondo job list does not show team-train running:\n%s", out)
	}
	// The trainer's reports reach the leader's lease API (found through
	// the rondo-lease service; the agent verifies the task's identity with
	// Nomad's keys fetched through the Task API socket): only lease
	// reports write the durable state's progress.
	t.Cleanup(func() {
		if t.Failed() { // the trainer's side of the lease calls
			for _, stream := range []string{"-stderr", "-stdout"} {
				cmd := exec.Command(nomad, "alloc", "logs", stream, "-job", "team-train")
				cmd.Env = env
				out, _ := cmd.CombinedOutput()
				t.Logf("team-train %s:\n%s", stream, tail(string(out), 3000))
			}
		}
	})
	store := state.NewStore(c.API, state.Options{})
	progress := func() float64 {
		st, err := store.Load(context.Background())
		if err != nil {
			return 0
		}
		return st.Progress["team-train"]
	}
	waitFor(t, 60*time.Second, "team-train's progress reported through the lease API", func() (bool, error) {
		return progress() > 0, nil
	})
	if out := run("dry-run"); !strings.Contains(out, "plan not enforced") {
		t.Errorf("the dry run logged no plan:\n%s", out)
	}
	runAll("who-leads")

	// The standby serves its status and names the leader.
	for _, r := range mustServices(t, c.API, "rondo") {
		if r.AllocID != leaderAlloc {
			if st := agentStatus(t, c, fmt.Sprintf("%s:%d", r.Address, r.Port)); st.Leader || st.LeaderAddr != "http://"+leaderAddr {
				t.Errorf("standby %s: leader=%v leader_addr=%q, want false and http://%s", r.AllocID[:8], st.Leader, st.LeaderAddr, leaderAddr)
			}
		}
	}
	// The failover drill: SIGKILL to the leader's agent.
	before := agentStatus(t, c, leaderAddr)
	killed := time.Now()
	runAll("failover")
	newAlloc, newAddr := waitLeader(t, c, leaderAlloc, 60*time.Second)
	t.Logf("standby %s took over after %.1fs", newAlloc[:8], time.Since(killed).Seconds())
	var after agentStatusResp
	waitFor(t, 20*time.Second, "rounds on the new leader", func() (bool, error) {
		after = agentStatus(t, c, newAddr)
		return after.Round > before.Round, nil
	})
	if n := noOverlap(t, c.API, "team-train"); n != 1 || len(runningAllocs(c.API, "team-train")) != 1 {
		t.Errorf("team-train: %d allocations ran, %d running; want the one kept running", n, len(runningAllocs(c.API, "team-train")))
	}
	t.Logf("round %d before the kill, %d on the new leader", before.Round, after.Round)
	// Reports carry on to the new leader (directly, or forwarded by
	// whichever instance the task's template picked).
	reported := progress()
	waitFor(t, 60*time.Second, "team-train's reports reaching the new leader", func() (bool, error) {
		return progress() > reported, nil
	})

	// The upgrade (section 7): the new binary under a new name, the vars
	// file pointing at it, the job run again: a rolling update to version 1.
	next := filepath.Join(bin, "rondo-next")
	if err := os.Link(filepath.Join(bin, "rondo"), next); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "rondo-agent.vars.hcl"),
		[]byte(fmt.Sprintf("rondo_binary = %q\nleader_ttl = \"10s\"\n", next)), 0o644); err != nil {
		t.Fatal(err)
	}
	round := agentStatus(t, c, newAddr).Round
	reported = progress()
	t0 := time.Now()
	runAll("upgrade")
	t.Logf("upgrade rolled out in %.1fs", time.Since(t0).Seconds())
	_, round = checkRollout(t, c, 1, next, round)
	waitFor(t, 60*time.Second, "team-train's reports after the upgrade", func() (bool, error) {
		return progress() > reported, nil
	})
	if out := run("history"); !regexp.MustCompile(`(?m)^Version\s+= 1$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Version\s+= 0$`).MatchString(out) {
		t.Errorf("nomad job history does not list versions 0 and 1:\n%s", out)
	}
	if vs, _, _, err := c.API.Jobs().Versions("rondo-agent", false, nil); err != nil || len(vs) != 2 {
		t.Errorf("job versions after the upgrade: %d (%v), want 2", len(vs), err)
	}
	// The revert to version 0: version 2, with version 0's spec.
	reported = progress()
	t0 = time.Now()
	runAll("revert")
	t.Logf("revert rolled out in %.1fs", time.Since(t0).Seconds())
	checkRollout(t, c, 2, filepath.Join(bin, "rondo"), round)
	vs, _, _, err := c.API.Jobs().Versions("rondo-agent", false, nil)
	if err != nil || len(vs) != 3 {
		t.Fatalf("job versions after the revert: %d (%v), want 3", len(vs), err)
	}
	spec := func(j *api.Job) string { b, _ := json.Marshal(j.TaskGroups); return string(b) }
	byVersion := map[uint64]*api.Job{}
	for _, j := range vs {
		byVersion[*j.Version] = j
	}
	if spec(byVersion[2]) != spec(byVersion[0]) || spec(byVersion[1]) == spec(byVersion[0]) {
		t.Errorf("version 2's task groups are not version 0's (or version 1 equals version 0):\nv0 %s\nv2 %s",
			spec(byVersion[0]), spec(byVersion[2]))
	}
	waitFor(t, 60*time.Second, "team-train's reports after the revert", func() (bool, error) {
		return progress() > reported, nil
	})

	runAll("backup")
	var saved api.Variable
	if b, err := os.ReadFile(filepath.Join(work, "rondo-backup/rondo_allocator.json")); err != nil || json.Unmarshal(b, &saved) != nil {
		t.Fatalf("backup of rondo/allocator: %v", err)
	}
	// The leader saves more rounds before the restore stops it: the
	// restore puts the backup's round back.
	time.Sleep(4 * time.Second)
	runAll("restore")
	v, _, err := c.API.Variables().Read("rondo/allocator", nil)
	if err != nil || v.Items["state"] != saved.Items["state"] || v.ModifyIndex <= saved.ModifyIndex {
		t.Errorf("restored state: %v: round %s (index %d), backup round %s (index %d)", err, v.Items["round"], v.ModifyIndex,
			saved.Items["round"], saved.ModifyIndex)
	}
	runAll("remove")
	if vars, _, _ := c.API.Variables().PrefixList("rondo/", nil); len(vars) != 0 {
		t.Errorf("variables left after removal: %d", len(vars))
	}
	for _, s := range steps {
		if !ran[s.name] {
			t.Errorf("docs/operations.md step %q is not run", s.name)
		}
	}
	t.Logf("total %.1fs", time.Since(start).Seconds())
}

// checkRollout checks a finished rolling update of rondo-agent to version:
// the job at that version, its latest deployment successful with two
// healthy allocations, two running instances of that version on distinct
// nodes running command, one leader whose rounds pass round, and
// team-train's one allocation kept. It returns the leader's address and
// its round.
func checkRollout(t *testing.T, c *cluster.Cluster, version uint64, command string, round int) (string, int) {
	t.Helper()
	job, _, err := c.API.Jobs().Info("rondo-agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Version != version {
		t.Fatalf("rondo-agent at version %d, want %d", *job.Version, version)
	}
	if cmd := job.TaskGroups[0].Tasks[0].Config["command"]; cmd != command {
		t.Errorf("rondo-agent version %d runs %v, want %s", version, cmd, command)
	}
	d, _, err := c.API.Jobs().LatestDeployment("rondo-agent", nil)
	if err != nil || d == nil || d.JobVersion != version || d.Status != api.DeploymentStatusSuccessful ||
		d.TaskGroups["agent"] == nil || d.TaskGroups["agent"].HealthyAllocs != 2 {
		t.Fatalf("rondo-agent's deployment of version %d: %v %+v", version, err, d)
	}
	allocs := agentAllocs(t, c.API)
	for _, a := range allocs {
		if a.JobVersion != version || a.DeploymentStatus == nil || a.DeploymentStatus.Healthy == nil || !*a.DeploymentStatus.Healthy {
			t.Errorf("agent allocation %s: version %d, deployment status %+v; want version %d, healthy", a.ID[:8], a.JobVersion, a.DeploymentStatus, version)
		}
	}
	if allocs[0].NodeID == allocs[1].NodeID {
		t.Errorf("agent allocations of version %d on one node: %v", version, allocNodes(allocs))
	}
	alloc, addr := waitLeader(t, c, "", 60*time.Second)
	var st agentStatusResp
	waitFor(t, 20*time.Second, fmt.Sprintf("rounds past %d on the leader of version %d", round, version), func() (bool, error) {
		st = agentStatus(t, c, addr)
		return st.Round > round, nil
	})
	t.Logf("version %d: leader %s at round %d (was %d)", version, alloc[:8], st.Round, round)
	if n := noOverlap(t, c.API, "team-train"); n != 1 || len(runningAllocs(c.API, "team-train")) != 1 {
		t.Errorf("team-train after version %d: %d allocations ran, %d running; want the one kept running", version, n, len(runningAllocs(c.API, "team-train")))
	}
	return addr, st.Round
}

func waitFor(t *testing.T, d time.Duration, what string, f func() (bool, error)) {
	t.Helper()
	if err := cluster.WaitFor(d, what, f); err != nil {
		t.Fatal(err)
	}
}

func agentAllocs(t *testing.T, c *api.Client) []*api.AllocationListStub {
	t.Helper()
	var out []*api.AllocationListStub
	waitFor(t, 30*time.Second, "two running agent allocations", func() (bool, error) {
		out = runningAllocs(c, "rondo-agent")
		return len(out) == 2, nil
	})
	return out
}

func runningAllocs(c *api.Client, job string) []*api.AllocationListStub {
	allocs, _, _ := c.Jobs().Allocations(job, false, nil)
	var out []*api.AllocationListStub
	for _, a := range allocs {
		if a.ClientStatus == "running" {
			out = append(out, a)
		}
	}
	return out
}

func allocNodes(as []*api.AllocationListStub) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.NodeName)
	}
	return out
}

type agentStatusResp struct {
	Leader     bool   `json:"leader"`
	LeaderAddr string `json:"leader_addr"`
	Round      int    `json:"round"`
	Jobs       []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"jobs"`
}

func (s agentStatusResp) state(job string) string {
	for _, j := range s.Jobs {
		if j.ID == job {
			return j.State
		}
	}
	return ""
}

func mustServices(t *testing.T, c *api.Client, name string) []*api.ServiceRegistration {
	t.Helper()
	regs, _, err := c.Services().Get(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return regs
}

func agentStatus(t *testing.T, c *cluster.Cluster, addr string) agentStatusResp {
	t.Helper()
	var st agentStatusResp
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
	req.Header.Set("X-Nomad-Token", c.ManagementToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitLeader waits until one agent instance other than the allocation
// not passes /v1/health?leader (the leader-only check); it returns its
// allocation and status address.
func waitLeader(t *testing.T, c *cluster.Cluster, not string, d time.Duration) (alloc, addr string) {
	t.Helper()
	waitFor(t, d, "one leading agent instance", func() (bool, error) {
		regs, _, err := c.API.Services().Get("rondo", nil)
		if err != nil {
			return false, nil
		}
		leaders := 0
		for _, r := range regs {
			a := fmt.Sprintf("%s:%d", r.Address, r.Port)
			resp, err := http.Get("http://" + a + "/v1/health?leader")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == 200 && r.AllocID != not {
				leaders++
				alloc, addr = r.AllocID, a
			}
		}
		// A killed instance does not answer until Nomad restarts it.
		return leaders == 1, nil
	})
	return alloc, addr
}

// agentLogs logs the agent tasks' stderr (a failed run).
func agentLogs(t *testing.T, c *cluster.Cluster) {
	allocs, _, _ := c.API.Jobs().Allocations("rondo-agent", true, nil)
	for _, a := range allocs {
		matches, _ := filepath.Glob(filepath.Join(c.Dir, "*", "data", "alloc", a.ID, "alloc", "logs", "agent.stderr.*"))
		for _, m := range matches {
			log, _ := os.ReadFile(m)
			t.Logf("agent %s (%s) %s:\n%s", a.ID[:8], a.ClientStatus, m, tail(string(log), 4000))
		}
	}
}

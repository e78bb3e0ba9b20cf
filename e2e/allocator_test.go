package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// stack is a local cluster (2 V100 + 2 K80 clients' worth of fake GPUs)
// with the rondo and rondo-trainer binaries built.
type stack struct {
	t       *testing.T
	c       *cluster.Cluster
	bin     string // holds rondo, rondo-trainer
	nomad   string
	ckpt    string
	cfgPath string
	// token is the agent's: a client token with only the policy in
	// jobs/acl/rondo-allocator.policy.hcl (the cluster runs with ACLs).
	token string
	// leaseAddr is the agent's lease API, the same for every agent started
	// (jobs name it in RONDO_LEASE_ADDR).
	leaseAddr string
}

// startStack: the cells cluster most subtests share, 2 V100 + 2 K80.
func startStack(t *testing.T) *stack {
	cfg := `agent {
  round = "4s"
}
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 2
  node  = true
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 2
  node  = true
}
cell "v100-node" "a" {
  nomad_node = "v100-a"
}
cell "k80-node" "b" {
  nomad_node = "k80-a"
}
vc "research" {
  quota  = { "v100-node" = 1, "k80-node" = 1 }
  policy = "max_min_fairness_perf"
}
`
	return startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("k80-a", "k80", 2)}, cfg)
}

// startStackWith starts a Nomad cluster (ACLs on) with the given clients,
// builds the binaries, gives the agent a token of the minimal allocator
// policy and writes its config cfg.
func startStackWith(t *testing.T, clients []cluster.ClientSpec, cfg string) *stack {
	return startStackOpts(t, clients, cfg, nil)
}

// startStackOpts is startStackWith with a hook that adjusts the cluster's
// options before it starts.
func startStackOpts(t *testing.T, clients []cluster.ClientSpec, cfg string, opts func(*cluster.Options)) *stack {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	nomad := NomadBinary(t)
	root := moduleRoot(t)
	tmp := t.TempDir()
	s := &stack{t: t, bin: filepath.Join(tmp, "bin"), nomad: nomad, ckpt: filepath.Join(tmp, "ckpt")}
	plugins := filepath.Join(tmp, "plugins")
	for dir, pkg := range map[string]string{plugins: "./cmd/nomad-device-rondo", s.bin + "/r": "./cmd/rondo", s.bin + "/t": "./cmd/rondo-trainer"} {
		BuildPlugin(t, pkg, dir)
	}
	os.Rename(s.bin+"/r/rondo", s.bin+"/rondo")
	os.Rename(s.bin+"/t/rondo-trainer", s.bin+"/rondo-trainer")
	dir, err := os.MkdirTemp("", "rondo-e2e-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	o := cluster.Options{Dir: dir, Nomad: nomad, PluginDir: plugins, LogLevel: "INFO", ACL: true, Clients: clients}
	if opts != nil {
		opts(&o)
	}
	c, err := cluster.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	s.c = c
	rules, err := os.ReadFile(filepath.Join(root, "jobs/acl/rondo-allocator.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.API.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rondo-allocator", Rules: string(rules)}, nil); err != nil {
		t.Fatalf("apply policy: %v", err)
	}
	tok, _, err := c.API.ACLTokens().Create(&api.ACLToken{Name: "rondo-allocator", Type: "client", Policies: []string{"rondo-allocator"}}, nil)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	s.token = tok.SecretID
	lp, err := cluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s.leaseAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lp[0]))
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.Logs(3000))
		}
		os.RemoveAll(dir)
	})
	s.cfgPath = filepath.Join(tmp, "cluster.hcl")
	if err := os.WriteFile(s.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// reset removes every job and fault between scenarios.
func (s *stack) reset() {
	cluster.PurgeJobs(s.c.API, 30*time.Second)
	s.c.API.System().GarbageCollect()
	for _, cs := range []string{"v100-a", "k80-a"} {
		ents, _ := os.ReadDir(s.c.FaultDir(cs))
		for _, e := range ents {
			os.Remove(filepath.Join(s.c.FaultDir(cs), e.Name()))
		}
	}
}

type agentProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	addr string
}

// startAgent starts `rondo agent` with the stack's config, round length
// round and any extra flags.
func (s *stack) startAgent(round string, extra ...string) *agentProc {
	s.t.Helper()
	return s.runAgent(append([]string{"-round", round, "-lease-addr", s.leaseAddr}, extra...)...)
}

// runAgent starts `rondo agent` with the stack's config and token on a free
// status port, with args after the common flags (the Nomad address, a 15 s
// ack timeout, debug logs, a 10 s leader lock); it is stopped at cleanup.
func (s *stack) runAgent(args ...string) *agentProc {
	s.t.Helper()
	return s.runAgentEnv(nil, args...)
}

// runAgentEnv is runAgent with extra environment variables (KEY=VALUE).
func (s *stack) runAgentEnv(env []string, args ...string) *agentProc {
	s.t.Helper()
	ports, err := cluster.FreePorts(1)
	if err != nil {
		s.t.Fatal(err)
	}
	a := &agentProc{log: filepath.Join(s.t.TempDir(), "agent.log"), done: make(chan struct{}),
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	f, err := os.Create(a.log)
	if err != nil {
		s.t.Fatal(err)
	}
	a.cmd = exec.Command(filepath.Join(s.bin, "rondo"), append([]string{"agent", "-config", s.cfgPath,
		"-address", s.c.Address, "-bind-addr", a.addr, "-ack-timeout", "15s", "-log-level", "debug", "-leader-ttl", "10s"}, args...)...)
	a.cmd.Env = append(append(cluster.WithoutEnv(os.Environ(), "NOMAD_TOKEN"), "NOMAD_TOKEN="+s.token), env...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { a.cmd.Wait(); f.Close(); close(a.done) }()
	s.t.Cleanup(func() {
		a.stop()
		if s.t.Failed() {
			s.t.Logf("agent %s log:\n%s", a.addr, tail(a.logs(), 6000))
		}
	})
	return a
}

// get fetches a path from the agent's HTTP API.
func (s *stack) get(a *agentProc, path string) string {
	s.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+a.addr+path, nil)
	req.Header.Set("X-Nomad-Token", s.token) // the status API checks tokens against Nomad's ACLs
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		s.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

func (s *stack) status(a *agentProc) agent.Status {
	s.t.Helper()
	var st agent.Status
	for i := 0; ; i++ {
		req, _ := http.NewRequest("GET", "http://"+a.addr+"/v1/status", nil)
		req.Header.Set("X-Nomad-Token", s.token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s.t.Fatalf("status: %s: %s", resp.Status, b)
		}
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil {
				return st
			}
		}
		if i == 40 {
			s.t.Fatalf("status: %v", err)
		}
		time.Sleep(250 * time.Millisecond) // starting
	}
}

func (a *agentProc) logs() string { b, _ := os.ReadFile(a.log); return string(b) }

func (a *agentProc) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	a.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
	}
}

func (a *agentProc) kill9() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

func (s *stack) jobHCL(id, model string, steps int, speedup float64) string {
	return fmt.Sprintf(`job %q {
  type = "batch"
  meta = {
    "rondo.vc"    = "research"
    "rondo.model" = %q
    "rondo.steps" = "%d"
  }
  group "train" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "train" {
      driver       = "raw_exec"
      kill_timeout = "10s"
      config {
        command = %q
      }
      identity {
        name = "rondo"
        aud  = ["rondo-lease"]
        file = true
      }
      env {
        RONDO_CHECKPOINT_DIR = "%s/${NOMAD_JOB_ID}"
        RONDO_GPU_TYPE       = "${meta.rondo_gpu_type}"
        RONDO_SPEEDUP        = "%g"
        RONDO_LEASE_ADDR     = %q
      }
      resources {
        cpu    = 50
        memory = 32
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`, id, model, steps, filepath.Join(s.bin, "rondo-trainer"), s.ckpt, speedup, s.leaseAddr)
}

// submit registers a job spec as `nomad job run -detach` does.
func (s *stack) submit(id, model string, steps int, speedup float64) {
	s.t.Helper()
	s.submitSpec(id, s.jobHCL(id, model, steps, speedup))
}

func (s *stack) submitSpec(id, spec string) {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), id+".nomad.hcl")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.nomad, "job", "run", "-detach", path)
	cmd.Env = append(cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "NOMAD_ADDR"), "NOMAD_TOKEN"),
		"NOMAD_ADDR="+s.c.Address, "NOMAD_TOKEN="+s.c.ManagementToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("nomad job run %s: %v\n%s", id, err, out)
	}
}

func (s *stack) waitFor(timeout time.Duration, what string, f func() (bool, error)) {
	s.t.Helper()
	if err := cluster.WaitFor(timeout, what, f); err != nil {
		s.t.Fatal(err)
	}
}

func liveAllocs(c *api.Client, id string) []*api.AllocationListStub {
	allocs, _, _ := c.Allocations().List(&api.QueryOptions{Params: map[string]string{"resources": "true"},
		Filter: fmt.Sprintf("JobID == %q", id)})
	var out []*api.AllocationListStub
	for _, a := range allocs {
		if a.DesiredStatus == "run" && (a.ClientStatus == "running" || a.ClientStatus == "pending") {
			out = append(out, a)
		}
	}
	return out
}

func allocGPUs(a *api.AllocationListStub) []string {
	var ids []string
	if a.AllocatedResources != nil {
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				ids = append(ids, d.DeviceIDs...)
			}
		}
	}
	return ids
}

// noOverlap checks that a job never had two allocations running at once;
// it returns how many ran.
func noOverlap(t *testing.T, c *api.Client, id string) int {
	t.Helper()
	return noOverlapLost(t, c, id, time.Time{})
}

func TestAllocatorOnNomad(t *testing.T) {
	s := startStack(t)
	t.Run("AdmissionGate", func(t *testing.T) { s.t = t; testGate(s) })
	s.reset()
	t.Run("UnhealthyGPUVacated", func(t *testing.T) { s.t = t; testUnhealthy(s) })
	s.reset()
	t.Run("RotationAndAgentKill", func(t *testing.T) { s.t = t; testRotationKill(s) })
	s.reset()
	t.Run("ChildJobs", func(t *testing.T) { s.t = t; testChildren(s) })
	s.reset()
	t.Run("TimeSharesMatchX", func(t *testing.T) { s.t = t; testTimeShares(s) })
}

// testGate: a job submitted with plain `nomad job run` while every GPU is
// free stays pending until the agent admits it.
func testGate(s *stack) {
	t, c := s.t, s.c.API
	s.submit("gate", "LM (batch size 20)", 100000, 1)
	time.Sleep(5 * time.Second)
	if allocs, _, _ := c.Jobs().Allocations("gate", true, nil); len(allocs) != 0 {
		t.Fatalf("job ran before admission: %d allocations", len(allocs))
	}
	job, _, err := c.Jobs().Info("gate", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Status != "pending" || *job.NodePool != "default" {
		t.Fatalf("before admission: status %s pool %s", *job.Status, *job.NodePool)
	}
	ag := s.startAgent("4s")
	s.waitFor(30*time.Second, "admitted job running", func() (bool, error) {
		l := liveAllocs(c, "gate")
		return len(l) == 1 && l[0].ClientStatus == "running", nil
	})
	job, _, _ = c.Jobs().Info("gate", nil)
	if *job.NodePool != rnomad.DefaultPool {
		t.Errorf("admitted job in pool %s", *job.NodePool)
	}
	if !strings.Contains(ag.logs(), "admit") {
		t.Errorf("no admit log line:\n%s", ag.logs())
	}
	// The config declares cells and a VC: per-VC engines over the cells.
	if !strings.Contains(ag.logs(), "per-VC engines over cells") {
		t.Errorf("the agent did not take the VC path:\n%s", ag.logs())
	}
	// The agent's token (the minimal policy) may not set the scheduler
	// configuration: the agent says how to enable preemption and runs on.
	if !strings.Contains(ag.logs(), "preempt-batch-scheduler=true") {
		t.Errorf("no log line about enabling preemption:\n%s", ag.logs())
	}
	// A job that names the GPU pool itself gets past the gate; the next
	// round takes it over: re-pinned by Rondo, or withdrawn.
	s.submitSpec("bypass", strings.Replace(s.jobHCL("bypass", "LM (batch size 20)", 100000, 1), `type = "batch"`,
		"type = \"batch\"\n  node_pool = \""+rnomad.DefaultPool+"\"", 1))
	s.waitFor(20*time.Second, "bypassing job taken over", func() (bool, error) {
		j, _, err := c.Jobs().Info("bypass", nil)
		if err != nil {
			return false, nil
		}
		for _, con := range j.TaskGroups[0].Constraints {
			if con.LTarget == "${node.unique.id}" {
				return true, nil
			}
		}
		return *j.TaskGroups[0].Count == 0, nil
	})
	// A later round keeps it: no new allocation.
	time.Sleep(9 * time.Second)
	if n := noOverlap(t, c, "gate"); n != 1 {
		t.Errorf("kept job was restarted: %d allocations", n)
	}
	ag.stop()
}

// testUnhealthy: the GPU of a running job turns unhealthy; within two
// rounds the job runs elsewhere.
func testUnhealthy(s *stack) {
	t, c := s.t, s.c.API
	ag := s.startAgent("4s")
	s.submit("sick", "LM (batch size 20)", 100000, 1)
	var gpu, node string
	s.waitFor(30*time.Second, "job running", func() (bool, error) {
		l := liveAllocs(c, "sick")
		if len(l) == 1 && l[0].ClientStatus == "running" && len(allocGPUs(l[0])) == 1 {
			gpu, node = allocGPUs(l[0])[0], l[0].NodeName
			return true, nil
		}
		return false, nil
	})
	if err := os.WriteFile(filepath.Join(s.c.FaultDir(node), gpu), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.waitFor(25*time.Second, "job moved off the unhealthy GPU", func() (bool, error) {
		l := liveAllocs(c, "sick")
		return len(l) == 1 && l[0].ClientStatus == "running" && len(allocGPUs(l[0])) == 1 && allocGPUs(l[0])[0] != gpu, nil
	})
	t.Logf("vacated %s in %v", gpu, time.Since(start).Round(time.Second))
	if !strings.Contains(ag.logs(), "migrate") {
		t.Errorf("no migrate log line")
	}
	noOverlap(t, c, "sick")
	ag.stop()
}

// testChildren: parameterized and periodic parents with Rondo meta are
// never scheduled themselves. Periodic children are: each is admitted,
// reports progress through the lease API for itself and trains out.
// Dispatched children cannot be admitted (Nomad refuses to re-register
// them through the HTTP API): they are skipped with a warning instead of
// failing every round.
func testChildren(s *stack) {
	t, c := s.t, s.c.API
	// On a V100 (64 steps/s) 1000 steps span about four rounds, so the
	// progress the children report is in a saved state before they
	// finish (a finished job's entry is removed). With 200 steps they
	// finished within their first round once the cells placed them on the
	// V100 their engine chose (issue #5; they used to land on the K80s).
	const steps = 1000
	hcl := func(id, block string) string {
		return strings.Replace(s.jobHCL(id, "LM (batch size 20)", steps, 1), `type = "batch"`,
			"type = \"batch\"\n  "+block, 1)
	}
	s.submitSpec("batchp", hcl("batchp", "parameterized {}"))
	s.submitSpec("cronp", hcl("cronp", `periodic {
    crons            = ["0 0 1 1 *"]
    prohibit_overlap = false
  }`))
	r, _, err := c.Jobs().Dispatch("batchp", nil, nil, "", nil)
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	dispatched := r.DispatchedJobID
	for i := range 2 {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond) // children are named by the launch second
		}
		if _, _, err := c.Jobs().PeriodicForce("cronp", nil); err != nil {
			t.Fatalf("periodic force: %v", err)
		}
	}
	var kids []string
	s.waitFor(30*time.Second, "two periodic children", func() (bool, error) {
		l, _, err := c.Jobs().PrefixList("cronp/periodic-")
		kids = kids[:0]
		for _, j := range l {
			kids = append(kids, j.ID)
		}
		return len(kids) == 2, err
	})
	ag := s.startAgent("4s")
	store := state.NewStore(c, state.Options{})
	reported := map[string]bool{}
	s.waitFor(90*time.Second, "both periodic children reporting progress through the lease API", func() (bool, error) {
		st, err := store.Load(context.Background())
		if err != nil {
			return false, err
		}
		for _, k := range kids {
			if st.Progress[k] > 0 {
				reported[k] = true
			}
		}
		return len(reported) == len(kids), nil
	})
	s.waitFor(120*time.Second, "both periodic children done", func() (bool, error) {
		for _, k := range kids {
			ck, err := rnomad.ReadCheckpoint(filepath.Join(s.ckpt, k))
			if err != nil || ck.Steps < steps {
				return false, nil
			}
		}
		return true, nil
	})
	// Each child's "finished" line is logged once, not at every later round.
	s.waitFor(30*time.Second, "the children's finished lines", func() (bool, error) {
		for _, k := range kids {
			if !strings.Contains(ag.logs(), "finished: job="+k+" ") {
				return false, nil
			}
		}
		return true, nil
	})
	r0 := s.status(ag).Round
	s.waitFor(30*time.Second, "two more rounds", func() (bool, error) { return s.status(ag).Round >= r0+2, nil })
	logs := ag.logs()
	for _, k := range kids {
		if n := strings.Count(logs, "finished: job="+k+" "); n != 1 {
			t.Errorf("periodic child %s: %d finished lines, want 1", k, n)
		}
		if !strings.Contains(logs, "admit: job="+k) {
			t.Errorf("periodic child %s was not admitted by the agent", k)
		}
		noOverlap(t, c, k)
		if j, _, err := c.Jobs().Info(k, nil); err == nil && j.ParentID != nil {
			t.Logf("periodic child %s: parent after admission %q", k, *j.ParentID)
		}
	}
	for _, parent := range []string{"batchp", "cronp"} {
		if strings.Contains(logs, "job="+parent+" ") {
			t.Errorf("the parent %s was scheduled:\n%s", parent, tail(logs, 3000))
		}
	}
	if strings.Contains(logs, "admit: job="+dispatched) || !strings.Contains(logs, "a dispatched job cannot be re-registered") {
		t.Errorf("dispatched child %s: admitted, or skipped without the warning:\n%s", dispatched, tail(logs, 3000))
	}
	if l := liveAllocs(c, dispatched); len(l) != 0 {
		t.Errorf("the dispatched child runs: %d allocations", len(l))
	}
	if strings.Contains(logs, "round failed") {
		t.Errorf("rounds failed:\n%s", tail(logs, 3000))
	}
	// Only the periodic children call the lease API here: none is refused
	// as another job's (403). (A 404 for a job that just finished is normal.)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "lease api") && strings.Contains(line, ": 403:") {
			t.Errorf("a child's lease API call was refused: %s", line)
		}
	}
	ag.stop()
}

var resumeRE = regexp.MustCompile(`resuming at (\d+)/`)

// testRotationKill: six jobs on four GPUs rotate in short rounds; the agent
// is killed with SIGKILL mid-run and restarted; every job finishes with its
// full progress, none ever ran twice at once, and suspended jobs resumed
// from their checkpoints.
func testRotationKill(s *stack) {
	t, c := s.t, s.c.API
	// At half speed the jobs on K80s (8.6 steps/s) still run when the
	// restarted agent's first round comes (the kill, 6 s and the leader
	// lock's TTL and delay later: 20-40 s), for the received-time check
	// across the kill: 1000 steps leave a K80 job held at the kill more
	// than the ~310 steps of that downtime (jobs rotate every round or
	// two, so none has done much by then). A V100 job (32 steps/s) trains
	// out during the downtime.
	const steps = 1000
	ids := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	for _, id := range ids {
		s.submit(id, "LM (batch size 20)", steps, 0.5)
	}
	ag := s.startAgent("4s")
	s.waitFor(60*time.Second, "a suspension", func() (bool, error) {
		// The backend's event lines ("suspend: job=ID"), not the round
		// line's "suspends=0".
		return strings.Contains(ag.logs(), "suspend: job=") || strings.Contains(ag.logs(), "preempt: job="), nil
	})
	// The durable state (Nomad Variables, written with the agent's ACL
	// token) holds the round, the received time and the progress the
	// trainers reported through the lease API.
	store := state.NewStore(c, state.Options{})
	var saved *state.State
	s.waitFor(30*time.Second, "progress reported through the lease API and saved", func() (bool, error) {
		st, err := store.Load(context.Background())
		if err != nil {
			return false, err
		}
		saved = st
		return len(st.Progress) > 0 && len(st.Received) > 0, nil
	})
	// The per-VC engines' history (baselines, deficits, allocation) is in
	// the state too, and the restarted agent takes it (below).
	if !strings.Contains(string(saved.Engine), `"vcs"`) {
		t.Errorf("no engine history in the saved state: %.300s", saved.Engine)
	}
	// Kill mid-round, when some job holds a K80 (not while a round swaps
	// every job), so that the received-time check below has a job that
	// Nomad kept running through the kill. The window: the round's
	// enforcement is done (1.5 s after its start) and the next round is
	// not due yet; the round number read again after listing the
	// allocations proves no round came in between. (Six equal jobs may
	// all change GPUs every round, so no job need hold a K80 for two
	// rounds in a row.) heldAtKill: the running allocations holding GPUs
	// when the agent dies.
	var before agent.Status
	var heldAtKill map[string]*api.AllocationListStub
	s.waitFor(60*time.Second, "a job running on a K80 mid-round", func() (bool, error) {
		before = s.status(ag)
		if d := time.Since(before.LastRound); d < 1500*time.Millisecond || d > 3*time.Second {
			return false, nil
		}
		heldAtKill = map[string]*api.AllocationListStub{}
		n := 0
		for _, id := range ids {
			if l := liveAllocs(c, id); len(l) == 1 && len(allocGPUs(l[0])) > 0 && l[0].ClientStatus == "running" {
				heldAtKill[id] = l[0]
				if l[0].NodeName == "k80-a" {
					n++
				}
			}
		}
		return n > 0 && s.status(ag).Round == before.Round, nil
	})
	t.Logf("before kill -9: round %d, state round %d, progress %v", before.Round, saved.Round, saved.Progress)
	ag.kill9()
	time.Sleep(6 * time.Second)
	ag2 := s.startAgent("4s")
	// After the restart (the leader lock frees after its TTL) rounds
	// continue from the recorded number and received time is not reset.
	var after agent.Status
	s.waitFor(45*time.Second, "a round of the restarted agent", func() (bool, error) {
		after = s.status(ag2)
		return !after.LastRound.IsZero(), nil
	})
	if !strings.Contains(ag2.logs(), "engine history restored") {
		t.Errorf("the restarted agent did not restore the engine history:\n%s", tail(ag2.logs(), 3000))
	}
	if after.Round <= before.Round {
		t.Errorf("round number restarted: %d before kill -9, %d after", before.Round, after.Round)
	}
	compared := 0
	for _, jb := range before.Jobs {
		for _, ja := range after.Jobs {
			if ja.ID != jb.ID {
				continue
			}
			for typ, v := range jb.ReceivedS {
				if v > 0 {
					compared++
				}
				if ja.ReceivedS[typ] < v {
					t.Errorf("job %s: received %s time %.1fs before kill -9, %.1fs after", jb.ID, typ, v, ja.ReceivedS[typ])
				}
			}
			if ja.ArrivalS != jb.ArrivalS {
				t.Errorf("job %s: arrival %.1f before kill -9, %.1f after", jb.ID, jb.ArrivalS, ja.ArrivalS)
			}
		}
	}
	if compared == 0 {
		t.Errorf("no received time to compare: before %+v after %+v", before.Jobs, after.Jobs)
	}
	// Received time across the kill: a job whose allocation ran from the
	// kill (placed by the last round seen before it, or earlier) to the
	// restarted agent's round (still running, or stopped after it) gained
	// the whole elapsed time, downtime included; no job gained more than
	// the elapsed time. Tolerance: one round (the lag from a round's
	// observation to its status, or to a start's placement, differs from
	// round to round).
	const roundS = 4.0
	elapsed := after.LastRound.Sub(before.LastRound).Seconds()
	throughout := 0
	for _, jb := range before.Jobs {
		for _, ja := range after.Jobs {
			if ja.ID != jb.ID {
				continue
			}
			gained := 0.0
			for typ, v := range ja.ReceivedS {
				gained += v - jb.ReceivedS[typ]
			}
			if gained > elapsed+roundS {
				t.Errorf("job %s: gained %.1fs of received time across the kill, more than the %.1fs elapsed", jb.ID, gained, elapsed)
			}
			a := heldAtKill[jb.ID]
			if a == nil {
				continue
			}
			info, _, err := c.Allocations().Info(a.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			ran := info.ClientStatus == "running"
			for _, ts := range info.TaskStates {
				if !ts.FinishedAt.IsZero() && !ts.FinishedAt.Before(after.LastRound) {
					ran = true
				}
			}
			if !ran {
				continue
			}
			throughout++
			t.Logf("job %s: allocation %.8s ran through the kill; received +%.1fs over %.1fs elapsed", jb.ID, a.ID, gained, elapsed)
			if gained < elapsed-roundS {
				t.Errorf("job %s ran through the kill -9 (allocation %s) but gained %.1fs of received time over %.1fs elapsed",
					jb.ID, a.ID, gained, elapsed)
			}
		}
	}
	if throughout == 0 {
		t.Errorf("no job ran through the kill -9 to check its received time (held at kill: %d)", len(heldAtKill))
	}
	t.Logf("after restart: round %d, reconciled %v", after.Round, after.Reconciled)
	s.waitFor(300*time.Second, "every job done", func() (bool, error) {
		for _, id := range ids {
			ck, err := rnomad.ReadCheckpoint(filepath.Join(s.ckpt, id))
			if err != nil || ck.Steps < steps {
				return false, nil
			}
		}
		return true, nil
	})
	resumed := 0
	for _, id := range ids {
		noOverlap(t, c, id)
		allocs, _, _ := c.Jobs().Allocations(id, true, nil)
		for _, a := range allocs {
			al, _, err := c.Allocations().Info(a.ID, nil)
			if err != nil {
				continue
			}
			r, err := c.AllocFS().Cat(al, "alloc/logs/train.stdout.0", nil)
			if err != nil {
				continue
			}
			b := make([]byte, 4096)
			n, _ := r.Read(b)
			r.Close()
			if m := resumeRE.FindSubmatch(b[:n]); m != nil && string(m[1]) != "0" {
				resumed++
			}
		}
	}
	if resumed == 0 {
		t.Errorf("no job resumed from a checkpoint; agent logs:\n%s\n%s", tail(ag.logs(), 3000), tail(ag2.logs(), 3000))
	}
	t.Logf("%d resumptions from checkpoints", resumed)
	metrics := s.get(ag2, "/metrics")
	for _, want := range []string{"rondo_round_duration_seconds_bucket", `rondo_decisions_total{kind="`, `rondo_gpu_utilization{type="v100"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, tail(metrics, 3000))
		}
	}
	// Finished jobs are left alone by later rounds.
	time.Sleep(5 * time.Second)
	for _, id := range ids {
		if l := liveAllocs(c, id); len(l) != 0 {
			t.Errorf("finished job %s runs again", id)
		}
	}
	ag2.stop()
}

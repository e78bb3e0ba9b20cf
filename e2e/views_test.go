package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// viewsConfig: the demo cluster's cells (one 4-GPU node per type), in
// three VCs: research holds the V100 node, prod the K80 node, idle the
// P100 node.
const viewsConfig = `round_seconds = 3
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 4
  node  = true
}
cell_type "p100" {
  gpu_type = "p100"
}
cell_type "p100-node" {
  child = "p100"
  count = 4
  node  = true
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 4
  node  = true
}
cell "v100-node" "v100-0" {
  nomad_node = "v100-0"
}
cell "p100-node" "p100-0" {
  nomad_node = "p100-0"
}
cell "k80-node" "k80-0" {
  nomad_node = "k80-0"
}
vc "research" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_perf"
}
vc "prod" {
  quota  = { "k80-node" = 1 }
  policy = "max_min_fairness_perf"
}
vc "idle" {
  quota  = { "p100-node" = 1 }
  policy = "max_min_fairness_perf"
}
`

// viewJobHCL is jobHCL in VC vc with gpus GPUs, opportunistic when opp.
func (s *stack) viewJobHCL(id, vc string, gpus int, opp bool) string {
	spec := s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000000, 1)
	meta := `"rondo.vc"    = "` + vc + `"`
	if opp {
		meta += "\n    \"rondo.priority\" = \"opportunistic\""
	}
	spec = strings.Replace(spec, `"rondo.vc"    = "research"`, meta, 1)
	return strings.Replace(spec, "count = 1", "count = "+strconv.Itoa(gpus), 1)
}

// viewsGangConfig: the whole demo cluster in one VC (no cells, no
// quota), started jobs kept at least 10 minutes.
const viewsGangConfig = `round_seconds = 3
min_runtime   = "10m"
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// rondoRun runs the rondo binary against agent a (RONDO_ADDR, NOMAD_TOKEN).
func (s *stack) rondoRun(a *agentProc, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.bin, "rondo"), args...)
	cmd.Env = append(cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "RONDO_ADDR"), "NOMAD_TOKEN"),
		"RONDO_ADDR=http://"+a.addr, "NOMAD_TOKEN="+s.c.ManagementToken)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rondoCLI is rondoRun for commands that must succeed: it returns the
// output; a failure fails the test.
func (s *stack) rondoCLI(a *agentProc) func(args ...string) string {
	return func(args ...string) string {
		s.t.Helper()
		out, err := s.rondoRun(a, args...)
		if err != nil {
			s.t.Fatalf("rondo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
}

// TestViewsOnNomad: the CLI views answer their questions against a real
// agent on the demo cluster (3 nodes of 4 GPUs: V100, P100, K80), the
// rondo binary built once. Borrowing (three cell VCs, one node each):
// prod fills its K80 node with a 4-GPU job and runs an opportunistic job
// beyond it: `rondo vc status` shows prod borrowing that GPU and the VC
// whose cell it runs in lending it; `rondo node status` lists every GPU
// with the jobs on it. Gang (one VC over the whole cluster, started jobs
// kept 10 minutes): three 3-GPU jobs hold one node each, so a 2-GPU gang
// cannot fit on one node: `rondo job status gang` says it waits for the
// gang and `rondo job list -state pending` lists it. -json, -t and
// -watch-count work against the real agent, which refuses a token Nomad
// does not know.
func TestViewsOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, cluster.DefaultClients(), viewsConfig)
	c := s.c.API
	running := func(ids ...string) bool {
		for _, id := range ids {
			if l := liveAllocs(c, id); len(l) != 1 || l[0].ClientStatus != "running" {
				return false
			}
		}
		return true
	}

	// Borrowing and lending.
	s.submitSpec("first", s.viewJobHCL("first", "research", 1, false))
	s.submitSpec("big", s.viewJobHCL("big", "prod", 4, false))
	a := s.startAgent("3s")
	rondo := s.rondoCLI(a)
	s.waitFor(60*time.Second, "first and big running", func() (bool, error) { return running("first", "big"), nil })
	s.submitSpec("borrow", s.viewJobHCL("borrow", "prod", 1, true))
	s.waitFor(60*time.Second, "the opportunistic job running", func() (bool, error) { return running("borrow"), nil })
	var borrowType string
	for _, j := range jobsVia(t, rondo) {
		if j.ID == "borrow" {
			borrowType = j.Type
		}
	}
	lender := map[string]string{"v100": "research", "p100": "idle"}[borrowType]
	if lender == "" {
		t.Fatalf("the opportunistic job runs on %q, not in another VC's cell", borrowType)
	}
	var vcs []agent.VC
	s.waitFor(15*time.Second, "prod borrowing in vc status", func() (bool, error) {
		if err := json.Unmarshal([]byte(rondo("vc", "status", "-json")), &vcs); err != nil {
			return false, err
		}
		for _, v := range vcs {
			if v.Name == "prod" {
				return v.Borrowed[borrowType] == 1, nil
			}
		}
		return false, nil
	})
	out := rondo("vc", "status")
	t.Logf("rondo vc status:\n%s", out)
	rows := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		rows[strings.Join(strings.Fields(l), " ")] = true
	}
	wants := []string{"prod k80 4 4 0 0", "prod " + borrowType + " 0 1 1 0"}
	if lender == "research" { // first holds one of its V100s
		wants = append(wants, "research v100 4 1 0 1")
	} else {
		wants = append(wants, "research v100 4 1 0 0", lender+" "+borrowType+" 4 0 0 1")
	}
	for _, want := range wants {
		if !rows[want] {
			t.Errorf("rondo vc status lacks the row %q", want)
		}
	}
	if got := rondo("vc", "status", "prod", "-t", `{{.name}} running {{.running}} borrowed {{json .borrowed}}`); got != `prod running 2 borrowed {"`+borrowType+`":1}` {
		t.Errorf("rondo vc status prod -t: %q", got)
	}
	// Every GPU, with the jobs on it.
	out = rondo("node", "status")
	t.Logf("rondo node status:\n%s", out)
	on := map[string]int{}
	gpus := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 7 || !strings.HasPrefix(f[1], "GPU-") {
			continue
		}
		gpus++
		if f[3] != "healthy" {
			t.Errorf("GPU %s: %s", f[1], f[3])
		}
		if f[6] != "-" {
			on[f[6]]++
		}
	}
	if gpus != 12 || on["first"] != 1 || on["big"] != 4 || on["borrow"] != 1 {
		t.Errorf("rondo node status: %d GPUs, jobs on them %v; want 12, first 1, big 4, borrow 1", gpus, on)
	}
	var node agent.NodeStatus
	if err := json.Unmarshal([]byte(rondo("node", "status", "-json", "k80-0")), &node); err != nil {
		t.Fatal(err)
	}
	if node.Pool != "rondo" || len(node.GPUs) != 4 || len(node.GPUs[0].Jobs) != 1 || node.GPUs[0].Jobs[0] != "big" {
		t.Errorf("rondo node status -json k80-0: %+v", node)
	}
	// The agent checks the token the CLI sends (NOMAD_TOKEN above).
	if out, err := s.rondoRun(a, "vc", "status", "-token", "00000000-0000-0000-0000-000000000000"); err == nil ||
		!strings.Contains(out, "403") || !strings.Contains(out, "-token or NOMAD_TOKEN") {
		t.Errorf("rondo vc status with a token Nomad does not know: %v\n%s", err, out)
	}
	// Two renders, a round apart.
	if out := rondo("status", "-watch-count", "2"); strings.Count(out, "Cluster:") != 2 {
		t.Errorf("rondo status -watch-count 2:\n%s", out)
	}
	a.stop()
	s.reset()

	// A gang that cannot fit on one node.
	if err := os.WriteFile(s.cfgPath, []byte(viewsGangConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"fill-0", "fill-1", "fill-2"} {
		s.submitSpec(id, s.viewJobHCL(id, "research", 3, false))
	}
	a = s.startAgent("3s", "-state-path", "rondo/views-gang")
	rondo = s.rondoCLI(a)
	s.waitFor(60*time.Second, "three 3-GPU jobs running", func() (bool, error) { return running("fill-0", "fill-1", "fill-2"), nil })
	s.submitSpec("gang", s.viewJobHCL("gang", "research", 2, false))
	pending := regexp.MustCompile(`(?m)^Pending:\s+(.*)$`)
	var why string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		out, _ := s.rondoRun(a, "job", "status", "gang") // unknown until a round saw it
		if m := pending.FindStringSubmatch(out); m != nil {
			if why = m[1]; strings.Contains(strings.ToLower(why), "gang") {
				break
			}
		}
	}
	t.Logf("rondo job status gang: Pending: %s", why)
	if !strings.Contains(strings.ToLower(why), "gang of 2") {
		t.Errorf("rondo job status gang: pending reason %q, want the gang's (2 GPUs on one server)", why)
	}
	out = rondo("job", "status", "gang")
	t.Logf("rondo job status gang:\n%s", out)
	if !strings.Contains(out, "State:      queued") || !regexp.MustCompile(`(?m)^\d+\s+\S+ \S+\s+wait\s.*gang of 2`).MatchString(out) {
		t.Errorf("rondo job status gang: not queued, or no wait event with the gang's reason in its history")
	}
	list := rondo("job", "list", "-state", "pending")
	t.Logf("rondo job list -state pending:\n%s", list)
	if !strings.Contains(list, "gang") || strings.Contains(list, "fill-") {
		t.Errorf("rondo job list -state pending lists the wrong jobs")
	}
	if running("gang") {
		t.Errorf("the gang runs: the 3-GPU jobs were not kept")
	}
}

// jobsVia is the agent's jobs through `rondo job list -json`.
func jobsVia(t *testing.T, rondo func(...string) string) []agent.JobStatus {
	t.Helper()
	var js []agent.JobStatus
	if err := json.Unmarshal([]byte(rondo("job", "list", "-json")), &js); err != nil {
		t.Fatal(err)
	}
	return js
}

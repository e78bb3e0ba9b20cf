package e2e

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/client/lib/numalib"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// The Synergy server the placement test models on this machine: 4 GPUs,
// 16 cores and 256 GB offered to tasks (17 cores' worth of compute and
// 257 GB, one core and 1 GB reserved by the client).
const (
	synergyGPUs  = 4
	synergyCores = 16
	synergyMemGB = 256
)

const placementConfig = `round_seconds = 4
placement = "tune"
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// hostCoreMHz is the per-core MHz Nomad fingerprints here (its
// cpu.frequency), by the same detection code at the same version: the
// unit of a node's cores, which cpu_total_compute is set in multiples of.
func hostCoreMHz(t *testing.T) int {
	p, _ := numalib.Scan(numalib.PlatformScanners(false)).CoreSpeeds()
	if p == 0 {
		t.Skip("no CPU frequency detected: Nomad's cores cannot be modelled here")
	}
	return int(p)
}

// profiledJobHCL is jobHCL with meta rondo.profile.
func (s *stack) profiledJobHCL(id, profile string) string {
	return strings.Replace(s.jobHCL(id, "ResNet-50 (batch size 64)", 1e9, 1), `"rondo.vc"    = "research"`,
		`"rondo.vc"    = "research"
    "rondo.profile" = "`+profile+`"`, 1)
}

// tuneGrants is what Synergy-TUNE (with Rondo's leftover step, as the
// agent runs it) gives one-GPU jobs of these profiles (id → profile) on the
// modelled server, one placement per phase of arrivals: each phase's jobs
// placed afresh, the earlier ones held.
func tuneGrants(t *testing.T, phases ...map[string]string) []map[string]placement.Grant {
	t.Helper()
	srv := []placement.Server{{ID: "n", GPUs: synergyGPUs, Cores: synergyCores, MemGB: synergyMemGB}}
	var jobs []placement.Job
	var out []map[string]placement.Grant
	for _, arrivals := range phases {
		for _, id := range slices.Sorted(maps.Keys(arrivals)) {
			p, err := synergy.Default().Lookup(arrivals[id], 1, synergyCores/synergyGPUs)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, placement.Job{ID: id, GPUs: map[string]int{"n": 1}, Profile: p})
		}
		r, err := placement.Place(placement.Tune, srv, jobs, placement.Options{Leftover: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range jobs {
			g := r.Grants[jobs[i].ID]
			jobs[i].Held = &g
		}
		out = append(out, r.Grants)
	}
	return out
}

// webJobHCL is work Rondo does not schedule, in its GPU pool: cpu MHz.
const webJobHCL = `job "web" {
  type      = "batch"
  node_pool = "rondo"
  group "web" {
    task "web" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      resources {
        cpu    = %d
        memory = 1024
      }
    }
  }
}
`

// nodeUsage is the CPU (MHz) and memory (MB) the node's live allocations
// hold in Nomad's accounting.
func nodeUsage(t *testing.T, c *api.Client, node string) (cpu, mem int64) {
	t.Helper()
	allocs, _, err := c.Nodes().Allocations(node, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, al := range allocs {
		if al.ClientTerminalStatus() || al.AllocatedResources == nil {
			continue
		}
		for _, tr := range al.AllocatedResources.Tasks {
			cpu += tr.Cpu.CpuShares
			mem += tr.Memory.MemoryMB
		}
	}
	return cpu, mem
}

// runningWith reports the job's one running allocation when Nomad holds
// exactly cpu MHz and mem MB for its task.
func runningWith(c *api.Client, id string, cpu, mem int64) (*api.Allocation, bool) {
	l := liveAllocs(c, id)
	if len(l) != 1 || l[0].ClientStatus != "running" {
		return nil, false
	}
	al, _, err := c.Allocations().Info(l[0].ID, nil)
	if err != nil || al.AllocatedResources == nil || al.AllocatedResources.Tasks["train"] == nil {
		return nil, false
	}
	tr := al.AllocatedResources.Tasks["train"]
	return al, tr.Cpu.CpuShares == cpu && tr.Memory.MemoryMB == mem
}

// TestPlacementOnNomad: CPU and memory placement (Synergy-TUNE) on a real
// Nomad. One client models a Synergy server on this small machine
// (cpu_total_compute and memory_total_mb, with a reserved block): 4 fake
// V100s, 16 cores and 256 GB offered. An alexnet job (CPU-hungry) and a
// gnmt job (flat) arrive together: alexnet gets its best case, 12 cores
// and 125 GB, more than its proportional 4 cores; gnmt its best case,
// 1 core and 20 GB, less than proportional. Nomad's accounting agrees:
// each allocation holds exactly its grant (cores × the per-core MHz,
// since 12 cores are more than this machine's own; GB × 1024 MB), the
// tasks get RONDO_CORES and RONDO_MEM_MB, the node's allocations are
// within what it offers, and no evaluation blocks. A res18 job arrives:
// TUNE must shrink alexnet back to proportional to fit res18's 9 cores, so
// alexnet is retuned exactly once (a checkpointed restart on the same GPU
// with 4 cores and 64 GB, resuming from its checkpoint), gnmt is not
// touched. Then a job Rondo does not schedule takes all but 500 MHz of the
// node and a late gnmt arrives: its 1-core grant does not fit Nomad's
// accounting, so it runs shrunk to the 500 MHz free (a warning), no
// evaluation blocked, the node exactly full. Nothing restarts in the
// rounds after.
func TestPlacementOnNomad(t *testing.T) {
	t.Parallel()
	mhz := hostCoreMHz(t)
	spec := cluster.UniformClient("synergy", "v100", synergyGPUs)
	spec.CPUMHz, spec.MemoryMB = (synergyCores+1)*mhz, (synergyMemGB+1)*1024
	spec.ClientHCL = fmt.Sprintf("  reserved {\n    cpu    = %d\n    memory = 1024\n  }\n", mhz)
	s := startStackWith(t, []cluster.ClientSpec{spec}, placementConfig)
	c := s.c.API
	began := time.Now()
	nodes, _, err := c.Nodes().List(nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	node, _, err := c.Nodes().Info(nodes[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Attributes["cpu.frequency"]; got != strconv.Itoa(mhz) {
		t.Fatalf("the node's cpu.frequency is %q, the test computed %d MHz per core", got, mhz)
	}
	capCPU := node.NodeResources.Cpu.CpuShares - int64(node.ReservedResources.Cpu.CpuShares)
	capMem := node.NodeResources.Memory.MemoryMB - int64(node.ReservedResources.Memory.MemoryMB)
	if capCPU != int64(synergyCores*mhz) || capMem != synergyMemGB*1024 {
		t.Fatalf("node offers %d MHz and %d MB, want %d cores of %d MHz and %d GB", capCPU, capMem, synergyCores, mhz, synergyMemGB)
	}

	rounds := tuneGrants(t, map[string]string{"alex": "alexnet", "gnmt": "gnmt"}, map[string]string{"res18": "res18"},
		map[string]string{"late": "gnmt"})
	round1, round2, round3 := rounds[0], rounds[1], rounds[2]
	propC, propM := float64(synergyCores)/synergyGPUs, float64(synergyMemGB)/synergyGPUs
	// The scenario's premises, from the embedded profiles.
	if a, g := round1["alex"], round1["gnmt"]; a.Cores != 12 || a.MemGB != 125 || g.Cores != 1 || g.MemGB != 20 {
		t.Fatalf("TUNE on the modelled server: alex %+v, gnmt %+v; the test expects best cases 12/125 and 1/20", a, g)
	}
	if a := round2["alex"]; a.Cores != propC || a.MemGB != propM || round2["gnmt"] != round1["gnmt"] {
		t.Fatalf("TUNE after res18: %+v; the test expects alex shrunk to proportional, gnmt kept", round2)
	}
	if l := round3["late"]; l.Cores != 1 || l.MemGB != 20 {
		t.Fatalf("TUNE for a late gnmt: %+v; the test expects its best case, 1 core and 20 GB", l)
	}
	want := func(g placement.Grant) (int64, int64) {
		return int64(math.Round(g.Cores * float64(mhz))), int64(g.MemGB * 1024)
	}

	s.submitSpec("alex", s.profiledJobHCL("alex", "alexnet"))
	s.submitSpec("gnmt", s.profiledJobHCL("gnmt", "gnmt"))
	ag := s.startAgent("4s")
	allocOf := map[string]string{}
	s.waitFor(60*time.Second, "alex and gnmt running with their TUNE grants", func() (bool, error) {
		for _, id := range []string{"alex", "gnmt"} {
			cpu, mem := want(round1[id])
			al, ok := runningWith(c, id, cpu, mem)
			if !ok {
				return false, nil
			}
			allocOf[id] = al.ID
		}
		return true, nil
	})
	t.Logf("alex and gnmt running with their grants %.1fs after the cluster was up", time.Since(began).Seconds())
	if a, g := round1["alex"], round1["gnmt"]; !(a.Cores > propC) || !(g.Cores < propC) {
		t.Errorf("alex %g cores, gnmt %g: want more and less than proportional %g", a.Cores, g.Cores, propC)
	}
	for id, env := range map[string][2]string{"alex": {"12", "128000"}, "gnmt": {"1", "20480"}} {
		job, _, err := c.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := job.TaskGroups[0].Tasks[0]
		if tr.Env[rnomad.EnvCores] != env[0] || tr.Env[rnomad.EnvMemMB] != env[1] || tr.Resources.Cores != nil && *tr.Resources.Cores != 0 {
			t.Errorf("%s: env %v, cores %v; want %s=%s %s=%s and cpu MHz (this machine has %d real cores)",
				id, tr.Env, tr.Resources.Cores, rnomad.EnvCores, env[0], rnomad.EnvMemMB, env[1], node.NodeResources.Cpu.TotalCpuCores)
		}
	}
	checkNodeAccounting(t, c, node.ID, capCPU, capMem, "alex", "gnmt")

	// Stable while nothing arrives: no retune, same allocations.
	time.Sleep(9 * time.Second)
	if strings.Contains(ag.logs(), "retune: job=") {
		t.Errorf("a retune with no arrival:\n%s", tail(ag.logs(), 3000))
	}
	kept := s.checkpointSteps("alex")

	// res18 arrives: alexnet must give back cores (one retune), gnmt stays.
	arrived := time.Now()
	s.submitSpec("res18", s.profiledJobHCL("res18", "res18"))
	var alexAlloc *api.Allocation
	s.waitFor(60*time.Second, "res18 running and alex retuned to its proportional share", func() (bool, error) {
		cpu, mem := want(round2["res18"])
		if _, ok := runningWith(c, "res18", cpu, mem); !ok {
			return false, nil
		}
		cpu, mem = want(round2["alex"])
		al, ok := runningWith(c, "alex", cpu, mem)
		alexAlloc = al
		return ok, nil
	})
	t.Logf("res18 running and alex retuned %.1fs after res18 was submitted (rounds of 4s)", time.Since(arrived).Seconds())
	if alexAlloc.ID == allocOf["alex"] {
		t.Errorf("alex's resources changed without a new allocation")
	}
	// The retuned task resumed from its checkpoint.
	time.Sleep(2 * time.Second)
	if got := s.checkpointSteps("alex"); got < kept {
		t.Errorf("alex restarted from scratch: %.0f steps, %.0f before the retune", got, kept)
	}
	if r, err := c.AllocFS().Cat(alexAlloc, "alloc/logs/train.stdout.0", nil); err == nil {
		b := make([]byte, 4096)
		n, _ := r.Read(b)
		r.Close()
		if m := resumeRE.FindSubmatch(b[:n]); m == nil || string(m[1]) == "0" {
			t.Errorf("the retuned alex did not resume from its checkpoint: %q", b[:n])
		}
	}

	// Work Rondo does not schedule (no rondo meta, in the GPU pool) takes
	// all but 500 MHz of what the grants leave on the node: a late gnmt's
	// grant (1 core, which the stage, counting the node's capacity only,
	// sees free) does not fit Nomad's accounting; it is shrunk to the
	// 500 MHz free instead of leaving an evaluation blocked.
	used, _ := nodeUsage(t, c, node.ID)
	webCPU := capCPU - used - 500
	s.submitSpec("web", fmt.Sprintf(webJobHCL, webCPU))
	s.waitFor(30*time.Second, "the web job running", func() (bool, error) {
		l := liveAllocs(c, "web")
		return len(l) == 1 && l[0].ClientStatus == "running", nil
	})
	s.submitSpec("late", s.profiledJobHCL("late", "gnmt"))
	_, lateMem := want(round3["late"])
	s.waitFor(30*time.Second, "the late gnmt running on the 500 MHz free", func() (bool, error) {
		_, ok := runningWith(c, "late", 500, lateMem)
		return ok, nil
	})
	if job, _, err := c.Jobs().Info("late", nil); err != nil {
		t.Fatal(err)
	} else if tr := job.TaskGroups[0].Tasks[0]; tr.Env[rnomad.EnvCores] != strconv.FormatFloat(500/float64(mhz), 'f', -1, 64) ||
		job.Meta[rnomad.MetaCores] != "1" {
		t.Errorf("late: env %v, meta %v; want its shrunk share in the env and the grant, 1 core, recorded", tr.Env, job.Meta)
	}
	if !strings.Contains(ag.logs(), "shrunk to fit: job=late") {
		t.Errorf("no warning about late's shrunk grant:\n%s", tail(ag.logs(), 3000))
	}
	if used, _ := nodeUsage(t, c, node.ID); used != capCPU {
		t.Errorf("the node's allocations hold %d MHz, want all %d", used, capCPU)
	}

	// A few more rounds: nothing else restarts.
	time.Sleep(9 * time.Second)
	logs := ag.logs()
	if n := strings.Count(logs, "retune: job=alex"); n != 1 {
		t.Errorf("alex retuned %d times, want 1", n)
	}
	if strings.Count(logs, "retune: job=") != 1 {
		t.Errorf("a job other than alex retuned:\n%s", tail(logs, 3000))
	}
	for id, n := range map[string]int{"alex": 2, "gnmt": 1, "res18": 1, "late": 1} {
		all, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != n {
			t.Errorf("%s had %d allocations, want %d", id, len(all), n)
		}
	}
	if l := liveAllocs(c, "gnmt"); len(l) != 1 || l[0].ID != allocOf["gnmt"] {
		t.Errorf("gnmt's allocation changed")
	}
	checkNodeAccounting(t, c, node.ID, capCPU, capMem, "alex", "gnmt", "res18", "late", "web")
	metrics := s.get(ag, "/metrics")
	for _, w := range []string{`rondo_decisions_total{kind="retune"} 1`, "rondo_preemptions_total 1"} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %q:\n%s", w, tail(metrics, 2000))
		}
	}
	ag.stop()
	var lines []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "admit: job=") || strings.Contains(l, "retune: job=") || strings.Contains(l, "placement:") {
			lines = append(lines, l)
		}
	}
	t.Logf("the agent's starts:\n%s", strings.Join(lines, "\n"))
	t.Logf("placement test body %.1fs", time.Since(began).Seconds())
}

// checkNodeAccounting: Nomad's own view of the node: its live allocations
// hold no more than it offers, and no evaluation of the jobs' current
// versions is blocked (their first, gated versions' are: no node of the
// pool they were submitted to has GPUs).
func checkNodeAccounting(t *testing.T, c *api.Client, node string, capCPU, capMem int64, jobs ...string) {
	t.Helper()
	cpu, mem := nodeUsage(t, c, node)
	if cpu > capCPU || mem > capMem {
		t.Errorf("the node's allocations hold %d MHz and %d MB, it offers %d and %d", cpu, mem, capCPU, capMem)
	}
	t.Logf("node allocations: %d of %d MHz, %d of %d MB", cpu, capCPU, mem, capMem)
	for _, id := range jobs {
		job, _, err := c.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		evals, _, err := c.Jobs().Evaluations(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evals {
			if e.Status == "blocked" && e.JobModifyIndex == *job.JobModifyIndex {
				t.Errorf("blocked evaluation %s of %s (%v)", e.ID, id, e.FailedTGAllocs)
			}
		}
	}
}

package e2e

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// tenancyConfig: two quota-only VCs, each for one team's namespace; the
// agent watches every namespace.
const tenancyConfig = `vc "a" {
  gpus       = { v100 = 2 }
  namespaces = ["team-a"]
}
vc "b" {
  gpus       = { v100 = 2 }
  namespaces = ["team-b"]
}
nomad {
  namespace = "*"
}
`

// TestTenancyOnNomad (#18): namespaces team-a and team-b on a Nomad with
// ACLs, the agent's token from jobs/acl/rondo-allocator.policy.hcl as
// shipped, nomad { namespace = "*" }. A job of team-a naming VC a runs; a
// job of team-b naming VC a stays pending, rejected with the namespace
// reason (/v1/jobs/{id}, `rondo job status`, the pending metric); two jobs
// with one id in team-a and team-b are both scheduled, each in its own
// namespace, on distinct GPUs, and both report progress through the lease
// API (their workload identities name their namespaces).
func TestTenancyOnNomad(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 4)}, tenancyConfig)
	c := s.c.API
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := c.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	spec := func(id, ns, vc string) string {
		j := s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000000, 1)
		j = strings.Replace(j, `type = "batch"`, `type      = "batch"
  namespace = "`+ns+`"`, 1)
		j = strings.Replace(j, `"rondo.vc"    = "research"`, `"rondo.vc"    = "`+vc+`"`, 1)
		// Two namespaces' jobs of one id never share a checkpoint.
		return strings.Replace(j, "/${NOMAD_JOB_ID}", "/${NOMAD_NAMESPACE}/${NOMAD_JOB_ID}", 1)
	}
	s.submitSpec("train-a", spec("train", "team-a", "a"))
	s.submitSpec("train-b", spec("train", "team-b", "b"))
	s.submitSpec("sneak", spec("sneak", "team-b", "a"))
	a := s.startAgent("3s")

	live := func(ns, id string) []*api.AllocationListStub {
		// The allocations list carries their GPUs (resources=true).
		allocs, _, err := c.Allocations().List(&api.QueryOptions{Namespace: ns, Params: map[string]string{"resources": "true"}})
		if err != nil {
			return nil
		}
		var out []*api.AllocationListStub
		for _, al := range allocs {
			if al.JobID == id && al.Namespace == ns && al.DesiredStatus == "run" && al.ClientStatus == "running" {
				out = append(out, al)
			}
		}
		return out
	}
	var st agent.Status
	s.waitFor(40*time.Second, "train running in team-a and team-b, both reporting progress", func() (bool, error) {
		if len(live("team-a", "train")) != 1 || len(live("team-b", "train")) != 1 {
			return false, nil
		}
		st = s.status(a)
		n := 0
		for _, j := range st.Jobs {
			if (j.ID == "team-a/train" && j.Namespace == "team-a" || j.ID == "team-b/train" && j.Namespace == "team-b") &&
				j.State == "running" && j.RemainingSteps < j.TotalSteps {
				n++
			}
		}
		return n == 2, nil
	})
	ga, gb := allocGPUs(live("team-a", "train")[0]), allocGPUs(live("team-b", "train")[0])
	if len(ga) != 1 || len(gb) != 1 || ga[0] == gb[0] {
		t.Errorf("the two train jobs' GPUs: %v and %v", ga, gb)
	}

	// sneak never runs; its reason names its namespace and the VC.
	want := `namespace "team-b" may not use VC "a" (its namespaces: team-a)`
	if l := live("team-b", "sneak"); len(l) > 0 {
		t.Errorf("sneak runs in VC a from team-b: %d allocations", len(l))
	}
	var js agent.JobStatus
	if err := json.Unmarshal([]byte(s.get(a, "/v1/jobs/"+url.PathEscape("team-b/sneak"))), &js); err != nil {
		t.Fatal(err)
	}
	if js.State != "rejected" || js.PendingKind != "rejected" || js.Pending != want || js.Namespace != "team-b" || js.VC != "a" {
		t.Errorf("team-b/sneak: %+v", js)
	}
	cmd := exec.Command(s.bin+"/rondo", "job", "status", "-rondo-addr", "http://"+a.addr, "-token", s.token, "team-b/sneak")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Errorf("rondo job status team-b/sneak: %v\n%s", err, out)
	}
	if m := s.get(a, "/metrics"); !strings.Contains(m, `rondo_jobs_pending{reason="rejected"} 1`) {
		t.Errorf("metrics: no rejected job pending:\n%s", grepLines(m, "rondo_jobs_pending"))
	}
	if l := live("team-b", "sneak"); len(l) > 0 {
		t.Errorf("sneak runs in VC a from team-b: %d allocations", len(l))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

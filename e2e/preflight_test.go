package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestPreflightOnNomad (#18): `rondo config validate -nomad` (the real
// CLI) on the cells cluster with ACLs on passes with the allocator's token
// (every finding ok, its probe variable removed); with a config whose cells
// name a missing node pool and a missing node class, a token whose policy
// lacks submit-job and preemption off in the scheduler configuration it
// fails naming each. Then `rondo agent -dry-run` on the same cluster logs
// a plan admitting an opted-in job that stays pending: its Nomad job
// unchanged (same JobModifyIndex, no allocation), no state variable or
// leader lock written.
func TestPreflightOnNomad(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	api0 := s.c.API
	setPreemption := func(on bool) {
		t.Helper()
		conf := &api.SchedulerConfiguration{PreemptionConfig: api.PreemptionConfig{SystemSchedulerEnabled: true,
			BatchSchedulerEnabled: on, ServiceSchedulerEnabled: on}}
		if _, _, err := api0.Operator().SchedulerSetConfiguration(conf, nil); err != nil {
			t.Fatal(err)
		}
	}
	validate := func(token, cfg string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(s.bin, "rondo"), "config", "validate", "-nomad", "-address", s.c.Address, "-token", token, cfg)
		cmd.Env = cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "NOMAD_TOKEN"), "NOMAD_ADDR")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	finding := regexp.MustCompile(`^(ok|warning|error) +\S+ +`)
	lines := func(out, level string) []string {
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if m := finding.FindStringSubmatch(l); m != nil && (level == "" || m[1] == level) {
				got = append(got, l)
			}
		}
		return got
	}

	t.Run("Passes", func(t *testing.T) {
		setPreemption(true)
		code, out, errOut := validate(s.token, s.cfgPath)
		all := lines(out, "")
		if code != 0 || errOut != "" || len(all) < 10 || len(lines(out, "ok")) != len(all) {
			t.Fatalf("exit %d, want 0 with every finding ok:\n%s\nstderr: %s", code, out, errOut)
		}
		for _, want := range []string{`cell "v100-node" "a"`, "v100-a (2 v100)", "from nomad-device-rondo", `token "rondo-allocator"`,
			"token may submit-job", "token may variables list", "preemption is on", "passes"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if v, _, err := api0.Variables().Peek("rondo/allocator-preflight", nil); err != nil || v != nil {
			t.Errorf("the probe variable is left behind: %v %v", v, err)
		}
	})

	t.Run("Fails", func(t *testing.T) {
		rules, err := os.ReadFile(filepath.Join(moduleRoot(t), "jobs/acl/rondo-allocator.policy.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		restricted := strings.ReplaceAll(string(rules), `"submit-job", `, "")
		if restricted == string(rules) {
			t.Fatal("the policy has no submit-job to take away")
		}
		if _, err := api0.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rondo-no-submit", Rules: restricted}, nil); err != nil {
			t.Fatal(err)
		}
		tok, _, err := api0.ACLTokens().Create(&api.ACLToken{Name: "rondo-no-submit", Type: "client", Policies: []string{"rondo-no-submit"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(s.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(t.TempDir(), "bad.hcl")
		extra := "cell \"v100-node\" \"east\" {\n  node_pool = \"gpu-east\"\n}\ncell \"k80-node\" \"dgx\" {\n  node_class = \"dgx\"\n}\n"
		if err := os.WriteFile(bad, append(cfg, extra...), 0o644); err != nil {
			t.Fatal(err)
		}
		setPreemption(false)
		defer setPreemption(true)
		code, out, errOut := validate(tok.SecretID, bad)
		if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "fails 4 checks") {
			t.Errorf("exit %d, want 1 with one line on stderr naming 4 failed checks: %q", code, errOut)
		}
		errs := strings.Join(lines(out, "error"), "\n")
		for _, want := range []string{
			`cell "v100-node" "east" (` + bad + `:`, `node_pool "gpu-east" matches no node`, `no node is in pool "gpu-east"`,
			`cell "k80-node" "dgx"`, `node_class "dgx" matches no node`, `no node has class "dgx"`,
			`token lacks submit-job in namespace "default"`, "jobs/acl/rondo-allocator.policy.hcl",
			"preemption is off for batch and service jobs", "-preempt-batch-scheduler=true",
		} {
			if !strings.Contains(errs, want) {
				t.Errorf("the error lines lack %q:\n%s", want, out)
			}
		}
		if n := len(lines(out, "error")); n != 4 {
			t.Errorf("%d error lines, want 4:\n%s", n, out)
		}
	})

	t.Run("DryRun", func(t *testing.T) {
		const id = "preflight-dry"
		s.submit(id, "LM (batch size 20)", 100000, 1)
		before, _, err := api0.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := s.runAgent("-round", "2s", "-dry-run", "-lease-addr", s.leaseAddr)
		plans := regexp.MustCompile(`dry run: plan not enforced`)
		s.waitFor(30*time.Second, "two dry-run rounds", func() (bool, error) {
			return len(plans.FindAllString(a.logs(), -1)) >= 2, nil
		})
		logs := a.logs()
		admit := regexp.MustCompile(`dry run: would admit: job=` + id + ` vc=research type=(v100|k80) gpus=GPU-\S+ nodes=(v100-a|k80-a) reason=`)
		if n := len(admit.FindAllString(logs, -1)); n < 2 {
			t.Errorf("%d plan lines admitting %s with its GPUs, want one per round:\n%s", n, id, tail(logs, 3000))
		}
		if strings.Contains(logs, "lease API") || strings.Contains(logs, "leader lock acquired") {
			t.Errorf("a dry run served the lease API or took the leader lock:\n%s", tail(logs, 3000))
		}
		after, _, err := api0.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if *after.JobModifyIndex != *before.JobModifyIndex || *after.NodePool != *before.NodePool {
			t.Errorf("the job changed: modify index %d -> %d, pool %s -> %s", *before.JobModifyIndex, *after.JobModifyIndex, *before.NodePool, *after.NodePool)
		}
		if allocs, _, _ := api0.Jobs().Allocations(id, true, nil); len(allocs) != 0 {
			t.Errorf("the job has %d allocations", len(allocs))
		}
		vars, _, err := api0.Variables().PrefixList("rondo/", nil)
		if err != nil || len(vars) != 0 {
			t.Errorf("variables under rondo/ after a dry run: %v (%v)", vars, err)
		}
		a.stop()
	})
}

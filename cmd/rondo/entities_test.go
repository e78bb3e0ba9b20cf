package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/policies"
)

// TestJobRunEntity: the stanza's entity reaches the job's meta through
// `rondo job run -output` and reads back through PolicyFromMeta, as the
// Nomad backend reads it; a bad value is a file:line:col error.
func TestJobRunEntity(t *testing.T) {
	dir := t.TempDir()
	job := func(entity string) string {
		return "job \"x\" {\n  policy {\n    vc     = \"research\"\n    user   = \"alice\"\n    entity = " + entity +
			"\n  }\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config { command = \"/bin/true\" }\n" +
			"      resources {\n        device \"nvidia/gpu\" { count = 1 }\n      }\n    }\n  }\n}\n"
	}
	good := filepath.Join(dir, "good.nomad.hcl")
	os.WriteFile(good, []byte(job(`"team-a"`)), 0o644)
	code, out, errOut := runCaptured(t, "job", "run", "-output", good)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var wrap struct{ Job *api.Job }
	if err := json.Unmarshal([]byte(out), &wrap); err != nil {
		t.Fatal(err)
	}
	p, err := rhcl.PolicyFromMeta(wrap.Job.Meta)
	if err != nil || p.Entity != "team-a" || p.User != "alice" || wrap.Job.Meta["rondo.entity"] != "team-a" {
		t.Fatalf("policy %+v, %v from meta %v", p, err, wrap.Job.Meta)
	}
	bad := filepath.Join(dir, "bad.nomad.hcl")
	os.WriteFile(bad, []byte(job(`"team-a "`)), 0o644)
	code, _, errOut = runCaptured(t, "job", "run", "-output", bad)
	if code != 1 || !strings.Contains(errOut, "bad.nomad.hcl:5:14: Invalid entity") {
		t.Fatalf("bad entity: code %d, %q", code, errOut)
	}
}

// TestAgentEntities: the agent's config feeds the single engine its VC's
// entities (a fifo* policy is FIFO inside, any other fairness):
// entities a:1 and b:3 split one GPU 1:3 between a job of entity a and
// one whose user is b; a reload that changes them rebuilds the engine with
// a recompute at its first round.
func TestAgentEntities(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "agent.hcl")
	write := func(bWeight string) {
		os.WriteFile(cfgPath, []byte(`vc "research" {
  policy = "hierarchical"
  entity "a" {}
  entity "b" {
    weight = `+bWeight+`
  }
  entity "c" {
    policy = "fifo_perf"
  }
}
`), 0o644)
	}
	write("3")
	c := newAgentCmd()
	c.config = cfgPath
	s, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]policies.Entity{{"a": {Weight: 1, Policy: "fairness"}, "b": {Weight: 3, Policy: "fairness"},
		"c": {Weight: 1, Policy: "fifo"}}}
	if len(s.entities) != 1 || len(s.entities[0]) != 3 {
		t.Fatalf("entities %v", s.entities)
	}
	for n, e := range want[0] {
		if s.entities[0][n] != e {
			t.Errorf("entity %s = %+v, want %+v", n, s.entities[0][n], e)
		}
	}
	snap := &engine.Snapshot{GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}}}
	for _, j := range [][2]string{{"ja", "a"}, {"jb", ""}} {
		snap.Jobs = append(snap.Jobs, engine.Job{ID: j[0], Entity: j[1], User: "b", ScaleFactor: 1, Weight: 1,
			TotalSteps: 1e6, RemainingSteps: 1e6, Throughput: map[string]float64{"v100": 1}})
	}
	xa := func(e *engine.Engine) float64 {
		al := e.Allocation()
		for m, id := range al.JobIDs {
			if id == "ja" {
				return al.X[m][0]
			}
		}
		return -1
	}
	d, err := newDecider(s, hclog.NewNullLogger(), false)
	if err != nil {
		t.Fatal(err)
	}
	e := d.(*engine.Engine)
	if _, err := e.Round(snap); err != nil {
		t.Fatal(err)
	}
	if x := xa(e); math.Abs(x-0.25) > 1e-6 {
		t.Fatalf("X[ja] = %g, want 1/4", x)
	}
	// The reload: b weighs 1 now; the history is kept (same policy) but
	// the first round recomputes.
	write("1")
	ns, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := e.MarshalHistory()
	d2, err := newDecider(ns, hclog.NewNullLogger(), true)
	if err != nil {
		t.Fatal(err)
	}
	e2 := d2.(*engine.Engine)
	if err := e2.UnmarshalHistory(h); err != nil {
		t.Fatal(err)
	}
	snap.TimeS = 360
	p, err := e2.Round(snap)
	if err != nil {
		t.Fatal(err)
	}
	if x := xa(e2); !p.Recomputed || math.Abs(x-0.5) > 1e-6 {
		t.Fatalf("after the reload: recomputed %v, X[ja] = %g, want 1/2", p.Recomputed, x)
	}
}

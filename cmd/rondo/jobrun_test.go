package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	nomadb "github.com/rondo-sched/rondo/allocator/nomad"
)

func TestJobRunOutput(t *testing.T) {
	code, out, errOut := runCaptured(t, "job", "run", "-output", "testdata/train.nomad.hcl")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var wrap struct{ Job *api.Job }
	if err := json.Unmarshal([]byte(out), &wrap); err != nil {
		t.Fatal(err)
	}
	m := wrap.Job.Meta
	if m["rondo.vc"] != "research" || m["rondo.user"] != "alice" || m["rondo.steps"] != "200000" || m["rondo.model"] != "ResNet-50 (batch size 64)" {
		t.Fatalf("meta %v", m)
	}
	if *wrap.Job.ID != "resnet" || len(wrap.Job.TaskGroups) != 1 || wrap.Job.TaskGroups[0].Tasks[0].Resources.Devices[0].Name != "nvidia/gpu" {
		t.Fatalf("job not parsed whole: %s", out)
	}
}

func TestJobRunErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.nomad.hcl")
	os.WriteFile(bad, []byte("job \"x\" {\n  policy {\n    vc = \"a\"\n    priority = \"urgent\"\n  }\n}\n"), 0o644)
	code, _, errOut := runCaptured(t, "job", "run", "-output", bad)
	if code != 1 || !strings.Contains(errOut, "bad.nomad.hcl:4:") || !strings.Contains(errOut, "priority") {
		t.Fatalf("bad policy: code %d, %q", code, errOut)
	}
	conflict := filepath.Join(dir, "conflict.nomad.hcl")
	os.WriteFile(conflict, []byte("job \"x\" {\n  meta = { \"rondo.vc\" = \"other\" }\n  policy {\n    vc = \"a\"\n  }\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config { command = \"/bin/true\" }\n    }\n  }\n}\n"), 0o644)
	code, _, errOut = runCaptured(t, "job", "run", "-output", conflict)
	if code != 1 || !strings.Contains(errOut, "conflicts with the policy stanza") {
		t.Fatalf("conflict: code %d, %q", code, errOut)
	}
	code, _, errOut = runCaptured(t, "job", "run")
	if code != 1 || !strings.Contains(errOut, "exactly one job file") {
		t.Fatalf("no file: code %d, %q", code, errOut)
	}
}

// TestJobRunElastic: the elastic block becomes meta rondo.elastic; a bad
// range is reported at its file:line:field.
func TestJobRunElastic(t *testing.T) {
	code, out, errOut := runCaptured(t, "job", "run", "-output", "testdata/elastic.nomad.hcl")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var wrap struct{ Job *api.Job }
	if err := json.Unmarshal([]byte(out), &wrap); err != nil {
		t.Fatal(err)
	}
	if m := wrap.Job.Meta; m["rondo.elastic"] != "1:4" || m["rondo.vc"] != "research" {
		t.Fatalf("meta %v", m)
	}
	bad := filepath.Join(t.TempDir(), "bad.nomad.hcl")
	os.WriteFile(bad, []byte("job \"x\" {\n  policy {\n    vc = \"a\"\n    elastic {\n      min = 4\n      max = 2\n    }\n  }\n}\n"), 0o644)
	code, _, errOut = runCaptured(t, "job", "run", "-output", bad)
	if code != 1 || !strings.Contains(errOut, "bad.nomad.hcl:6:13") || !strings.Contains(errOut, "elastic max") {
		t.Fatalf("bad elastic: code %d, %q", code, errOut)
	}
}

// TestJobRunVars: -var, -var-file and NOMAD_VAR_* reach Nomad's HCL2
// parser as for nomad job run (-var wins over -var-file).
func TestJobRunVars(t *testing.T) {
	parse := func(args ...string) *api.Job {
		t.Helper()
		code, out, errOut := runCaptured(t, append([]string{"job", "run", "-output"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", args, code, errOut)
		}
		var wrap struct{ Job *api.Job }
		if err := json.Unmarshal([]byte(out), &wrap); err != nil {
			t.Fatal(err)
		}
		return wrap.Job
	}
	gpus := func(j *api.Job) uint64 { return *j.TaskGroups[0].Tasks[0].Resources.Devices[0].Count }
	j := parse("-var-file", "testdata/vars.hcl", "testdata/vars.nomad.hcl")
	if j.Meta["rondo.vc"] != "research" || gpus(j) != 2 {
		t.Fatalf("var file: meta %v, gpus %d", j.Meta, gpus(j))
	}
	j = parse("-var-file", "testdata/vars.hcl", "-var", "gpus=3", "-var", "vc=prod", "testdata/vars.nomad.hcl")
	if j.Meta["rondo.vc"] != "prod" || gpus(j) != 3 {
		t.Fatalf("-var over the file: meta %v, gpus %d", j.Meta, gpus(j))
	}
	t.Setenv("NOMAD_VAR_vc", "fromenv")
	if j = parse("testdata/vars.nomad.hcl"); j.Meta["rondo.vc"] != "fromenv" || gpus(j) != 1 {
		t.Fatalf("NOMAD_VAR_vc: meta %v, gpus %d", j.Meta, gpus(j))
	}
	code, _, errOut := runCaptured(t, "job", "run", "-output", "-var-file", "testdata/missing.hcl", "testdata/vars.nomad.hcl")
	if code != 1 || !strings.Contains(errOut, "missing.hcl") {
		t.Fatalf("missing var file: code %d, %q", code, errOut)
	}
}

// TestJobRunScalingWarnings: an autoscaled GPU group and a scaling block
// that disagrees with rondo.elastic are warned about on stderr; the job is
// still printed (and would be submitted).
func TestJobRunScalingWarnings(t *testing.T) {
	code, _, errOut := runCaptured(t, "job", "run", "-output", "testdata/autoscaled.nomad.hcl")
	if code != 0 || !strings.Contains(errOut, `warning: job "autoscaled" group "train": the Nomad Autoscaler also targets this group`) ||
		!strings.Contains(errOut, "rondo.elastic wins") {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCaptured(t, "job", "run", "-output", "testdata/scaling.nomad.hcl")
	if code != 0 || errOut != "" {
		t.Fatalf("scaling.nomad.hcl: code %d, stderr %q", code, errOut)
	}
}

// fakeNomad answers the two calls job run makes: GET /v1/job/ID (the job
// held, or 404) and PUT /v1/jobs (recorded; a check-index mismatch fails
// as Nomad fails it).
type fakeNomad struct {
	held     *api.Job
	reg      *api.JobRegisterRequest
	ns, tok  string
	getNS    string
	register int
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/job/"):
		f.getNS = r.URL.Query().Get("namespace")
		if f.held == nil {
			http.Error(w, "job not found", http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(f.held)
	case (r.Method == http.MethodPut || r.Method == http.MethodPost) && r.URL.Path == "/v1/jobs":
		f.register++
		f.ns, f.tok = r.URL.Query().Get("namespace"), r.Header.Get("X-Nomad-Token")
		f.reg = &api.JobRegisterRequest{}
		if err := json.NewDecoder(r.Body).Decode(f.reg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var cur uint64
		if f.held != nil {
			cur = *f.held.JobModifyIndex
		}
		if f.reg.EnforceIndex && f.reg.JobModifyIndex != cur {
			http.Error(w, fmt.Sprintf("%s %d: job exists with conflicting job modify index: %d", api.RegisterEnforceIndexErrPrefix, f.reg.JobModifyIndex, cur), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(api.JobRegisterResponse{EvalID: "eval-1"})
	default:
		http.NotFound(w, r)
	}
}

// TestJobRunSubmit: -namespace, -token (default $NOMAD_TOKEN) and
// -check-index reach Nomad's register API as for nomad job run.
func TestJobRunSubmit(t *testing.T) {
	f := &fakeNomad{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	t.Setenv("NOMAD_TOKEN", "env-token")
	t.Setenv("NOMAD_NAMESPACE", "")
	code, out, errOut := runCaptured(t, "job", "run", "-address", srv.URL, "-namespace", "team", "-token", "flag-token",
		"-check-index", "0", "-var", "vc=research", "testdata/vars.nomad.hcl")
	if code != 0 || !strings.Contains(out, `Job "vars" submitted (evaluation eval-1)`) {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	if f.ns != "team" || f.getNS != "team" || f.tok != "flag-token" || !f.reg.EnforceIndex || f.reg.JobModifyIndex != 0 ||
		f.reg.Job.Meta["rondo.vc"] != "research" {
		t.Fatalf("register: ns %q/%q token %q enforce %v@%d meta %v", f.ns, f.getNS, f.tok, f.reg.EnforceIndex, f.reg.JobModifyIndex, f.reg.Job.Meta)
	}
	// No -token: $NOMAD_TOKEN; no -check-index: no enforcement.
	code, _, errOut = runCaptured(t, "job", "run", "-address", srv.URL, "-var", "vc=research", "testdata/vars.nomad.hcl")
	if code != 0 || f.tok != "env-token" || f.reg.EnforceIndex {
		t.Fatalf("code %d (%s), token %q, enforce %v", code, errOut, f.tok, f.reg.EnforceIndex)
	}
	// The job exists now (index 7): -check-index 0 and 6 fail, 7 passes.
	idx := uint64(7)
	f.held = &api.Job{ID: strp("vars"), JobModifyIndex: &idx, Meta: map[string]string{"rondo.vc": "research"}}
	code, _, errOut = runCaptured(t, "job", "run", "-address", srv.URL, "-check-index", "6", "-var", "vc=research", "testdata/vars.nomad.hcl")
	if code != 1 || !strings.Contains(errOut, "Enforcing job modify index 6: job exists with conflicting job modify index: 7: job not updated") {
		t.Fatalf("stale index: code %d, %q", code, errOut)
	}
	code, _, errOut = runCaptured(t, "job", "run", "-address", srv.URL, "-check-index", "7", "-var", "vc=research", "testdata/vars.nomad.hcl")
	if code != 0 || f.reg.JobModifyIndex != 7 {
		t.Fatalf("current index: code %d, %q", code, errOut)
	}
	code, _, errOut = runCaptured(t, "job", "run", "-address", srv.URL, "-check-index", "x", "testdata/vars.nomad.hcl")
	if code != 1 || !strings.Contains(errOut, `-check-index "x"`) {
		t.Fatalf("bad index: code %d, %q", code, errOut)
	}
}

// TestJobRunAdmitted: re-running a job Rondo admitted keeps Rondo's count,
// pool, pins and task env (nomad.CarryPlacement) with the user's changes,
// enforcing the index read, so a round in between fails the update rather
// than being undone.
func TestJobRunAdmitted(t *testing.T) {
	code, out, errOut := runCaptured(t, "job", "run", "-output", "-var", "vc=research", "-var", "gpus=2", "testdata/vars.nomad.hcl")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var wrap struct{ Job *api.Job }
	json.Unmarshal([]byte(out), &wrap)
	held := wrap.Job
	held.Canonicalize()
	pool, prio, count, idx := "rondo", nomadb.GuaranteedPriority, 1, uint64(42)
	held.NodePool, held.Priority, held.JobModifyIndex = &pool, &prio, &idx
	held.Meta[nomadb.MetaGPUs] = "2"
	held.TaskGroups[0].Count = &count
	if err := nomadb.Pin(held, "train", engine.Assignment{GPUs: []string{"gpu-a", "gpu-b"}, Servers: []string{"node-1"}},
		func(string) string { return "node-1" }); err != nil {
		t.Fatal(err)
	}
	nomadb.AddTaskEnv(held, "train", "/ckpt", "http://lease:4701")
	f := &fakeNomad{held: held}
	srv := httptest.NewServer(f)
	defer srv.Close()
	code, out, errOut = runCaptured(t, "job", "run", "-address", srv.URL, "-var", "vc=research", "-var", "gpus=2", "testdata/vars.nomad.hcl")
	if code != 0 || !strings.Contains(out, "its count, GPUs, nodes and pool are kept") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	j := f.reg.Job
	tg := j.TaskGroups[0]
	if *j.NodePool != "rondo" || *tg.Count != 1 || j.Meta[nomadb.MetaGPUs] != "2" || !f.reg.EnforceIndex || f.reg.JobModifyIndex != 42 {
		t.Fatalf("pool %s count %d meta %v enforce %v@%d", *j.NodePool, *tg.Count, j.Meta, f.reg.EnforceIndex, f.reg.JobModifyIndex)
	}
	if len(tg.Constraints) != 1 || tg.Constraints[0].RTarget != "node-1" || tg.Tasks[0].Env[nomadb.CheckpointEnv] == "" {
		t.Fatalf("pins %+v env %v", tg.Constraints, tg.Tasks[0].Env)
	}
	dev := tg.Tasks[0].Resources.Devices[0]
	if len(dev.Constraints) != 1 || dev.Constraints[0].RTarget != "gpu-a,gpu-b" {
		t.Fatalf("device %+v", dev.Constraints)
	}
}

func strp(s string) *string { return &s }

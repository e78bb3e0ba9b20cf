package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
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

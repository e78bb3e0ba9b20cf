package hcl

import (
	"strings"
	"testing"
)

func TestTasksBlock(t *testing.T) {
	cfg, diags := LoadPath("testdata/tasks.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Tasks.CheckpointRoot != "/mnt/shared/rondo" || cfg.Tasks.LeaseAddress != "http://10.0.0.5:4701" {
		t.Errorf("tasks = %+v", cfg.Tasks)
	}
	// No block: nothing to add.
	cfg, diags = LoadPath("testdata/example.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Tasks.CheckpointRoot != "" || cfg.Tasks.LeaseAddress != "" {
		t.Errorf("example: tasks = %+v", cfg.Tasks)
	}
	for file, prefix := range map[string]string{
		"testdata/tasks_bad_root.hcl":  "testdata/tasks_bad_root.hcl:2:21: Invalid checkpoint_root; checkpoint_root = \"ckpt\" must be an absolute directory",
		"testdata/tasks_bad_lease.hcl": "testdata/tasks_bad_lease.hcl:3:21: Invalid lease_address; lease_address = \"http://0.0.0.0:4701\": tasks cannot dial 0.0.0.0",
		"testdata/tasks_no_port.hcl":   "testdata/tasks_no_port.hcl:2:19: Invalid lease_address; lease_address = \"10.0.0.5\" must be http://host:port",
		"testdata/tasks_duplicate.hcl": "testdata/tasks_duplicate.hcl:5:1: Duplicate tasks block; a tasks block is already declared at testdata/tasks_duplicate.hcl:1",
	} {
		_, diags := LoadPath(file)
		if msg := FormatDiagnostics(diags); !diags.HasErrors() || !strings.HasPrefix(msg, prefix) {
			t.Errorf("%s:\n got %q\nwant prefix %q", file, msg, prefix)
		}
	}
}

func TestCheckLeaseAddress(t *testing.T) {
	for _, ok := range []string{"http://10.0.0.5:4701", "https://alloc.example.com:443", "http://[fd00::1]:4701/"} {
		if err := CheckLeaseAddress(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "10.0.0.5:4701", "http://10.0.0.5", "ftp://h:1", "http://[::]:4701", "http://h:1/api", "http://h:1?x=1"} {
		if err := CheckLeaseAddress(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

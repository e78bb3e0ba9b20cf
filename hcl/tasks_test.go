package hcl

import "testing"

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
	// Malformed blocks: TestMalformed.
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

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCompletion(t *testing.T) {
	complete := func(line string) []string {
		t.Helper()
		t.Setenv("COMP_LINE", line)
		t.Setenv("COMP_POINT", "")
		code, out, errOut := runCaptured(t)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", line, code, errOut)
		}
		got := strings.Fields(out)
		slices.Sort(got) // map order
		return got
	}
	if got := complete("rondo sta"); !slices.Equal(got, []string{"status"}) {
		t.Errorf("subcommands: %v", got)
	}
	if got := complete("rondo agent -log-"); !slices.Equal(got, []string{"-log-json", "-log-level"}) {
		t.Errorf("agent flags: %v", got)
	}
	// Deprecated names are not offered; the views' TLS flags are.
	if got := complete("rondo status -"); slices.Contains(got, "-addr") || !slices.Contains(got, "-rondo-ca-cert") || !slices.Contains(got, "-rondo-addr") {
		t.Errorf("status flags: %v", got)
	}
	// File flags and file arguments complete file names.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cluster.hcl"), nil, 0o644)
	if got := complete("rondo agent -config " + dir + "/cl"); !slices.Equal(got, []string{dir + "/cluster.hcl"}) {
		t.Errorf("-config: %v", got)
	}
	if got := complete("rondo config validate " + dir + "/"); !slices.Contains(got, dir+"/cluster.hcl") {
		t.Errorf("config validate FILE: %v", got)
	}
	// -autocomplete-install is hashicorp/cli's own (it edits the real
	// user's rc files, found through the passwd entry, not $HOME: not run
	// here).
}

package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientBinary (#18): `make client` builds bin/rondo-client without
// cgo (a static executable: no interpreter, no shared libraries) and with
// the version stamped; it runs the client commands — version, policy list,
// config validate, status against a status server — and a command that
// solves fails at once with the clear error naming the full binary.
func TestClientBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := t.TempDir()
	mk := exec.Command("make", "-C", filepath.Join("..", ".."), "client", "BIN="+bin, "VERSION=v0.0.0-client-test")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make client: %v\n%s", err, out)
	}
	exe := filepath.Join(bin, "rondo-client")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := f.ImportedLibraries()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("rondo-client has a dynamic loader (not static)")
		}
	}
	f.Close()
	if len(libs) > 0 {
		t.Errorf("rondo-client links shared libraries: %v", libs)
	}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "RONDO_ADDR=", "NOMAD_TOKEN=")
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	if code, out, _ := run("version"); code != 0 || !strings.HasPrefix(out, "rondo v0.0.0-client-test (go") {
		t.Errorf("version: exit %d %q", code, out)
	}
	if code, out, _ := run("policy", "list"); code != 0 || !strings.Contains(out, "max_min_fairness") {
		t.Errorf("policy list: exit %d %q", code, out)
	}
	if code, out, errOut := run("config", "validate", "testdata/cluster.hcl"); code != 0 || !strings.Contains(out, ": ok (") {
		t.Errorf("config validate: exit %d %q %q", code, out, errOut)
	}
	srv, _ := viewServer(t, "")
	if code, out, errOut := run("status", "-rondo-addr", srv.URL); code != 0 || !strings.Contains(out, "Leader") {
		t.Errorf("status: exit %d %q %q", code, out, errOut)
	}
	// The other views and the job commands: no solver in them either.
	for _, view := range [][]string{{"job", "list"}, {"job", "status", "lm"}, {"vc", "status"}, {"node", "status"}} {
		if code, out, errOut := run(append(view, "-rondo-addr", srv.URL)...); code != 0 || out == "" {
			t.Errorf("%v: exit %d %q %q", view, code, out, errOut)
		}
	}
	// The preflight runs (its Nomad is not there: it says so), not refused
	// as a solving command.
	if code, _, errOut := run("config", "validate", "-nomad", "-address", "http://127.0.0.1:1", "testdata/cluster.hcl"); code != 1 ||
		strings.Contains(errOut, "without COIN-OR") || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("config validate -nomad: exit %d %q", code, errOut)
	}
	for _, solve := range [][]string{{"policy", "solve", "--policy", "max_min_fairness", "--input", "testdata/bad_problem.json"},
		{"agent", "-config", "testdata/cluster.hcl"}} {
		code, out, errOut := run(solve...)
		want := "rondo " + solve[0]
		if solve[0] == "policy" {
			want = "rondo policy solve"
		}
		want += ": built without COIN-OR Clp (-tags noclp): use the full rondo binary\n"
		if code != 1 || out != "" || errOut != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q", solve, code, out, errOut, want)
		}
	}
}

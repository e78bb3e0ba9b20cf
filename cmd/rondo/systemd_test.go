package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks jobs/deploy/rondo-agent.service with `systemd-analyze
// verify`, its ExecStart binary replaced by a real executable (this test's
// own binary: verify checks that it exists and is executable, not what it
// does). Any finding fails, warnings included (verify exits 0 on an unknown
// key but prints it). scripts/deps.sh installs systemd where the tool is
// missing and it runs as root, so `make test` does not skip this.
func TestSystemdUnit(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getuid() == 0 {
			t.Fatal("systemd-analyze is missing: run scripts/deps.sh (installs systemd)")
		}
		t.Skip("systemd-analyze is missing (scripts/deps.sh prints how to install it)")
	}
	unit, err := os.ReadFile("../../jobs/deploy/rondo-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart=/usr/local/bin/rondo agent ")) {
		t.Fatal("ExecStart no longer runs /usr/local/bin/rondo agent: update this test")
	}
	verify := func(text []byte) (string, error) {
		path := filepath.Join(t.TempDir(), "rondo-agent.service")
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(tool, "verify", path).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := verify(bytes.ReplaceAll(unit, []byte("/usr/local/bin/rondo"), []byte(self))); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check can fail: a misspelt key is reported.
	bad := bytes.Replace(bytes.ReplaceAll(unit, []byte("/usr/local/bin/rondo"), []byte(self)), []byte("KillSignal="), []byte("KilSignal="), 1)
	if out, _ := verify(bad); !strings.Contains(out, "KilSignal") {
		t.Errorf("a misspelt key was not reported: %q", out)
	}
}

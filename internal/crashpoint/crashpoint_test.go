package crashpoint

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in    string
		point string
		n     int64
		err   string
	}{
		{in: "enforce:3", point: Enforce, n: 3},
		{in: "record", point: Record, n: 1},
		{in: "enforce:0", err: "n >= 1"},
		{in: "enforce:x", err: "n >= 1"},
		{in: "nowhere:2", err: `unknown point "nowhere"`},
	} {
		p, n, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || p != c.point || n != c.n {
			t.Errorf("Parse(%q) = %q, %d, %v", c.in, p, n, err)
		}
	}
}

// TestHitKills runs this test binary as a child that hits a point three
// times with RONDO_CRASH_AT asking for the second: it dies by SIGKILL after
// the first hit's line and before the third's.
func TestHitKills(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") != "" {
		for i := 1; i <= 3; i++ {
			Hit(Decide)
			Hit(Enforce)
			println("passed", i)
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHitKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", Env+"=enforce:2")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child: %v, want killed\n%s", err, out)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, want SIGKILL\n%s", ws, out)
	}
	s := string(out)
	if !strings.Contains(s, "passed 1") || strings.Contains(s, "passed 2") || !strings.Contains(s, "crashpoint: SIGKILL at enforce:2") {
		t.Errorf("child output:\n%s", s)
	}
}

func TestUnsetIsInert(t *testing.T) {
	if os.Getenv(Env) != "" {
		t.Skip("set in the environment")
	}
	for i := 0; i < 10; i++ {
		Hit(Enforce) // returns
	}
}

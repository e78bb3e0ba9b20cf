package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	rhcl "github.com/rondo-sched/rondo/hcl"
)

func loadCfg(t *testing.T, src string) (*rhcl.Config, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := rhcl.LoadPath(p)
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	return cfg, p
}

const agentBlockCfg = `agent {
  bind_addr  = "0.0.0.0:5700"
  lease_addr = "0.0.0.0:5701"
  advertise  = "https://rondo.example:5700"
  pool       = "gpu"
  log_level  = "warn"
  log_json   = true
  round      = "2m"
}
high_availability {
  lock_path = "team/rondo-lock"
  lock_ttl  = "40s"
}
vc "r" {
  policy = "max_min_fairness_perf"
}
`

// The agent {} and high_availability {} blocks win over the flags'
// defaults; a flag given on the command line (its deprecated alias too)
// wins over the block.
func TestAgentBlockVsFlags(t *testing.T) {
	_, path := loadCfg(t, agentBlockCfg)
	type settings struct {
		bind, lease, advertise, pool, level string
		json                                bool
		round                               time.Duration
		lockPath                            string
		ttl                                 time.Duration
	}
	resolve := func(args ...string) settings {
		t.Helper()
		c := newAgentCmd()
		if code := c.parse(append([]string{"-config", path}, args...)); code >= 0 {
			t.Fatalf("parse %v: exit %d", args, code)
		}
		set := setFlags(c.flags)
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		c.applyAgentBlock(set, s.cfg.Agent)
		o := c.leaderOptions(set, s.cfg.HA, "default")
		return settings{c.addr, c.leaseAddr, c.advertise, c.pool, c.logLevel, c.logJSON, s.round, o.Path, o.TTL}
	}
	if g, want := resolve(), (settings{"0.0.0.0:5700", "0.0.0.0:5701", "https://rondo.example:5700", "gpu", "warn", true,
		2 * time.Minute, "team/rondo-lock", 40 * time.Second}); g != want {
		t.Fatalf("the blocks over the defaults:\n got %+v\nwant %+v", g, want)
	}
	g := resolve("-bind-addr", "127.0.0.1:1", "-lease-addr", "127.0.0.1:2", "-advertise", "http://x:1", "-pool", "p",
		"-log-level", "debug", "-log-json=false", "-round", "5s", "-leader-ttl", "12s")
	if want := (settings{"127.0.0.1:1", "127.0.0.1:2", "http://x:1", "p", "debug", false, 5 * time.Second, "team/rondo-lock", 12 * time.Second}); g != want {
		t.Fatalf("flags over the blocks:\n got %+v\nwant %+v", g, want)
	}
	// A flag set to its default value is still set: it wins.
	if g := resolve("-pool", "rondo", "-log-level", "info"); g.pool != "rondo" || g.level != "info" || g.bind != "0.0.0.0:5700" {
		t.Fatalf("flags at their defaults: %+v", g)
	}
	// The deprecated -addr is -bind-addr.
	if g := resolve("-addr", "127.0.0.1:3"); g.bind != "127.0.0.1:3" {
		t.Fatalf("-addr: %+v", g)
	}

	// Without the blocks: the flags' defaults; the lock next to the state.
	_, bare := loadCfg(t, "vc \"r\" {\n  policy = \"max_min_fairness_perf\"\n}\n")
	c := newAgentCmd()
	if code := c.parse([]string{"-config", bare, "-state-path", "x/state"}); code >= 0 {
		t.Fatal("parse")
	}
	set := setFlags(c.flags)
	s, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	c.applyAgentBlock(set, s.cfg.Agent)
	o := c.leaderOptions(set, s.cfg.HA, "")
	if c.addr != "127.0.0.1:4700" || c.leaseAddr != "" || c.pool != "rondo" || c.logLevel != "info" || c.logJSON ||
		o.Path != "x/state-leader" || o.TTL != 15*time.Second {
		t.Fatalf("defaults: %+v %+v", c, o)
	}
}

// A reload names what it cannot apply; decider changes are not listed.
func TestNeedRestart(t *testing.T) {
	old, _ := loadCfg(t, agentBlockCfg)
	same, _ := loadCfg(t, "# a comment moves every line\n"+strings.Replace(agentBlockCfg, `"max_min_fairness_perf"`, `"fifo"`, 1))
	if w := needRestart(old, same); len(w) != 0 {
		t.Fatalf("nothing to restart for, got %v", w)
	}
	changed, _ := loadCfg(t, strings.NewReplacer(`"0.0.0.0:5701"`, `"0.0.0.0:5702"`, `"gpu"`, `"gpu2"`, `"40s"`, `"50s"`).Replace(agentBlockCfg)+
		"nomad {\n  address = \"https://n:4646\"\n}\n")
	if w, want := needRestart(old, changed), []string{"agent.lease_addr", "agent.pool", "high_availability", "nomad"}; !reflect.DeepEqual(w, want) {
		t.Fatalf("needRestart = %v, want %v", w, want)
	}
	if n := restartNote([]string{"tls"}); !strings.Contains(n, "need a restart") || !strings.Contains(n, "tls") {
		t.Fatalf("note %q", n)
	}
}

// Config warnings are printed as "warning: file:line:col: ..." by
// `config validate` (which succeeds) and the agent (before it goes on).
func TestConfigWarnings(t *testing.T) {
	_, path := loadCfg(t, "round_seconds = 4\nvc \"r\" {\n  policy = \"max_min_fairness_perf\"\n}\n")
	want := "warning: " + path + ":1:1: Deprecated round_seconds"
	code, out, errOut := runCaptured(t, "config", "validate", path)
	if code != 0 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, `agent { round = "4s" }`) || !strings.Contains(out, "ok") {
		t.Fatalf("config validate: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// The agent prints it, then fails on the unreachable Nomad.
	code, _, errOut = runCaptured(t, "agent", "-config", path, "-address", "http://127.0.0.1:1")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], want) || !strings.HasPrefix(lines[1], "rondo agent: ") {
		t.Fatalf("agent: exit %d\n%s", code, errOut)
	}
}

// Package e2e holds end-to-end tests against a real Nomad agent.
//
// The harness (this file) finds or builds the nomad binary, builds plugins,
// and runs a single-node Nomad (server + client) on free loopback ports:
//
//	a := StartAgent(t, AgentOptions{PluginDir: dir, Plugins: map[string]string{"nomad-device-rondo": cfg}})
//	c := a.Client() // *api.Client
//
// Cleanup is registered on t: it purges every job, garbage-collects the
// client's allocations, stops the agent and kills task, executor and logmon
// processes left behind under the agent's directory.
package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// NomadVersion is the version the harness builds when it must.
const NomadVersion = "1.11.3"

// AgentOptions configures StartAgent.
type AgentOptions struct {
	// Name of the node; default "rondo-e2e".
	Name string
	// PluginDir is the agent's plugin_dir (plugin binaries); optional.
	PluginDir string
	// Plugins maps a plugin name to the HCL body of its `config { }` block.
	// Since Nomad 1.10 a plugin in PluginDir runs only if named here.
	Plugins map[string]string
	// ClientHCL is added inside the client { } block.
	ClientHCL string
	// ExtraHCL is appended to the agent config.
	ExtraHCL string
	// StartTimeout bounds the wait for a ready node; default 90s.
	StartTimeout time.Duration
	// ACL enables ACLs; StartAgent bootstraps them and gives Client() the
	// management token (also in Agent.ManagementToken).
	ACL bool
}

// Agent is a running Nomad agent.
type Agent struct {
	t        testing.TB
	Dir      string // holds config, data dir, log
	HTTPAddr string
	cmd      *exec.Cmd
	done     chan struct{}
	client   *api.Client
	logPath  string
	stopOnce sync.Once
	// ManagementToken is the bootstrap token's secret when ACLs are on.
	ManagementToken string
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func nomadWorks(path string) bool {
	out, err := exec.Command(path, "version").CombinedOutput()
	return err == nil && strings.Contains(string(out), "Nomad v")
}

var nomadOnce struct {
	sync.Once
	path string
	err  string
}

// NomadBinary returns a nomad binary: $NOMAD_BIN, /tmp/nomad-bin, a cached
// build, `nomad` on PATH, or else it builds Nomad v1.11.3 from the module
// cache into the user cache dir (minutes). It skips the test only if none can
// be had.
func NomadBinary(t testing.TB) string {
	t.Helper()
	nomadOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		cached := filepath.Join(cache, "rondo-e2e", "nomad-"+NomadVersion)
		candidates := []string{os.Getenv("NOMAD_BIN"), "/tmp/nomad-bin", cached}
		if p, err := exec.LookPath("nomad"); err == nil {
			candidates = append(candidates, p)
		}
		for _, c := range candidates {
			if c != "" && nomadWorks(c) {
				nomadOnce.path = c
				return
			}
		}
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
			nomadOnce.err = err.Error()
			return
		}
		tmp := fmt.Sprintf("%s.tmp-%d", cached, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/hashicorp/nomad")
		cmd.Dir = moduleRoot(t)
		t.Logf("building nomad %s into %s (several minutes)", NomadVersion, cached)
		if out, err := cmd.CombinedOutput(); err != nil {
			nomadOnce.err = fmt.Sprintf("go build github.com/hashicorp/nomad: %v\n%s", err, tail(string(out), 2000))
			return
		}
		if err := os.Rename(tmp, cached); err != nil {
			nomadOnce.err = err.Error()
			return
		}
		nomadOnce.path = cached
	})
	if nomadOnce.path == "" {
		t.Skipf("no nomad binary: set NOMAD_BIN, or let the harness build it (failed: %s)", nomadOnce.err)
	}
	return nomadOnce.path
}

// BuildPlugin builds the main package pkg (relative to the module root, e.g.
// "./cmd/nomad-device-rondo") into dir and returns the binary's path.
func BuildPlugin(t testing.TB, pkg, dir string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = moduleRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, tail(string(b), 3000))
	}
	return out
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func quote(s string) string { return strconv.Quote(s) }

// StartAgent starts a single-node Nomad (server and client, raw_exec
// enabled, cloud fingerprinters denied) and waits until its node is ready.
func StartAgent(t testing.TB, opts AgentOptions) *Agent {
	t.Helper()
	bin := NomadBinary(t)
	if opts.Name == "" {
		opts.Name = "rondo-e2e"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	dir, err := os.MkdirTemp("", "rondo-e2e-nomad-")
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 3)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "name = %s\ndata_dir = %s\nbind_addr = \"127.0.0.1\"\nlog_level = \"DEBUG\"\ndisable_update_check = true\n",
		quote(opts.Name), quote(filepath.Join(dir, "data")))
	if opts.PluginDir != "" {
		fmt.Fprintf(&cfg, "plugin_dir = %s\n", quote(opts.PluginDir))
	}
	fmt.Fprintf(&cfg, "ports {\n  http = %d\n  rpc = %d\n  serf = %d\n}\n", p[0], p[1], p[2])
	cfg.WriteString("advertise {\n  http = \"127.0.0.1\"\n  rpc = \"127.0.0.1\"\n  serf = \"127.0.0.1\"\n}\n")
	cfg.WriteString("server {\n  enabled = true\n  bootstrap_expect = 1\n}\n")
	cfg.WriteString("client {\n  enabled = true\n  options {\n    \"fingerprint.denylist\" = \"env_aws,env_gce,env_azure,env_digitalocean\"\n  }\n")
	cfg.WriteString(opts.ClientHCL + "\n}\n")
	cfg.WriteString("consul {\n  client_auto_join = false\n  server_auto_join = false\n  auto_advertise = false\n}\n")
	cfg.WriteString("plugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n")
	for name, body := range opts.Plugins {
		fmt.Fprintf(&cfg, "plugin %s {\n  config {\n%s\n  }\n}\n", quote(name), body)
	}
	if opts.ACL {
		cfg.WriteString("acl {\n  enabled = true\n}\n")
	}
	cfg.WriteString(opts.ExtraHCL + "\n")
	cfgPath := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = withoutEnv(os.Environ(), "AWS_CA_BUNDLE")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nomad: %v", err)
	}
	a := &Agent{t: t, Dir: dir, HTTPAddr: fmt.Sprintf("http://127.0.0.1:%d", p[0]), cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() { cmd.Wait(); logf.Close(); close(a.done) }()
	t.Cleanup(a.Stop)
	c, err := api.NewClient(&api.Config{Address: a.HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	a.client = c
	if opts.ACL {
		// Every other call is refused until the bootstrap token exists.
		a.WaitFor(opts.StartTimeout, "ACL bootstrap", func() (bool, error) {
			select {
			case <-a.done:
				return false, fmt.Errorf("nomad agent exited")
			default:
			}
			tok, _, err := c.ACLTokens().Bootstrap(nil)
			if err != nil {
				return false, nil
			}
			a.ManagementToken = tok.SecretID
			c.SetSecretID(tok.SecretID)
			return true, nil
		})
	}
	a.WaitFor(opts.StartTimeout, "node ready", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("nomad agent exited")
		default:
		}
		nodes, _, err := c.Nodes().List(nil)
		if err != nil {
			return false, nil
		}
		return len(nodes) == 1 && nodes[0].Status == "ready", nil
	})
	return a
}

func withoutEnv(env []string, key string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}

// Client is an API client for the agent.
func (a *Agent) Client() *api.Client { return a.client }

// Logs returns the agent's log so far.
func (a *Agent) Logs() string {
	b, _ := os.ReadFile(a.logPath)
	return string(b)
}

// WaitFor polls f every 250ms until it returns true; an error from f or the
// timeout fails the test (with the agent's log tail).
func (a *Agent) WaitFor(timeout time.Duration, what string, f func() (bool, error)) {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil {
			a.t.Fatalf("waiting for %s: %v\nagent log tail:\n%s", what, err, tail(a.Logs(), 4000))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("timed out after %v waiting for %s\nagent log tail:\n%s", timeout, what, tail(a.Logs(), 4000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Node returns the (only) node with its resources.
func (a *Agent) Node() *api.Node {
	a.t.Helper()
	nodes, _, err := a.client.Nodes().List(nil)
	if err != nil || len(nodes) == 0 {
		a.t.Fatalf("list nodes: %v (%d nodes)", err, len(nodes))
	}
	n, _, err := a.client.Nodes().Info(nodes[0].ID, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	return n
}

// WaitForNode waits until cond holds for the node.
func (a *Agent) WaitForNode(timeout time.Duration, what string, cond func(*api.Node) bool) *api.Node {
	a.t.Helper()
	var n *api.Node
	a.WaitFor(timeout, what, func() (bool, error) {
		n = a.Node()
		return cond(n), nil
	})
	return n
}

// Stop purges jobs, collects allocations, stops the agent and kills any
// process left under its directory. It is idempotent and registered as
// cleanup by StartAgent.
func (a *Agent) Stop() {
	a.stopOnce.Do(func() {
		alive := func() bool {
			select {
			case <-a.done:
				return false
			default:
				return true
			}
		}
		if alive() {
			a.purgeJobs()
		}
		if a.t.Failed() {
			a.t.Logf("agent log tail (%s):\n%s", a.logPath, tail(a.Logs(), 6000))
		}
		if alive() {
			a.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-a.done:
			case <-time.After(20 * time.Second):
				a.cmd.Process.Kill()
				<-a.done
			}
		}
		// The agent's process group: logmon and executors it started.
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		killUnder(a.Dir)
		unmountUnder(a.Dir)
		if err := os.RemoveAll(a.Dir); err != nil {
			a.t.Logf("leaving %s: %v", a.Dir, err)
		}
	})
}

func (a *Agent) purgeJobs() {
	c := a.client
	jobs, _, err := c.Jobs().List(nil)
	if err != nil {
		return
	}
	for _, j := range jobs {
		c.Jobs().Deregister(j.ID, true, nil)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		allocs, _, err := c.Allocations().List(nil)
		if err != nil {
			break
		}
		running := 0
		for _, al := range allocs {
			if al.ClientStatus == "running" || al.ClientStatus == "pending" {
				running++
			}
		}
		if running == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if nodes, _, err := c.Nodes().List(nil); err == nil {
		for _, n := range nodes {
			c.Nodes().GC(n.ID, nil)
		}
	}
}

// killUnder kills processes whose command line or environment mentions dir
// (task processes carry NOMAD_ALLOC_DIR, executors their log paths).
func killUnder(dir string) {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err == nil && bytes.Contains(b, []byte(dir+"/")) {
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// unmountUnder detaches mounts (e.g. secrets tmpfs) below dir.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Package e2e holds end-to-end tests against a real Nomad agent.
//
// The harness (this file) finds or builds the nomad binary, builds plugins,
// and runs a single-node Nomad (server + client) on free loopback ports,
// with the process and config logic of package e2e/cluster (which also
// starts multi-client clusters for the allocator tests and the demo):
//
//	a := StartAgent(t, AgentOptions{PluginDir: dir, Plugins: map[string]string{"nomad-device-rondo": cfg}})
//	c := a.Client() // *api.Client
//
// Cleanup is registered on t: it purges every job, garbage-collects the
// client's allocations, stops the agent and kills task, executor and logmon
// processes left behind under the agent's directory.
package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// NomadVersion is the version the harness builds when it must.
const NomadVersion = cluster.NomadVersion

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
	proc     *cluster.Process
	client   *api.Client
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
	root, err := cluster.ModuleRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var nomadOnce struct {
	sync.Once
	path string
	err  error
}

// NomadBinary returns a nomad binary: $NOMAD_BIN, /tmp/nomad-bin, a cached
// build, `nomad` on PATH, or else it builds Nomad v1.11.3 from the module
// cache into the user cache dir (minutes). It skips the test only if none can
// be had.
func NomadBinary(t testing.TB) string {
	t.Helper()
	nomadOnce.Do(func() {
		nomadOnce.path, nomadOnce.err = cluster.FindNomad(moduleRoot(t), true)
	})
	if nomadOnce.path == "" {
		t.Skipf("no nomad binary: set NOMAD_BIN, or let the harness build it (failed: %v)", nomadOnce.err)
	}
	return nomadOnce.path
}

// fakeGPUCluster starts a local Nomad cluster as o says (its clients' GPUs
// from the fake-GPU device plugin, built here) in a new directory named
// prefix* under the system's temp dir, stopped and removed when the test
// ends.
func fakeGPUCluster(t *testing.T, prefix string, o cluster.Options) *cluster.Cluster {
	t.Helper()
	o.Nomad = NomadBinary(t)
	o.PluginDir = filepath.Join(t.TempDir(), "plugins")
	BuildPlugin(t, "./cmd/nomad-device-rondo", o.PluginDir)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	o.Dir = dir
	c, err := cluster.Start(o)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		os.RemoveAll(dir)
	})
	return c
}

// BuildPlugin builds the main package pkg (relative to the module root, e.g.
// "./cmd/nomad-device-rondo") into dir and returns the binary's path. Each
// package is built once per test binary (builds.dir) and linked into dir:
// linking rondo with cgo took about 5 s per test, minutes over the suite.
func BuildPlugin(t testing.TB, pkg, dir string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	built, err := builtBinary(moduleRoot(t), pkg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(built, out); err != nil {
		// Another file system: a copy.
		b, rerr := os.ReadFile(built)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(out, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// builds holds the binaries built by this test process, removed by TestMain.
var builds struct {
	sync.Mutex
	dir  string
	done map[string]string // package -> binary
}

func builtBinary(root, pkg string) (string, error) {
	builds.Lock()
	defer builds.Unlock()
	if p, ok := builds.done[pkg]; ok {
		return p, nil
	}
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "rondo-e2e-bin-")
		if err != nil {
			return "", err
		}
		builds.dir, builds.done = d, map[string]string{}
	}
	out := filepath.Join(builds.dir, strconv.Itoa(len(builds.done)), filepath.Base(pkg))
	if err := cluster.Build(root, pkg, out); err != nil {
		return "", err
	}
	builds.done[pkg] = out
	return out, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

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
	p, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := cluster.StartProcess(bin, dir, cluster.AgentConfig{Name: opts.Name, PluginDir: opts.PluginDir,
		HTTP: p[0], RPC: p[1], Serf: p[2], Server: true, Client: true, Plugins: opts.Plugins,
		ClientHCL: opts.ClientHCL, ExtraHCL: opts.ExtraHCL, ACL: opts.ACL})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{t: t, Dir: dir, HTTPAddr: proc.HTTPAddr, proc: proc}
	t.Cleanup(a.Stop)
	c, err := api.NewClient(&api.Config{Address: a.HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	a.client = c
	if opts.ACL {
		// Every other call is refused until the bootstrap token exists.
		a.WaitFor(opts.StartTimeout, "ACL bootstrap", func() (bool, error) {
			if !proc.Alive() {
				return false, fmt.Errorf("nomad agent exited")
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
		if !proc.Alive() {
			return false, fmt.Errorf("nomad agent exited")
		}
		nodes, _, err := c.Nodes().List(nil)
		if err != nil {
			return false, nil
		}
		return len(nodes) == 1 && nodes[0].Status == "ready", nil
	})
	return a
}

// Client is an API client for the agent.
func (a *Agent) Client() *api.Client { return a.client }

// Logs returns the agent's log so far.
func (a *Agent) Logs() string { return a.proc.Logs() }

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
		if a.proc.Alive() {
			cluster.PurgeJobs(a.client, 20*time.Second)
		}
		if a.t.Failed() {
			a.t.Logf("agent log tail (%s):\n%s", a.proc.LogPath, tail(a.Logs(), 6000))
		}
		a.proc.Stop(20 * time.Second)
		cluster.KillUnder(a.Dir)
		cluster.UnmountUnder(a.Dir)
		if err := os.RemoveAll(a.Dir); err != nil {
			a.t.Logf("leaving %s: %v", a.Dir, err)
		}
	})
}

func tail(s string, n int) string { return cluster.Tail(s, n) }

func quote(s string) string { return strconv.Quote(s) }

// Package cluster runs Nomad agents on one machine for tests and the demo:
// a single combined agent (StartAgent) or one server plus N clients in
// Rondo's GPU node pool, each client with its own fake GPUs (Start).
//
// Every agent lives under one root directory (config, data dir, log), so
// that Stop can find the task, executor and logmon processes Nomad leaves
// behind (they outlive a killed agent) by their command line or environment.
package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"
)

// NomadVersion is the version FindNomad builds when it must.
const NomadVersion = "1.11.3"

// GPUPool is the node pool Rondo's GPU clients join.
const GPUPool = "rondo"

// ModuleRoot is the directory holding go.mod, searched upwards from dir.
func ModuleRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

func nomadWorks(path string) bool {
	out, err := exec.Command(path, "version").CombinedOutput()
	return err == nil && strings.Contains(string(out), "Nomad v")
}

// FindNomad returns a working nomad binary: $NOMAD_BIN, the extra paths
// given, /tmp/nomad-bin, a cached build, `nomad` on PATH; with build set it
// otherwise builds Nomad from the module cache (minutes) into the cache.
func FindNomad(moduleRoot string, build bool, extra ...string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cached := filepath.Join(cache, "rondo-e2e", "nomad-"+NomadVersion)
	candidates := append([]string{os.Getenv("NOMAD_BIN")}, extra...)
	candidates = append(candidates, "/tmp/nomad-bin", cached)
	if p, err := exec.LookPath("nomad"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c != "" && nomadWorks(c) {
			return c, nil
		}
	}
	if !build {
		return "", errors.New("no nomad binary (set NOMAD_BIN)")
	}
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", cached, os.Getpid())
	if err := Build(moduleRoot, "github.com/hashicorp/nomad", tmp); err != nil {
		return "", err
	}
	return cached, os.Rename(tmp, cached)
}

// Build runs `go build -o out pkg` in the module root.
func Build(moduleRoot, pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = moduleRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, Tail(string(b), 3000))
	}
	return nil
}

// FreePorts returns n loopback ports that were free a moment ago, for
// agents and servers the caller starts next. They come from 10000–19999,
// below the kernel's ephemeral range (32768–60999 by default; where a bind
// to port 0 and every outgoing connection take their local port, so a
// port free a moment ago can be anyone's before the agent binds it: a CI
// run lost an agent to "address already in use" that way, four clusters
// starting at once) and below Nomad's dynamic ports (20000–32000). In
// this process each port is handed out once (until the range wraps), and
// only after binding it on TCP and UDP (serf uses both) succeeded; the
// walk starts at an offset from the process id, so two test processes
// seldom walk the same ports.
func FreePorts(n int) ([]int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	if portNext == 0 {
		portNext = portLo + os.Getpid()%(portHi-portLo)
		portEphLo, portEphHi = ephemeralRange()
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == portHi-portLo {
			return nil, fmt.Errorf("no free port in %d-%d", portLo, portHi-1)
		}
		p := portNext
		portNext++
		if portNext == portHi {
			portNext = portLo
		}
		if p >= portEphLo && p <= portEphHi {
			continue
		}
		if portFree(p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

const portLo, portHi = 10000, 20000

var (
	portMu               sync.Mutex
	portNext             int
	portEphLo, portEphHi int
)

// portFree reports whether p can be bound on 127.0.0.1, TCP and UDP.
func portFree(p int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// ephemeralRange is the kernel's local port range (the Linux default when
// it cannot be read).
func ephemeralRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil {
				return lo, hi
			}
		}
	}
	return 32768, 60999
}

// AgentConfig describes one agent's configuration file.
type AgentConfig struct {
	Name      string
	DataDir   string
	PluginDir string
	HTTP      int
	RPC       int
	Serf      int
	Server    bool
	// Client enables the client; Servers are its RPC addresses (empty for a
	// combined agent).
	Client   bool
	Servers  []string
	NodePool string
	// CPUTotalCompute (MHz) and MemoryTotalMB split the host between clients
	// that would otherwise each fingerprint all of it (0: fingerprint).
	CPUTotalCompute int
	MemoryTotalMB   int
	// Meta is the client's node meta.
	Meta map[string]string
	// Plugins maps a plugin name to the HCL body of its config { } block.
	Plugins map[string]string
	// ServerHCL goes inside server { }, ClientHCL inside client { },
	// ExtraHCL at the end.
	ServerHCL string
	ClientHCL string
	ExtraHCL  string
	LogLevel  string
	// ACL turns ACLs on (the caller bootstraps them).
	ACL bool
	// TLS, when set, adds Nomad's tls {} block (the server's pair for a
	// server, the clients' otherwise); the HTTP address is then https.
	TLS *TLS
}

func quote(s string) string { return strconv.Quote(s) }

// HCL renders the configuration.
func (c AgentConfig) HCL() string {
	var b strings.Builder
	level := c.LogLevel
	if level == "" {
		level = "DEBUG"
	}
	fmt.Fprintf(&b, "name = %s\ndata_dir = %s\nbind_addr = \"127.0.0.1\"\nlog_level = %s\ndisable_update_check = true\n",
		quote(c.Name), quote(c.DataDir), quote(level))
	if c.PluginDir != "" {
		fmt.Fprintf(&b, "plugin_dir = %s\n", quote(c.PluginDir))
	}
	fmt.Fprintf(&b, "ports {\n  http = %d\n  rpc = %d\n  serf = %d\n}\n", c.HTTP, c.RPC, c.Serf)
	b.WriteString("advertise {\n  http = \"127.0.0.1\"\n  rpc = \"127.0.0.1\"\n  serf = \"127.0.0.1\"\n}\n")
	if c.Server {
		b.WriteString("server {\n  enabled = true\n  bootstrap_expect = 1\n" + c.ServerHCL + "\n}\n")
	}
	if c.Client {
		b.WriteString("client {\n  enabled = true\n")
		if len(c.Servers) > 0 {
			qs := make([]string, len(c.Servers))
			for i, s := range c.Servers {
				qs[i] = quote(s)
			}
			fmt.Fprintf(&b, "  servers = [%s]\n", strings.Join(qs, ", "))
		}
		if c.NodePool != "" {
			fmt.Fprintf(&b, "  node_pool = %s\n", quote(c.NodePool))
		}
		if c.CPUTotalCompute > 0 {
			fmt.Fprintf(&b, "  cpu_total_compute = %d\n", c.CPUTotalCompute)
		}
		if c.MemoryTotalMB > 0 {
			fmt.Fprintf(&b, "  memory_total_mb = %d\n", c.MemoryTotalMB)
		}
		// This environment sets AWS_CA_BUNDLE, which crashes the cloud
		// fingerprinters; they have nothing to find on a laptop anyway.
		b.WriteString("  options {\n    \"fingerprint.denylist\" = \"env_aws,env_gce,env_azure,env_digitalocean\"\n  }\n")
		if len(c.Meta) > 0 {
			b.WriteString("  meta {\n")
			for _, k := range sortedKeys(c.Meta) {
				fmt.Fprintf(&b, "    %s = %s\n", quote(k), quote(c.Meta[k]))
			}
			b.WriteString("  }\n")
		}
		b.WriteString(c.ClientHCL + "\n}\n")
		b.WriteString("plugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n")
		for _, name := range sortedKeys(c.Plugins) {
			fmt.Fprintf(&b, "plugin %s {\n  config {\n%s\n  }\n}\n", quote(name), c.Plugins[name])
		}
	}
	b.WriteString("consul {\n  client_auto_join = false\n  server_auto_join = false\n  auto_advertise = false\n}\n")
	if c.ACL {
		b.WriteString("acl {\n  enabled = true\n}\n")
	}
	if c.TLS != nil {
		b.WriteString(c.TLS.hcl(c.Server))
	}
	b.WriteString(c.ExtraHCL + "\n")
	return b.String()
}

// Process is one running nomad agent.
type Process struct {
	Name     string
	Dir      string
	HTTPAddr string
	RPCAddr  string
	LogPath  string
	bin      string
	cfg      AgentConfig
	cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
}

// StartProcess writes cfg under dir (created) and starts `nomad agent`.
func StartProcess(bin, dir string, cfg AgentConfig) (*Process, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	cfgPath := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(cfg.HCL()), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "agent", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = WithoutEnv(os.Environ(), "AWS_CA_BUNDLE")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start nomad: %w", err)
	}
	p := &Process{bin: bin, cfg: cfg, Name: cfg.Name, Dir: dir, HTTPAddr: fmt.Sprintf("http://127.0.0.1:%d", cfg.HTTP),
		RPCAddr: fmt.Sprintf("127.0.0.1:%d", cfg.RPC), LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	if cfg.TLS != nil {
		p.HTTPAddr = httpsAddr(p.HTTPAddr)
	}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

// Alive reports whether the agent process is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Logs returns the agent's log so far.
func (p *Process) Logs() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Stop interrupts the agent (killing it after the timeout) and its process
// group. It is idempotent.
func (p *Process) Stop(timeout time.Duration) {
	p.stopOnce.Do(func() {
		if p.Alive() {
			p.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.done:
			case <-time.After(timeout):
				p.cmd.Process.Kill()
				<-p.done
			}
		}
		// The agent's process group: logmon and executors it started.
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	})
}

// Kill sends SIGKILL to the agent and its process group and waits for it:
// a machine lost, not a shutdown (the tasks it started are the caller's to
// kill, see KillUnder).
func (p *Process) Kill() {
	p.stopOnce.Do(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Process.Kill()
		<-p.done
	})
}

// Restart starts a stopped agent again with the same configuration, ports
// and data directory (a server keeps its Raft state, a client its node id).
func (p *Process) Restart() (*Process, error) {
	if p.Alive() {
		return nil, fmt.Errorf("agent %s is still running", p.Name)
	}
	// Keep the old log: the new one goes next to it.
	os.Rename(p.LogPath, p.LogPath+"."+strconv.FormatInt(time.Now().UnixNano(), 10))
	return StartProcess(p.bin, p.Dir, p.cfg)
}

// WithoutEnv drops key from an environment list.
func WithoutEnv(env []string, key string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}

// PurgeJobs deregisters every job and waits (bounded) until no allocation
// runs, then garbage-collects the nodes' allocations.
func PurgeJobs(c *api.Client, timeout time.Duration) {
	jobs, _, err := c.Jobs().List(nil)
	if err != nil {
		return
	}
	for _, j := range jobs {
		c.Jobs().Deregister(j.ID, true, nil)
	}
	deadline := time.Now().Add(timeout)
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

// KillUnder kills processes whose command line or environment mentions dir
// (task processes carry NOMAD_ALLOC_DIR, executors their log paths).
func KillUnder(dir string) {
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

// UnmountUnder detaches mounts (e.g. secrets tmpfs) below dir.
func UnmountUnder(dir string) {
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

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// WaitFor polls f every 250ms until it returns true, an error, or the timeout.
func WaitFor(timeout time.Duration, what string, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// FakeGPU is one GPU of the device plugin's fake backend.
type FakeGPU struct {
	UUID      string
	Model     string
	MemoryMiB int
	// Topology (the plugin's fake fields): GPUs sharing a value share that
	// component; "" / NUMANode nil: not reported.
	Board, PCIeSwitch, HostBridge string
	NUMANode                      *int
	// MIG, when set, puts the GPU in MIG mode with these instances.
	MIG []FakeMIG
}

// FakeMIG is one MIG instance of a fake GPU.
type FakeMIG struct {
	UUID, Profile string
	MemoryMiB     int
}

// ClientSpec is one GPU client of a local cluster.
type ClientSpec struct {
	Name string
	// GPUType is written to node meta rondo_gpu_type, which jobs may pass to
	// their tasks (${meta.rondo_gpu_type}); the fake trainer reads it.
	GPUType string
	GPUs    []FakeGPU
	// NodePool defaults to GPUPool; NodeClass to none.
	NodePool  string
	NodeClass string
	// MPSShares, when > 1, advertises every GPU also as that many MPS
	// shares (profile "mps-<100/n>", space sharing).
	MPSShares int
	// CPUMHz and MemoryMB, when > 0, are this client's cpu_total_compute
	// and memory_total_mb (else Options' or the default share); ClientHCL
	// goes inside its client { } block (e.g. a reserved { } block).
	CPUMHz, MemoryMB int
	ClientHCL        string
}

func (cs ClientSpec) pool() string {
	if cs.NodePool != "" {
		return cs.NodePool
	}
	return GPUPool
}

// Known fake models, by Rondo GPU type.
var fakeModels = map[string]FakeGPU{
	"v100": {Model: "Tesla V100-SXM2-16GB", MemoryMiB: 16384},
	"p100": {Model: "Tesla P100-PCIE-16GB", MemoryMiB: 16280},
	"k80":  {Model: "Tesla K80", MemoryMiB: 11441},
}

// UniformClient is a client with n GPUs of one type ("v100", "p100" or
// "k80"); uuids are GPU-<name>-<i>, unique in the cluster.
func UniformClient(name, gpuType string, n int) ClientSpec {
	m, ok := fakeModels[gpuType]
	if !ok {
		m = FakeGPU{Model: "Fake " + strings.ToUpper(gpuType), MemoryMiB: 16384}
	}
	cs := ClientSpec{Name: name, GPUType: gpuType}
	for i := 0; i < n; i++ {
		cs.GPUs = append(cs.GPUs, FakeGPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: m.Model, MemoryMiB: m.MemoryMiB})
	}
	return cs
}

// DefaultClients is the demo's heterogeneous cluster: 4 V100, 4 P100, 4 K80.
func DefaultClients() []ClientSpec {
	return []ClientSpec{UniformClient("v100-0", "v100", 4), UniformClient("p100-0", "p100", 4), UniformClient("k80-0", "k80", 4)}
}

// Options configures Start.
type Options struct {
	// Dir is the cluster's root; default a new temporary directory.
	Dir string
	// Nomad is the nomad binary.
	Nomad string
	// PluginDir holds nomad-device-rondo.
	PluginDir string
	Clients   []ClientSpec
	// StartTimeout bounds the wait for ready nodes with GPUs; default 120s.
	StartTimeout time.Duration
	LogLevel     string
	// ClientCPUMHz and ClientMemoryMB override each client's share of the
	// host (default 12000/n MHz and 8192/n MB); the scale benchmark gives
	// its many tiny jobs room.
	ClientCPUMHz, ClientMemoryMB int
	// ACL enables ACLs on every agent; Start bootstraps them and gives API
	// the management token (ManagementToken).
	ACL bool
	// ServerHCL goes inside the server's server { } block (e.g. short
	// heartbeat TTLs, so that a lost client is marked down in seconds).
	ServerHCL string
	// TLS, when set, runs every agent with TLS (NewTLS): Address is
	// https://, API trusts the CA, CLIEnv gives the nomad binary
	// NOMAD_CACERT.
	TLS *TLS
}

// Cluster is one server and its GPU clients.
type Cluster struct {
	Dir     string
	Address string // the server's HTTP address
	Server  *Process
	Clients []*Process
	API     *api.Client
	// ManagementToken is the bootstrap token's secret when ACLs are on.
	ManagementToken string
	// TLS is Options.TLS.
	TLS   *TLS
	specs []ClientSpec
	once  sync.Once
}

// PluginConfig renders the device plugin's config for a client, with its
// fault directory (a file named after a uuid there makes that GPU unhealthy).
func PluginConfig(cs ClientSpec, faultDir string) string {
	var b strings.Builder
	b.WriteString("fingerprint_period = \"1s\"\n")
	if cs.MPSShares > 1 {
		fmt.Fprintf(&b, "mps_pipe_dir = %s\nmps_log_dir = %s\nmps_profile {\n  name = \"mps-%d\"\n  shares = %d\n}\n",
			quote(filepath.Join(faultDir, "mps-pipe")), quote(filepath.Join(faultDir, "mps-log")), 100/cs.MPSShares, cs.MPSShares)
	}
	b.WriteString("fake {\n")
	fmt.Fprintf(&b, "  fault_dir = %s\n", quote(faultDir))
	for i, g := range cs.GPUs {
		fmt.Fprintf(&b, "  gpu {\n    uuid = %s\n    model = %s\n    memory_mib = %d\n    pci_bus_id = \"00000000:%02x:00.0\"\n",
			quote(g.UUID), quote(g.Model), g.MemoryMiB, i+6)
		for _, f := range []struct{ k, v string }{{"board", g.Board}, {"pcie_switch", g.PCIeSwitch}, {"host_bridge", g.HostBridge}} {
			if f.v != "" {
				fmt.Fprintf(&b, "    %s = %s\n", f.k, quote(f.v))
			}
		}
		if g.NUMANode != nil {
			fmt.Fprintf(&b, "    numa_node = %d\n", *g.NUMANode)
		}
		if len(g.MIG) > 0 {
			b.WriteString("    mig = true\n")
		}
		for k, m := range g.MIG {
			fmt.Fprintf(&b, "    mig_device {\n      uuid = %s\n      profile = %s\n      memory_mib = %d\n      gpu_instance_id = %d\n    }\n",
				quote(m.UUID), quote(m.Profile), m.MemoryMiB, k+1)
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Start launches a server and one client per spec, all in node pool
// "rondo", and waits until every client is ready with its GPUs.
func Start(o Options) (_ *Cluster, err error) {
	if o.StartTimeout == 0 {
		o.StartTimeout = 120 * time.Second
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "rondo-cluster-"); err != nil {
			return nil, err
		}
	}
	c := &Cluster{Dir: o.Dir, specs: o.Clients, TLS: o.TLS}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	ports, err := FreePorts(3 * (1 + len(o.Clients)))
	if err != nil {
		return nil, err
	}
	srv := AgentConfig{Name: "server", HTTP: ports[0], RPC: ports[1], Serf: ports[2], Server: true, LogLevel: o.LogLevel, ACL: o.ACL,
		ServerHCL: o.ServerHCL, TLS: o.TLS}
	if c.Server, err = StartProcess(o.Nomad, filepath.Join(o.Dir, "server"), srv); err != nil {
		return nil, err
	}
	c.Address = c.Server.HTTPAddr
	if c.API, err = api.NewClient(o.TLS.apiConfig(c.Address)); err != nil {
		return nil, err
	}
	if o.ACL {
		// Every other call is refused until the bootstrap token exists.
		err = WaitFor(o.StartTimeout, "ACL bootstrap", func() (bool, error) {
			if !c.Server.Alive() {
				return false, fmt.Errorf("nomad server exited:\n%s", Tail(c.Server.Logs(), 3000))
			}
			tok, _, err := c.API.ACLTokens().Bootstrap(nil)
			if err != nil {
				return false, nil
			}
			c.ManagementToken = tok.SecretID
			c.API.SetSecretID(tok.SecretID)
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	ncpu := max(len(o.Clients), 1)
	cpu, mem := 12000/ncpu, 8192/ncpu
	if o.ClientCPUMHz > 0 {
		cpu = o.ClientCPUMHz
	}
	if o.ClientMemoryMB > 0 {
		mem = o.ClientMemoryMB
	}
	for i, cs := range o.Clients {
		cpu, mem := cpu, mem
		if cs.CPUMHz > 0 {
			cpu = cs.CPUMHz
		}
		if cs.MemoryMB > 0 {
			mem = cs.MemoryMB
		}
		p := ports[3*(i+1):]
		fault := c.FaultDir(cs.Name)
		if err := os.MkdirAll(fault, 0o755); err != nil {
			return nil, err
		}
		cfg := AgentConfig{Name: cs.Name, PluginDir: o.PluginDir, HTTP: p[0], RPC: p[1], Serf: p[2],
			Client: true, Servers: []string{c.Server.RPCAddr}, NodePool: cs.pool(),
			CPUTotalCompute: cpu, MemoryTotalMB: mem, LogLevel: o.LogLevel, ACL: o.ACL, TLS: o.TLS,
			Meta:    map[string]string{"rondo_gpu_type": cs.GPUType},
			Plugins: map[string]string{"nomad-device-rondo": PluginConfig(cs, fault)}}
		if len(cs.GPUs) == 0 {
			cfg.Plugins = nil // a plain client (e.g. for the agent itself): the fake backend wants a GPU
		}
		if cs.NodeClass != "" {
			cfg.ClientHCL = "  node_class = " + quote(cs.NodeClass) + "\n"
		}
		cfg.ClientHCL += cs.ClientHCL
		pr, err := StartProcess(o.Nomad, filepath.Join(o.Dir, cs.Name), cfg)
		if err != nil {
			return nil, err
		}
		c.Clients = append(c.Clients, pr)
	}
	err = WaitFor(o.StartTimeout, "ready GPU clients", func() (bool, error) {
		if !c.Server.Alive() {
			return false, fmt.Errorf("nomad server exited:\n%s", Tail(c.Server.Logs(), 3000))
		}
		for _, p := range c.Clients {
			if !p.Alive() {
				return false, fmt.Errorf("nomad client %s exited:\n%s", p.Name, Tail(p.Logs(), 3000))
			}
		}
		nodes, _, err := c.API.Nodes().List(nil)
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes {
			if n.Status != "ready" || n.NodePool != c.spec(n.Name).pool() {
				continue
			}
			full, _, err := c.API.Nodes().Info(n.ID, nil)
			if err != nil {
				return false, nil
			}
			if countGPUs(full) == c.spec(n.Name).devices() {
				ready++
			}
		}
		return ready == len(o.Clients), nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) spec(name string) ClientSpec {
	for _, s := range c.specs {
		if s.Name == name {
			return s
		}
	}
	return ClientSpec{}
}

// devices is how many nvidia/gpu instances the client advertises: a GPU,
// or its MIG instances when it is in MIG mode.
func (cs ClientSpec) devices() int {
	n := 0
	for _, g := range cs.GPUs {
		n += max(len(g.MIG), 1)
	}
	return n
}

func countGPUs(n *api.Node) int {
	if n.NodeResources == nil {
		return 0
	}
	k := 0
	for _, d := range n.NodeResources.Devices {
		if d.Vendor == "nvidia" && d.Type == "gpu" {
			k += len(d.Instances)
		}
	}
	return k
}

// KillClient loses a client machine: its agent and every task it started
// are killed with SIGKILL, so the server marks the node down once its
// heartbeat TTL runs out.
func (c *Cluster) KillClient(name string) error {
	for _, p := range c.Clients {
		if p.Name == name {
			p.Kill()
			KillUnder(p.Dir)
			return nil
		}
	}
	return fmt.Errorf("no client %q", name)
}

// RestartClient starts a client killed by KillClient again on its data
// directory (the machine back after a loss): it returns once Nomad lists
// the node ready with all its GPUs.
func (c *Cluster) RestartClient(name string, timeout time.Duration) error {
	for i, p := range c.Clients {
		if p.Name != name {
			continue
		}
		np, err := p.Restart()
		if err != nil {
			return err
		}
		c.Clients[i] = np
		return WaitFor(timeout, "client "+name+" ready again", func() (bool, error) {
			if !np.Alive() {
				return false, fmt.Errorf("nomad client %s exited:\n%s", name, Tail(np.Logs(), 3000))
			}
			nodes, _, err := c.API.Nodes().List(nil)
			if err != nil {
				return false, nil
			}
			for _, n := range nodes {
				if n.Name != name || n.Status != "ready" {
					continue
				}
				full, _, err := c.API.Nodes().Info(n.ID, nil)
				if err != nil {
					return false, nil
				}
				return countGPUs(full) == c.spec(name).devices(), nil
			}
			return false, nil
		})
	}
	return fmt.Errorf("no client %q", name)
}

// RestartServer stops the server (SIGINT, as an operator's restart) and
// starts it again on the same ports and data directory; it returns once the
// server answers with a leader.
func (c *Cluster) RestartServer(timeout time.Duration) error {
	c.Server.Stop(timeout)
	p, err := c.Server.Restart()
	if err != nil {
		return err
	}
	c.Server = p
	return WaitFor(timeout, "the restarted server's leader", func() (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("nomad server exited:\n%s", Tail(p.Logs(), 3000))
		}
		leader, err := c.API.Status().Leader()
		return err == nil && leader != "", nil
	})
}

// FaultDir is the fake plugin's fault directory of a client.
func (c *Cluster) FaultDir(client string) string { return filepath.Join(c.Dir, "faults", client) }

// Logs returns every agent's log tail.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, p := range append([]*Process{c.Server}, c.Clients...) {
		if p != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.LogPath, Tail(p.Logs(), n))
		}
	}
	return b.String()
}

// Stop purges the jobs, stops the clients and the server, and kills what
// their tasks left behind. The directory stays (logs); RemoveAll is the
// caller's choice. It is idempotent.
func (c *Cluster) Stop() {
	c.once.Do(func() {
		if c.API != nil && c.Server != nil && c.Server.Alive() {
			PurgeJobs(c.API, 20*time.Second)
		}
		var wg sync.WaitGroup
		for _, p := range c.Clients {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop(20 * time.Second) }()
		}
		wg.Wait()
		if c.Server != nil {
			c.Server.Stop(20 * time.Second)
		}
		KillUnder(c.Dir)
		UnmountUnder(c.Dir)
	})
}

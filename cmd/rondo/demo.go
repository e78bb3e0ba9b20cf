package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

func init() {
	register("demo", func() (cli.Command, error) { return newDemoCmd(), nil })
}

type demoCmd struct {
	base
	bin       string
	jobs      string
	dir       string
	addr      string
	round     string
	duration  time.Duration
	leaseAddr string
	sharing   bool
	// deprecated warns when the old -addr (now -bind-addr) was used.
	deprecated func()
}

func newDemoCmd() *demoCmd {
	c := &demoCmd{base: newBase("demo", "Run the demo: a local Nomad cluster with fake GPUs, the agent, example jobs (the README's main job)", "[options]")}
	c.flags.StringVar(&c.bin, "bin", "bin", "directory with nomad-device-rondo, rondo-trainer and (optionally) nomad; missing ones are built")
	c.flags.StringVar(&c.jobs, "jobs", "jobs", "directory with cluster.hcl and *.nomad.hcl job specs")
	c.flags.StringVar(&c.dir, "dir", "", "working directory for the cluster (default: a new temporary one)")
	c.flags.StringVar(&c.addr, "bind-addr", "127.0.0.1:4700", "the agent's status API address")
	c.deprecated = aliasFlag(c.flags, "addr", "bind-addr", &c.addr, func(msg string) { fmt.Fprintln(c.stderr, "warning:", msg) })
	c.flags.StringVar(&c.leaseAddr, "lease-addr", "127.0.0.1:4701", "the agent's lease/progress API address (the jobs report to it)")
	c.flags.StringVar(&c.round, "round", "", "round length override, e.g. 10s")
	c.flags.DurationVar(&c.duration, "for", 0, "stop after this long (default: until Ctrl-C)")
	c.flags.BoolVar(&c.sharing, "space-sharing", false, "space sharing: every fake GPU also advertises two MPS shares and the agent runs cluster-packed.hcl (max_min_fairness_packed, no cells), so pairs of jobs share GPUs")
	return c
}

// binary returns dir/name, building pkg there when it is missing.
func (c *demoCmd) binary(root, name, pkg string) (string, error) {
	p, err := filepath.Abs(filepath.Join(c.bin, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	fmt.Fprintf(c.stdout, "==> building %s\n", name)
	return p, cluster.Build(root, pkg, p)
}

func (c *demoCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	c.deprecated()
	wd, _ := os.Getwd()
	root, err := cluster.ModuleRoot(wd)
	if err != nil {
		return c.fail(errors.New("run the demo from the rondo source tree (it builds the plugin and the trainer)"))
	}
	plugin, err := c.binary(root, "nomad-device-rondo", "./cmd/nomad-device-rondo")
	if err != nil {
		return c.fail(err)
	}
	trainer, err := c.binary(root, "rondo-trainer", "./cmd/rondo-trainer")
	if err != nil {
		return c.fail(err)
	}
	localNomad, _ := filepath.Abs(filepath.Join(c.bin, "nomad"))
	fmt.Fprintln(c.stdout, "==> finding nomad (building it from the module cache takes ~5 min the first time)")
	nomad, err := cluster.FindNomad(root, true, localNomad)
	if err != nil {
		return c.fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		return c.fail(err)
	}
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rondo-demo-"); err != nil {
			return c.fail(err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return c.fail(err)
	}
	// Only the plugin goes into plugin_dir.
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		return c.fail(err)
	}
	if err := copyFile(plugin, filepath.Join(plugins, "nomad-device-rondo")); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.stdout, "==> starting Nomad: 1 server, 3 clients in node pool \"rondo\" (4 x V100, 4 x P100, 4 x K80, fake)")
	clients, config := cluster.DefaultClients(), filepath.Join(c.jobs, "cluster.hcl")
	if c.sharing {
		for i := range clients {
			clients[i].MPSShares = 2
		}
		config = filepath.Join(c.jobs, "cluster-packed.hcl")
		fmt.Fprintln(c.stdout, "==> space sharing: two MPS shares per GPU, policy max_min_fairness_packed")
	}
	cl, err := cluster.Start(cluster.Options{Dir: filepath.Join(dir, "cluster"), Nomad: nomad, PluginDir: plugins,
		Clients: clients, LogLevel: "INFO"})
	if err != nil {
		return c.fail(err)
	}
	defer func() {
		fmt.Fprintln(c.stdout, "==> stopping the cluster")
		cl.Stop()
		fmt.Fprintf(c.stdout, "==> done; logs are under %s\n", dir)
	}()

	agentArgs := []string{"agent", "-config", config, "-address", cl.Address, "-bind-addr", c.addr,
		"-lease-addr", c.leaseAddr}
	if c.round != "" {
		agentArgs = append(agentArgs, "-round", c.round)
	}
	agent := exec.Command(self, agentArgs...)
	agent.Stdout, agent.Stderr = c.stdout, c.stderr
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us; we stop it in order
	if err := agent.Start(); err != nil {
		return c.fail(err)
	}
	agentDone := make(chan struct{})
	go func() { agent.Wait(); close(agentDone) }()
	defer func() {
		agent.Process.Signal(syscall.SIGINT)
		select {
		case <-agentDone:
		case <-time.After(90 * time.Second):
			agent.Process.Kill()
		}
	}()

	specs, _ := filepath.Glob(filepath.Join(c.jobs, "*.nomad.hcl"))
	sort.Strings(specs)
	ckpt := filepath.Join(dir, "checkpoints")
	for _, spec := range specs {
		cmd := exec.Command(nomad, "job", "run", "-detach", "-var", "trainer="+trainer, "-var", "checkpoint_root="+ckpt,
			"-var", "lease_addr="+c.leaseAddr, spec)
		cmd.Env = append(cluster.WithoutEnv(os.Environ(), "NOMAD_ADDR"), "NOMAD_ADDR="+cl.Address)
		if out, err := cmd.CombinedOutput(); err != nil {
			return c.fail(fmt.Errorf("nomad job run %s: %v: %s", spec, err, strings.TrimSpace(string(out))))
		}
		fmt.Fprintf(c.stdout, "==> submitted %s (it waits in node pool \"default\" until Rondo admits it)\n", filepath.Base(spec))
	}
	fmt.Fprintf(c.stdout, `
==> Rondo is scheduling. Watch it with:
      rondo status -rondo-addr http://%s
      Rondo's page: http://%s/ui/
      NOMAD_ADDR=%s nomad job status
      Nomad UI: %s/ui/jobs
    Checkpoints: %s
    Press Ctrl-C to stop.

`, c.addr, c.addr, cl.Address, cl.Address, ckpt)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var timeout <-chan time.Time
	if c.duration > 0 {
		timeout = time.After(c.duration)
	}
	select {
	case <-sigs:
	case <-timeout:
	case <-agentDone:
		return c.fail(errors.New("the agent exited"))
	}
	fmt.Fprintln(c.stdout, "\n==> stopping the agent")
	return 0
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

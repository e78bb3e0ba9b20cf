package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/engine"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

func init() {
	register("agent", func() (cli.Command, error) { return newAgentCmd(), nil })
}

type agentCmd struct {
	base
	config     string
	round      time.Duration
	addr       string
	nomadAddr  string
	pool       string
	ackTimeout time.Duration
	logLevel   string
}

func newAgentCmd() *agentCmd {
	c := &agentCmd{base: newBase("agent", "Run the allocator: schedule opted-in Nomad jobs in rounds",
		"-config FILE|DIR [options]")}
	c.flags.StringVar(&c.config, "config", "", "cluster config (HCL file or directory)")
	c.flags.DurationVar(&c.round, "round", 0, "round length, overriding round_seconds (e.g. 10s)")
	c.flags.StringVar(&c.addr, "addr", "127.0.0.1:4700", "listen address of the status API")
	c.flags.StringVar(&c.nomadAddr, "nomad-addr", "", "Nomad address, overriding the config and NOMAD_ADDR")
	c.flags.StringVar(&c.pool, "pool", rnomad.DefaultPool, "node pool of the GPU clients")
	c.flags.DurationVar(&c.ackTimeout, "ack-timeout", 60*time.Second, "how long a round waits for Nomad to reflect its plan")
	c.flags.StringVar(&c.logLevel, "log-level", "info", "log level")
	return c
}

// agentSettings is what the agent takes from the config file; SIGHUP
// reloads it.
type agentSettings struct {
	cfg    *rhcl.Config
	policy string
	round  time.Duration
	vcs    []agent.VC
}

func (c *agentCmd) load() (*agentSettings, error) {
	cfg, diags := rhcl.LoadPath(c.config)
	if diags.HasErrors() {
		return nil, errors.New(rhcl.FormatDiagnostics(diags))
	}
	s := &agentSettings{cfg: cfg, policy: rhcl.DefaultVCPolicy, round: time.Duration(cfg.RoundSeconds) * time.Second}
	// One policy for the whole cluster for now: the first VC's.
	if len(cfg.VCs) > 0 && cfg.VCs[0].Policy != "" {
		s.policy = cfg.VCs[0].Policy
	}
	for _, v := range cfg.VCs {
		p := v.Policy
		if p == "" {
			p = rhcl.DefaultVCPolicy
		}
		s.vcs = append(s.vcs, agent.VC{Name: v.Name, Policy: p})
	}
	if c.round > 0 {
		s.round = c.round
	}
	return s, nil
}

func newEngine(s *agentSettings) (*engine.Engine, error) {
	return engine.New(engine.Config{Policy: s.policy, RoundS: s.round.Seconds()})
}

func (c *agentCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.config == "" {
		return c.fail(errors.New("-config is required"))
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "rondo", Level: hclog.LevelFromString(c.logLevel), Output: c.stderr})
	s, err := c.load()
	if err != nil {
		return c.fail(err)
	}
	nc := api.DefaultConfig()
	if s.cfg.Nomad.Address != "" && os.Getenv("NOMAD_ADDR") == "" {
		nc.Address = s.cfg.Nomad.Address
	}
	if c.nomadAddr != "" {
		nc.Address = c.nomadAddr
	}
	if s.cfg.Nomad.Token != "" {
		nc.SecretID = s.cfg.Nomad.Token
	}
	if s.cfg.Nomad.Namespace != "" {
		nc.Namespace = s.cfg.Nomad.Namespace
	}
	if s.cfg.Nomad.Region != "" {
		nc.Region = s.cfg.Nomad.Region
	}
	client, err := api.NewClient(nc)
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	backend, err := rnomad.New(rnomad.Config{Client: client, Pool: c.pool, Logger: log.Named("nomad"),
		AckTimeout: c.ackTimeout, Done: ctx.Done()})
	if err != nil {
		return c.fail(err)
	}
	if err := backend.Setup(); err != nil {
		return c.fail(err)
	}
	eng, err := newEngine(s)
	if err != nil {
		return c.fail(err)
	}
	ag := agent.New(agent.Config{Backend: backend, Engine: eng, Round: s.round, Logger: log,
		Cluster: nc.Address, Policy: s.policy, VCs: s.vcs})
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return c.fail(err)
	}
	srv := &http.Server{Handler: ag.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	log.Info("agent started", "nomad", nc.Address, "status", "http://"+ln.Addr().String(), "policy", s.policy, "round", s.round)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig != syscall.SIGHUP {
				log.Info("shutting down", "signal", sig.String())
				cancel()
				return
			}
			ns, err := c.load()
			if err != nil {
				log.Error("reload failed; keeping the old config", "error", err)
				continue
			}
			var e *engine.Engine
			if ns.policy != s.policy {
				// A new policy starts a new engine: received-time history
				// restarts, the running placement is re-read from Nomad.
				if e, err = newEngine(ns); err != nil {
					log.Error("reload failed", "error", err)
					continue
				}
			}
			ag.Reconfigure(e, ns.policy, ns.round, ns.vcs)
			s = ns
			log.Info("config reloaded", "policy", ns.policy, "round", ns.round)
		}
	}()
	if err := ag.Run(ctx); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.stdout, "rondo agent: stopped")
	return 0
}

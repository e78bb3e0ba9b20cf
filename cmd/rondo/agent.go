package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"
	metrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/lease"
	leaseclient "github.com/rondo-sched/rondo/allocator/lease/client"
	"github.com/rondo-sched/rondo/allocator/loop"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/telemetry"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/policies"
)

func init() {
	register("agent", func() (cli.Command, error) { return newAgentCmd(), nil })
}

type agentCmd struct {
	base
	config      string
	round       time.Duration
	addr        string
	nomad       nomadFlags
	deprecated  []func()
	pool        string
	ackTimeout  time.Duration
	eventStream bool
	apiTimeout  time.Duration
	logLevel    string
	logJSON     bool
	leaseAddr   string
	durable     bool
	statePath   string
	leaderTTL   time.Duration
	leaseFile   string // high_availability { lease_file }
	advertise   string
	statusAuth  bool
	dryRun      bool
	lease       *leaseFront // nil without a lease API
}

func newAgentCmd() *agentCmd {
	c := &agentCmd{base: newBase("agent", "Run the allocator: schedule opted-in Nomad jobs in rounds",
		"-config FILE|DIR [options]")}
	c.flags.StringVar(&c.config, "config", "", "cluster config (HCL file or directory)")
	c.flags.DurationVar(&c.round, "round", 0, "round length, overriding agent { round } (e.g. 10s)")
	c.flags.StringVar(&c.addr, "bind-addr", "127.0.0.1:4700", "listen address of the status API (agent { bind_addr })")
	c.nomad.register(c.flags)
	warn := func(msg string) { fmt.Fprintln(c.stderr, "warning:", msg) }
	c.deprecated = append(c.deprecated,
		aliasFlag(c.flags, "addr", "bind-addr", &c.addr, warn),
		aliasFlag(c.flags, "nomad-addr", "address", &c.nomad.address, warn))
	c.flags.StringVar(&c.pool, "pool", rnomad.DefaultPool, "node pool of the GPU clients (agent { pool })")
	c.flags.DurationVar(&c.ackTimeout, "ack-timeout", 60*time.Second, "how long a round waits for Nomad to reflect its plan")
	c.flags.BoolVar(&c.eventStream, "event-stream", true, "observe from Nomad's event stream (jobs, allocations, nodes kept in memory, re-listed only when the stream falls behind or fails); false: re-list every round")
	c.flags.DurationVar(&c.apiTimeout, "nomad-timeout", 15*time.Second, "how long one Nomad API request may take (a server going away mid-request must not stall the rounds)")
	c.flags.StringVar(&c.logLevel, "log-level", "info", "log level: trace, debug, info, warn or error (agent { log_level })")
	c.flags.BoolVar(&c.logJSON, "log-json", false, "log JSON lines (agent { log_json })")
	c.flags.StringVar(&c.leaseAddr, "lease-addr", "", "listen address of the lease/progress API for training tasks (agent { lease_addr }; off when empty)")
	c.flags.BoolVar(&c.durable, "state", true, "keep the allocator state in Nomad Variables and run under the leader lock")
	c.flags.StringVar(&c.statePath, "state-path", state.DefaultPath, "variable path of the durable state (the leader lock is <path>-leader unless high_availability { lock_path })")
	c.flags.DurationVar(&c.leaderTTL, "leader-ttl", 15*time.Second, "TTL of the leader lock, 10s to 24h (high_availability { lock_ttl })")
	c.flags.StringVar(&c.advertise, "advertise", "", "the status API's URL as other hosts reach it, published by the leader for standbys (agent { advertise }; default http(s)://<-bind-addr>, the host name for an unspecified IP)")
	c.flags.BoolVar(&c.dryRun, "dry-run", false, "run rounds and log each plan without enforcing it (no job or state writes, no leader lock, no lease API): what the running agent would do")
	c.flags.BoolVar(&c.statusAuth, "status-auth", true, "check the status API's tokens against Nomad's ACLs (open when ACLs are disabled; /metrics and /v1/health are always open)")
	return c
}

// agentSettings is what the agent takes from the config file; SIGHUP
// reloads it.
type agentSettings struct {
	cfg    *rhcl.Config
	policy string
	round  time.Duration
	vcs    []agent.VC
	cells  bool // the config declares cells and VCs: per-VC engines
	// entities per VC in config order (nil entries: none declared).
	entities []map[string]policies.Entity
	// warnings: the config's, as "warning: file:line:col: ..." lines.
	warnings []string
	// tput is the throughput table (the config's file over Gavel's),
	// tputKey its file and content (throughputTable).
	tput    *throughputs.Table
	tputKey string
}

func (c *agentCmd) load() (*agentSettings, error) {
	cfg, diags := rhcl.LoadPath(c.config)
	if diags.HasErrors() {
		return nil, errors.New(rhcl.FormatDiagnostics(diags))
	}
	warnings := configWarnings(diags)
	err := checkVCSizers(cfg)
	if err != nil {
		return nil, err // a dl2 VC's model: at start, or a reload keeps the old config
	}
	s := &agentSettings{cfg: cfg, policy: rhcl.DefaultVCPolicy, round: time.Duration(cfg.RoundSeconds) * time.Second}
	if s.tput, s.tputKey, err = throughputTable(cfg); err != nil {
		return nil, err // at start, or a reload keeps the old config
	}
	// Without cells, one policy for the whole cluster: the first VC's.
	// With cells and VCs, each VC runs its own policy on its cells.
	if len(cfg.VCs) > 0 && cfg.VCs[0].Policy != "" {
		s.policy = cfg.VCs[0].Policy
	}
	s.cells = cfg.CellVCs()
	quotas := vcQuotas(cfg)
	for i, v := range cfg.VCs {
		p := v.Policy
		if p == "" {
			p = rhcl.DefaultVCPolicy
		}
		vc := agent.VC{Name: v.Name, Policy: p, GPUs: v.GPUs, Namespaces: v.Namespaces}
		if len(v.Quota) > 0 {
			vc.Quota = quotas[i].GPUs // its cells in GPUs per type (vc status)
		}
		for _, q := range v.Quota {
			if vc.Cells == nil {
				vc.Cells = map[string]int{}
			}
			vc.Cells[q.CellType] = q.Count
		}
		for _, e := range v.Entities {
			if vc.Entities == nil {
				vc.Entities = map[string]float64{}
			}
			vc.Entities[e.Name] = e.Weight
		}
		s.vcs = append(s.vcs, vc)
		s.entities = append(s.entities, vcEntities(v))
	}
	if c.round > 0 {
		s.round = c.round
	}
	s.warnings = warnings
	return s, nil
}

// deciderKey is what the decider is built from, without source positions:
// the round length, cell types, cells with their selectors, and each VC's
// quota or share, policy, weight and entities, a dl2 VC's sizer (its
// model file's content included) and the preemption settings of every
// engine (min_runtime, checkpoint_aware, reserve_after). A reload rebuilds
// the decider when it changes.
func deciderKey(s *agentSettings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "round %s\n", s.round)
	for _, t := range s.cfg.CellTypes {
		fmt.Fprintf(&b, "cell_type %q %q %q %d %v\n", t.Name, t.GPUType, t.Child, t.Count, t.Node)
	}
	for _, c := range s.cfg.Cells {
		fmt.Fprintf(&b, "cell %q %q %q %q %q %q %q %q %q\n", c.Type, c.Name, c.NomadNode, c.NomadNodes, c.NodePool, c.NodeClass,
			c.GPUType, c.Bad, c.Pinned)
	}
	for _, f := range s.cfg.FromTopology {
		fmt.Fprintf(&b, "cells_from_topology %q %q\n", f.NodePool, f.NodeClass)
	}
	for i, v := range s.vcs {
		fmt.Fprintf(&b, "vc %q %q %v %v %v %v %v", v.Name, v.Policy, v.GPUs, v.Cells, s.cfg.VCs[i].Weight, s.cfg.VCs[i].Pinned,
			s.cfg.VCs[i].SpaceSharing)
		fmt.Fprintf(&b, " %v %q", s.entities[i], s.cfg.VCs[i].Placement) // maps print sorted
		for _, u := range s.cfg.VCs[i].Users {                           // not their ranges: moving a line rebuilds nothing
			fmt.Fprintf(&b, " user %q %d", u.Name, u.Tickets)
		}
		fmt.Fprintf(&b, " %v %v %v %v%s", s.cfg.VCs[i].Trading, s.cfg.VCs[i].Quantum, s.cfg.VCs[i].MaxMigrations,
			s.cfg.VCs[i].TradeMargin, dl2Key(s.cfg.VCs[i]))
		fmt.Fprintf(&b, " preempt %+v\n", preemptionOf(s.cfg, s.cfg.VCs[i].Name))
	}
	fmt.Fprintf(&b, "preempt %+v\n", preemptionOf(s.cfg, ""))
	b.WriteString(typesKey(s.cfg, s.tputKey))
	fmt.Fprintf(&b, "placement %q profiles %q learn %v", s.cfg.Placement, s.cfg.Profiles, s.cfg.LearnProfiles)
	if s.cfg.Profiles != "" {
		// The file's content: an edited file rebuilds the stage.
		if data, err := os.ReadFile(s.cfg.Profiles); err == nil {
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
	}
	return b.String()
}

// newEngine is the single engine: the first VC's policy and entities.
// reset: its first round recomputes whatever the restored history says
// (a reload changed the entities).
func newEngine(s *agentSettings, reset bool) (*engine.Engine, error) {
	cfg := engine.Config{Policy: s.policy, RoundS: s.round.Seconds(), ResetFirst: reset}
	singlePreemption(s.cfg).Apply(&cfg)
	if len(s.entities) > 0 {
		cfg.Entities = s.entities[0]
	}
	return engine.New(cfg)
}

// newDecider is the round's decider for the config: the per-VC decider
// the config declares (vcDecider, shared with `rondo simulate
// --vc-config`), else (one VC, no share, no cells) the single engine for
// the whole cluster. reset as in newEngine.
func newDecider(s *agentSettings, log hclog.Logger, reset bool) (agent.Decider, error) {
	warn := func(msg string, args ...any) { log.Warn(msg, args...) }
	d, err := vcDecider(s.cfg, s.round.Seconds(), reset, warn)
	if err != nil {
		return nil, err
	}
	if d == nil && len(s.cfg.VCs) > 0 && ownMechanism(s.cfg.VCs[0]) {
		// One gandiva_fair or dl2 VC over the whole cluster.
		m, err := vcMechanism(s.cfg.VCs[0], s.round.Seconds(), reset, warn)
		if err != nil {
			return nil, err
		}
		d = &round.Single{Mechanism: m}
	}
	if d == nil {
		if d, err = newEngine(s, reset); err != nil {
			return nil, err
		}
	}
	return withPlacement(s.cfg, d, warn)
}

// estimatingStage is the round's first stage before d: measured
// throughputs replace the table's (the config's file over Gavel's), the
// types no table has for a job are completed from the others
// (round.Estimating); placement's normalization first when d places.
func estimatingStage(s *agentSettings, d agent.Decider, est *estimator.Online, pairs *round.PairEstimates) *round.Estimating {
	e := &round.Estimating{Next: d, Online: est, Pairs: pairs, Table: s.tput}
	if st, ok := d.(*placement.Stage); ok {
		e.Before = st.Normalize
	}
	return e
}

// cellPools lists the node pools cells select (node_pool): GPU pools
// besides the agent's -pool.
func cellPools(s *agentSettings) []string {
	var out []string
	for _, c := range s.cfg.Cells {
		if c.NodePool != "" && !slices.Contains(out, c.NodePool) {
			out = append(out, c.NodePool)
		}
	}
	for _, f := range s.cfg.FromTopology {
		if !slices.Contains(out, f.NodePool) {
			out = append(out, f.NodePool)
		}
	}
	return out
}

func (c *agentCmd) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.config == "" {
		return c.fail(errors.New("-config is required"))
	}
	set := setFlags(c.flags)
	s, err := c.load()
	if err != nil {
		return c.fail(err)
	}
	for _, w := range s.warnings {
		fmt.Fprintln(c.stderr, w)
	}
	for _, d := range c.deprecated {
		d()
	}
	c.applyAgentBlock(set, s.cfg.Agent)
	log := c.newLogger()
	nc, err := c.nomad.config(s.cfg.Nomad)
	if err != nil {
		return c.fail(err)
	}
	if err := withTimeout(nc, c.apiTimeout); err != nil {
		return c.fail(err)
	}
	// nomad { namespace = "*" } watches every namespace; the client, the
	// state and the lock live in the home namespace (namespaces.go).
	watchAll := nc.Namespace == rhcl.AllNamespaces
	home := rnomad.HomeNamespace(nc.Namespace)
	nc.Namespace = home
	// The lease API's JWKS comes through the same TLS (or socket) as the
	// Nomad client; built before api.NewClient rewrites a unix:// address.
	var verifier *lease.JWKSVerifier
	if c.leaseAddr != "" {
		if verifier, err = lease.NewNomadJWKSVerifier(nc, leaseclient.Audience); err != nil {
			return c.fail(err)
		}
	}
	nomadAddr := nc.Address
	listenTLS, err := newListenerTLS(s.cfg.TLS)
	if err != nil {
		return c.fail(err)
	}
	lopts := c.leaderOptions(set, s.cfg.HA, nc.Namespace)
	c.leaseFile = s.cfg.HA.LeaseFile
	snc := streamConfig(nc) // before NewClient rewrites nc
	client, err := api.NewClient(nc)
	if err != nil {
		return c.fail(err)
	}
	streamClient, err := api.NewClient(snc)
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ag *agent.Agent
	// Progress: what the task reported through the lease API, else the
	// trainer's checkpoint file (shared disk: tests, the demo).
	progress := func(job *api.Job) (float64, bool) {
		if job.ID != nil {
			if v, ok := ag.Reported(rnomad.JobKey(home, deref(job.Namespace), *job.ID)); ok {
				return v, true
			}
		}
		return rnomad.CheckpointProgress(job)
	}
	// A two-role job's epochs (rondo.epochs): reported, else its checkpoint.
	epochs := func(job *api.Job) (float64, bool) {
		if job.ID != nil {
			if v, ok := ag.ReportedEpochs(rnomad.JobKey(home, deref(job.Namespace), *job.ID)); ok {
				return v, true
			}
		}
		return rnomad.CheckpointEpochs(job)
	}
	// The placement stage's profiles, for vetting jobs' rondo.profile (nil:
	// no placement set, no check); replaced on a reload.
	var profiles atomic.Pointer[synergy.Table]
	setProfiles := func(s *agentSettings) error {
		if !s.cfg.Placing() {
			profiles.Store(nil)
			return nil
		}
		tb, err := profileTable(s.cfg)
		if err != nil {
			return err
		}
		profiles.Store(tb)
		return nil
	}
	if err := setProfiles(s); err != nil {
		return c.fail(err)
	}
	backend, err := rnomad.New(rnomad.Config{Client: client, StreamClient: streamClient, Pool: c.pool, Logger: log.Named("nomad"),
		AckTimeout: c.ackTimeout, Watch: c.eventStream, Done: ctx.Done(), Progress: progress, Epochs: epochs,
		OnEvent: func(job, event string) { ag.Event(job, event) }, NoElastic: s.cells, Pools: cellPools(s),
		Checkpoints: func(job string) (state.Checkpoint, bool) { return ag.Checkpoint(job) },
		CheckProfile: func(name string) error {
			if t := profiles.Load(); t != nil {
				return t.Known(name)
			}
			return nil
		},
		ShareGroup: shareGroup(s.cfg, s.policy), Namespace: home, Namespaces: watchNamespaces(s.cfg, watchAll),
		TypeNames: s.cfg.TypeNames(), Throughputs: s.tput}) // SetTypes on a reload
	if err != nil {
		return c.fail(err)
	}
	if c.dryRun {
		log.Info("dry run: plans are logged, not enforced; the state is read, not written; no leader lock")
	} else if err := backend.Setup(); err != nil {
		if !errors.Is(err, rnomad.ErrPreemptionForbidden) {
			return c.fail(err)
		}
		log.Warn("preemption: " + err.Error())
	}
	// The round's first stage learns throughputs from the lease API's
	// reports (the snapshot's Measured); its estimator outlives the
	// deciders a reload or a lost leader lock rebuilds.
	// Pair throughputs too: learned from paired reports, completed for
	// models the table lacks, after profiling runs the round plans.
	// Both learn on the config's throughput table (its file over Gavel's);
	// a reload that changes the table starts the pair estimates afresh.
	est := estimator.NewOnline(0, nil)
	var pairEst *round.PairEstimates
	pairKey := ""
	decide := func(s *agentSettings, reset bool) (agent.Decider, error) {
		d, err := newDecider(s, log, reset)
		if err != nil {
			return nil, err
		}
		if pairEst == nil || s.tputKey != pairKey {
			pairEst, pairKey = round.NewPairEstimates(s.tput), s.tputKey
		}
		return estimatingStage(s, d, est, pairEst), nil
	}
	dec, err := decide(s, false)
	if err != nil {
		return c.fail(err)
	}
	tel, err := newTelemetry(s.cfg.Telemetry)
	if err != nil {
		return c.fail(err)
	}
	defer tel.Close()
	tel.SetVCs(vcQuotas(s.cfg))
	acfg := agent.Config{Backend: dryRunOr(c.dryRun, backend, log), Engine: dec, Round: s.round, Logger: log,
		Cluster: nomadAddr, Policy: s.policy, VCs: s.vcs, Telemetry: tel, CheckpointDir: backend.CheckpointDirOf, JobKey: backend.Key}
	if c.statusAuth {
		acfg.Authorizer = (&rnomad.Authorizer{Client: client}).Authorize
	}
	if c.durable {
		acfg.Store = state.NewStore(client, state.Options{Namespace: nc.Namespace, Path: c.statePath})
		if c.dryRun {
			acfg.Store = agent.ReadOnly(acfg.Store)
		}
	}
	ag = agent.New(acfg)
	ln, scheme, err := listenTLS.listen(c.addr)
	if err != nil {
		return c.fail(err)
	}
	handler := ag.Handler()
	if !s.cfg.Telemetry.PrometheusMetrics {
		handler = withoutMetrics(handler)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	leaseURL := ""
	if c.leaseAddr != "" && !c.dryRun {
		lln, lscheme, err := listenTLS.listen(c.leaseAddr)
		if err != nil {
			return c.fail(err)
		}
		ls := &lease.Server{Verifier: verifier, Decider: ag, Sink: ag,
			Logf: func(f string, args ...any) { log.Named("lease").Debug(fmt.Sprintf(f, args...)) }}
		tr, err := listenTLS.transport()
		if err != nil {
			return c.fail(err)
		}
		c.lease = &leaseFront{self: advertiseURL(lscheme, lln.Addr()), local: ls.Handler(), leads: ag.IsLeader, transport: tr}
		lsrv := &http.Server{Handler: c.lease, ReadHeaderTimeout: 10 * time.Second}
		go lsrv.Serve(lln)
		defer lsrv.Close()
		leaseURL = lscheme + "://" + lln.Addr().String()
		log.Info("lease API", "addr", leaseURL)
	}
	taskEnv := func(s *agentSettings) {
		addr := s.cfg.Tasks.LeaseAddress
		if addr == "" && leaseURL != "" {
			if rhcl.CheckLeaseAddress(leaseURL) == nil {
				addr = leaseURL
			} else {
				log.Warn("tasks are not given RONDO_LEASE_ADDR: the lease API listens on all addresses; "+
					"set tasks { lease_address = \"http(s)://<reachable host>:<port>\" } in the config", "lease_addr", leaseURL)
			}
		}
		backend.SetTaskEnv(s.cfg.Tasks.CheckpointRoot, addr)
	}
	taskEnv(s)
	mode := "one engine for the cluster"
	if s.cells {
		mode = "per-VC engines over cells"
	}
	statusURL := scheme + "://" + ln.Addr().String()
	log.Info("agent started", "mode", mode, "nomad", nomadAddr, "namespaces", namespacesWatched(home, s.cfg, watchAll), "status", statusURL, "metrics", statusURL+"/metrics",
		"policy", s.policy, "round", s.round, "durable", c.durable)

	// s is replaced on SIGHUP and read when the leader lock is re-taken.
	var smu sync.Mutex
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
			for _, w := range ns.warnings {
				log.Warn(w)
			}
			smu.Lock()
			// Everything that can refuse the new config is checked before
			// any of it is applied: a refused reload keeps the old config
			// and the old certificate alike.
			r, err := prepareReload(s, ns, listenTLS, decide)
			if err != nil {
				smu.Unlock()
				log.Error("reload failed; keeping the old config and TLS certificate", "error", err)
				continue
			}
			if what := needRestart(s.cfg, ns.cfg); len(what) > 0 {
				log.Warn(restartNote(what))
			}
			listenTLS.use(r.cert)
			if r.rebuilt {
				backend.SetNoElastic(ns.cells)
				backend.SetTypes(ns.cfg.TypeNames(), ns.tput)
				backend.SetPools(cellPools(ns))
				if err := setProfiles(ns); err != nil {
					log.Error("reload: profiles", "error", err) // decide already loaded them: not reached
				}
			}
			backend.SetShareGroup(shareGroup(ns.cfg, ns.policy))
			backend.SetNamespaces(watchNamespaces(ns.cfg, watchAll))
			ag.Reconfigure(r.decider, ns.policy, ns.round, ns.vcs)
			tel.SetVCs(vcQuotas(ns.cfg)) // the telemetry block itself takes a restart
			taskEnv(ns)
			s = ns
			smu.Unlock()
			log.Info("config reloaded", "policy", ns.policy, "round", ns.round, "decider_rebuilt", r.rebuilt)
		}
	}()
	// After a lost leader lock the decider is rebuilt, as in a restarted
	// agent: its in-memory state may hold a round it decided but never
	// recorded (Nomad went away), and Start restores the saved history.
	fresh := func() error {
		smu.Lock()
		defer smu.Unlock()
		e, err := decide(s, false)
		if err != nil {
			return err
		}
		ag.Reconfigure(e, s.policy, s.round, s.vcs)
		return nil
	}
	advertise := c.advertise
	if advertise == "" {
		advertise = advertiseURL(scheme, ln.Addr())
	}
	if err := c.runLeader(ctx, nc, lopts, ag, fresh, advertise, log); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.stdout, "rondo agent: stopped")
	return 0
}

// reloadPlan is what a SIGHUP reload applies once accepted (prepareReload).
type reloadPlan struct {
	// cert is the listeners' certificate read again (nil: no tls {}, or
	// its paths changed, which takes a restart).
	cert *tls.Certificate
	// decider is the new decider when what it is built from changed
	// (rebuilt; deciderKey), else nil: Reconfigure keeps the old one.
	decider agent.Decider
	rebuilt bool
}

// prepareReload checks a reloaded config (ns, over the one in force, old)
// before any of it is applied: it reads the listeners' certificate again
// (not served yet) and builds the decider when what that is built from
// changed. An error refuses the whole reload; the caller applies the plan
// (the certificate last in its checks: listenerTLS.use) only without one.
func prepareReload(old, ns *agentSettings, l *listenerTLS, decide func(*agentSettings, bool) (agent.Decider, error)) (reloadPlan, error) {
	var r reloadPlan
	cert, err := l.load(ns.cfg.TLS)
	if err != nil {
		return r, err
	}
	if deciderKey(ns) != deciderKey(old) {
		// Any change of what the decider is built from (cells and their
		// selectors, quotas or shares, a VC's policy or entities, the
		// round length) takes effect at the next round: a new decider,
		// which takes the saved history where it can (same policies;
		// cumulative received time is kept anyway) and recomputes at its
		// first round; the running placement is re-read from Nomad.
		if r.decider, err = decide(ns, true); err != nil {
			return r, err
		}
		r.rebuilt = true
	}
	r.cert = cert
	return r, nil
}

// runLeader runs the agent's rounds while it holds the leader lock (a
// Nomad variable lock next to the state), so two agents never both act; a
// lost lock or a state written by another agent sends it back to waiting.
// The leader publishes its status URL (advertise) next to the lock
// (state.PublishLeader); a standby reads it while it waits and names it in
// its status (leader=false, leader_addr).
func (c *agentCmd) runLeader(ctx context.Context, nc *api.Config, opts state.LeaderOptions, ag *agent.Agent, fresh func() error, advertise string, log hclog.Logger) error {
	if !c.durable || c.dryRun {
		ag.SetLeader(!c.dryRun, "") // a dry run leads nothing
		return ag.Run(ctx)
	}
	// The lock gets a client of its own: api.Client.Locks rewrites the
	// client's retry settings without synchronisation. So does the
	// leader's address.
	lc, err := api.NewClient(nc)
	if err != nil {
		return err
	}
	ic, err := api.NewClient(nc)
	if err != nil {
		return err
	}
	ag.SetLeader(false, "")
	if c.leaseFile != "" {
		// high_availability { lease_file }: the lease ID kept on this host
		// (locked while this agent runs), so that a restart after a crash
		// renews the dead agent's lease instead of waiting it out.
		lf, err := state.OpenLeaseFile(c.leaseFile)
		if err != nil {
			return err
		}
		defer lf.Close()
		opts.Lease = lf
		opts.OnResume = func() { log.Info("leader lease resumed from the lease file", "file", lf.Path(), "lock", opts.Path) }
	}
	opts.OnRetry = func(err error) { log.Warn("Nomad unreachable; retrying the leader lock", "error", err) }
	opts.OnWait = func() {
		log.Info("waiting for the leader lock (another agent is running)")
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, ok, err := state.ReadLeader(rctx, ic, opts)
		if err == nil {
			c.lease.follow(info.LeaseAddr)
		}
		switch {
		case err != nil:
			log.Warn("reading the leader's address", "error", err)
		case ok && info.StatusAddr != advertise:
			ag.SetLeader(false, info.StatusAddr)
		}
	}
	for first := true; ; first = false {
		err := state.RunAsLeader(ctx, lc, opts, func(lctx context.Context) error {
			log.Info("leader lock acquired", "lock", opts.Path)
			ag.SetLeader(true, "")
			pctx, cancel := context.WithTimeout(lctx, 5*time.Second)
			if err := state.PublishLeader(pctx, ic, opts, state.LeaderInfo{StatusAddr: advertise, LeaseAddr: c.lease.url(), Since: time.Now()}); err != nil {
				log.Warn("could not publish the leader's status address", "path", state.InfoPath(opts.Path), "error", err)
			}
			cancel()
			if !first {
				if err := fresh(); err != nil {
					return err
				}
			}
			return ag.Run(lctx)
		})
		ag.SetLeader(false, "")
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, state.ErrLeadershipLost) || errors.Is(err, agent.ErrLostState) {
			log.Error("stopped acting; waiting for the leader lock again", "error", err)
			continue
		}
		if state.Transient(err) {
			// Loading the state at start needs Nomad: a server restarting
			// is waited out, not a reason to exit.
			log.Warn("Nomad unreachable; starting again", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(opts.TTL / 2):
			}
			continue
		}
		return err
	}
}

// advertiseURL is the status API's URL for a listener: scheme://host:port,
// the host name in place of an unspecified IP.
func advertiseURL(scheme string, a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return scheme + "://" + a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// newTelemetry makes the agent's metrics as the telemetry block says: a
// statsd sink besides Prometheus when statsd_address is set.
func newTelemetry(t rhcl.Telemetry) (*telemetry.Telemetry, error) {
	o := telemetry.Options{DisableHostname: t.DisableHostname, CollectionInterval: t.CollectionInterval}
	if t.StatsdAddress != "" {
		sink, err := metrics.NewStatsdSink(t.StatsdAddress)
		if err != nil {
			return nil, fmt.Errorf("telemetry: statsd_address: %w", err)
		}
		o.Sinks = append(o.Sinks, sink)
	}
	return telemetry.NewWith(o)
}

// withoutMetrics hides /metrics (telemetry { prometheus_metrics = false }).
func withoutMetrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// vcQuotas are the VCs' guaranteed GPUs per type for rondo_vc_quota_gpus:
// a quota-only VC's share; a cell VC's quota of cells times each cell
// type's GPUs down its chain to the leaves' gpu_type (cell types derived
// from topology at run time are not in the config and count nothing); a
// VC with neither (one VC over the whole cluster) has no quota.
func vcQuotas(cfg *rhcl.Config) []telemetry.VCQuota {
	types := map[string]rhcl.CellType{}
	for _, t := range cfg.CellTypes {
		types[t.Name] = t
	}
	var gpus func(name string, depth int) map[string]int
	gpus = func(name string, depth int) map[string]int {
		t, ok := types[name]
		if !ok || depth > len(types) {
			return nil
		}
		if t.GPUType != "" {
			return map[string]int{t.GPUType: 1}
		}
		out := map[string]int{}
		for typ, n := range gpus(t.Child, depth+1) {
			out[typ] = n * max(t.Count, 1)
		}
		return out
	}
	var out []telemetry.VCQuota
	for _, v := range cfg.VCs {
		q := telemetry.VCQuota{Name: v.Name}
		if len(v.GPUs) > 0 {
			q.GPUs = maps.Clone(v.GPUs)
		}
		for _, cq := range v.Quota {
			name := cq.Type // the bare type (Validate); as written otherwise
			if name == "" {
				name = cq.CellType
			}
			for typ, n := range gpus(name, 0) {
				if q.GPUs == nil {
					q.GPUs = map[string]int{}
				}
				q.GPUs[typ] += n * cq.Count
			}
		}
		out = append(out, q)
	}
	return out
}

// withTimeout gives nc an HTTP client whose requests time out after d (the
// API's default client waits forever: a request to a server that stops
// while answering stalled a round until the leader lock was lost). Rondo
// makes no blocking queries, so every request is short. Unix-socket
// addresses keep the API's own client.
func withTimeout(nc *api.Config, d time.Duration) error {
	if d <= 0 || strings.HasPrefix(nc.Address, "unix://") {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = false   // as the API's client: alloc exec needs HTTP/1
	if tr.TLSClientConfig == nil { // api.ConfigureTLS writes into it
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: tr, Timeout: d}
	if err := api.ConfigureTLS(hc, nc.TLSConfig); err != nil {
		return fmt.Errorf("nomad TLS: %w", err)
	}
	nc.HttpClient = hc
	return nil
}

// streamConfig is nc for the event stream: the same address, TLS and
// token, but no bound on a request's whole time (withTimeout), which would
// cut the hours-long stream; the watcher drops a silent stream itself.
func streamConfig(nc *api.Config) *api.Config {
	snc := *nc
	if nc.HttpClient != nil {
		hc := *nc.HttpClient
		hc.Timeout = 0
		snc.HttpClient = &hc
	}
	return &snc
}

// dryRunOr is the backend the agent drives: with -dry-run, one that logs
// each plan and enforces nothing (agent.DryRun).
func dryRunOr(dry bool, b *rnomad.Backend, log hclog.Logger) loop.Backend {
	if dry {
		return agent.DryRun(b, log.Named("dry-run"))
	}
	return b
}

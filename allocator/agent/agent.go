// Package agent runs the allocator's rounds against a backend on a wall
// clock and serves its status over HTTP. It knows engine types only; the
// command wires a backend (Nomad) and the config.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/allocator/telemetry"
	"github.com/rondo-sched/rondo/allocator/webui"
	"github.com/rondo-sched/rondo/internal/version"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// Decider decides one round: an *engine.Engine (one policy for the whole
// cluster) or a VC scheduler (per-VC engines over the cell layer).
type Decider = loop.Decider

// HistoryKeeper is implemented by deciders that keep history between
// rounds which changes later decisions (*engine.Engine, the per-VC
// engines): the agent saves it with every recorded decision and restores
// it at start, so that a restarted agent decides as the stopped one would
// have.
type HistoryKeeper interface {
	MarshalHistory() ([]byte, error)
	UnmarshalHistory([]byte) error
}

// MeasurementRestorer is implemented by deciders that learn throughputs
// from the snapshots' measurements (round.Estimating): the agent gives
// them the last measurement its state kept per job and GPU type at start
// and when the decider is replaced, so that a restarted agent decides on
// measured throughputs from its first round. A decider that learned that
// throughput already ignores it.
type MeasurementRestorer interface {
	RestoreMeasured(job, gpuType string, stepsPerSec float64)
}

// Resetter is implemented by deciders that can be told to recompute the
// allocation at the next round as on a reset event (*engine.Engine, the
// per-VC engines). The agent does so after rounds lost to Nomad being
// unreachable: what changed meanwhile (a server restart, nodes or jobs
// gone) is re-planned from scratch.
type Resetter interface {
	RequestReset()
}

// Store persists the durable state (*state.Store in Nomad Variables).
type Store interface {
	Load(ctx context.Context) (*state.State, error)
	Save(ctx context.Context, st *state.State) error
}

// Durable is implemented by backends whose history the agent keeps in the
// state: it restores it, records each plan's intents before enforcing them
// and settles a decision a crash left in flight.
type Durable interface {
	// Restore seeds the backend before the first Observe.
	Restore(epoch time.Time, arrival map[string]float64, received map[string]map[string]float64)
	// Epoch is time 0 of the snapshots' clock.
	Epoch() time.Time
	// Intents describes the changes enforcing p makes, with the job modify
	// index each was planned against.
	Intents(p *engine.Plan) []state.Intent
	// Reconcile settles pending intents (applied or rolled back).
	Reconcile(pending []state.Intent) (applied, rolledBack []string, err error)
}

// Creditor is implemented by durable backends that credit the jobs which
// ran through the agent's downtime: the agent saves each job's last credit
// mark with its received time and hands the marks back at start.
type Creditor interface {
	CreditMarks() map[string]state.Credit
	RestoreCredit(map[string]state.Credit)
}

// Config configures an Agent.
type Config struct {
	Backend loop.Backend
	Engine  Decider
	Round   time.Duration
	Logger  hclog.Logger
	// Cluster and VCs are shown in the status.
	Cluster string
	Policy  string
	VCs     []VC
	// Store, if set, keeps the state durable (loaded by Run, saved around
	// every enforcement); without it the state lives in memory.
	Store Store
	// Telemetry, if set, records every round and decision; Handler serves
	// it at /metrics.
	Telemetry *telemetry.Telemetry
	// CheckpointDir names a job's checkpoint directory in lease grants.
	CheckpointDir func(job string) string
	// JobKey is the key the backend gives job id of namespace ns (the
	// Nomad backend's "ns/id" outside its home namespace): the lease API's
	// callers name their namespace and id. Nil: the id.
	JobKey func(ns, id string) string
	// Authorizer, if set, guards the status API (GET /v1/...): it is
	// given the request's token (X-Nomad-Token, Authorization: Bearer, or
	// ?token=; "" when none) and answers nil to let the request through,
	// else an *AuthError (401 or 403). /metrics, /v1/health and the web
	// page's files (/ui/, no data in them; the page's API requests carry
	// the token) stay open. Nil: everything is open.
	Authorizer func(ctx context.Context, token string) error
}

// VC is a virtual cluster as the status shows it.
type VC struct {
	Name   string `json:"name"`
	Policy string `json:"policy"`
	// Namespaces are the namespaces whose jobs may use it (the config's
	// namespaces; none: every namespace).
	Namespaces []string `json:"namespaces,omitempty"`
	// GPUs is a quota-only VC's share per GPU type; Cells a VC's quota of
	// cells per cell type (as written in the config).
	GPUs  map[string]int `json:"gpus,omitempty"`
	Cells map[string]int `json:"cells,omitempty"`
	// Entities are the weights of its entities (hierarchical policies).
	Entities map[string]float64 `json:"entities,omitempty"`
	// Users, Trades and Migrations are a gandiva_fair VC's users with
	// their tickets and shares per GPU type (before trading: fair_share,
	// after: share), the trades in force and the jobs moved for balance,
	// as the last round planned them.
	Users      []engine.UserShare `json:"users,omitempty"`
	Trades     []fairshare.Trade  `json:"trades,omitempty"`
	Migrations int                `json:"migrations,omitempty"`
	// The last round's view of the VC, per GPU type: Quota the GPUs it is
	// guaranteed (its share, or its cells' GPUs), Used the GPUs its jobs
	// hold, Borrowed those beyond its quota (opportunistic or idle GPUs of
	// others), Lent its quota's GPUs other VCs' jobs hold.
	Quota    map[string]int `json:"quota,omitempty"`
	Used     map[string]int `json:"used,omitempty"`
	Borrowed map[string]int `json:"borrowed,omitempty"`
	Lent     map[string]int `json:"lent,omitempty"`
	// EntitledGPUS is the GPU time the policy's allocations gave its jobs
	// (sum over rounds of X × GPUs × round length) since the agent
	// started, ReceivedGPUS the GPU time they ran; Running and Pending
	// count its jobs now.
	EntitledGPUS float64 `json:"entitled_gpu_s"`
	ReceivedGPUS float64 `json:"received_gpu_s"`
	Running      int     `json:"running"`
	Pending      int     `json:"pending"`
}

// TypeUsage counts one GPU type's GPUs.
type TypeUsage struct {
	Total  int `json:"total"`
	Failed int `json:"failed"`
	Used   int `json:"used"`
}

// JobStatus is one active job in the last round.
type JobStatus struct {
	ID string `json:"id"`
	// VC is the job's virtual cluster (meta rondo.vc), when the backend
	// knows it.
	VC string `json:"vc,omitempty"`
	// State: queued (never ran), running, suspended (ran before, not in
	// this round) or done (finished since the agent started).
	State          string             `json:"state"`
	Type           string             `json:"type,omitempty"`
	GPUs           []string           `json:"gpus,omitempty"`
	ScaleFactor    int                `json:"scale_factor"`
	RemainingSteps float64            `json:"remaining_steps"`
	TotalSteps     float64            `json:"total_steps"`
	ArrivalS       float64            `json:"arrival_s"`
	ReceivedS      map[string]float64 `json:"received_s,omitempty"`
	// X is the policy's allocation in force: the fraction of time the job
	// should run on each GPU type (its own row; colocated pairs not
	// included), from the engine that schedules it: the one engine, or
	// under per-VC engines its VC's engine (fractions of the VC's virtual
	// GPUs of each type) or, for opportunistic jobs, the opportunistic
	// engine (of the GPUs the VCs leave).
	X map[string]float64 `json:"x,omitempty"`
	// Rounds is how many rounds the job has been given GPUs (since the
	// agent started).
	Rounds int `json:"rounds"`
	// Throughput is steps/s on the GPU type it runs on now.
	Throughput float64 `json:"throughput_steps_per_s,omitempty"`
	// Throughputs are the steps/s per GPU type the round decided on, each
	// with where it comes from (engine.Job.ThroughputSource): measured,
	// estimated, table or defaulted.
	Throughputs map[string]TypeThroughput `json:"throughputs,omitempty"`
	// ETA is when it would finish at that throughput if it kept running.
	ETA *time.Time `json:"estimated_completion,omitempty"`
	// Elastic jobs: workers running now (0 when not running) and the
	// declared range; MaxWorkers is 0 for a fixed-size job.
	Workers    int `json:"workers,omitempty"`
	MinWorkers int `json:"min_workers,omitempty"`
	MaxWorkers int `json:"max_workers,omitempty"`
	// Two-role elastic jobs (DL2): parameter servers in the plan (0 when
	// not running, or when the decider left them to the backend) and the
	// declared range.
	PS    int `json:"ps,omitempty"`
	MinPS int `json:"min_ps,omitempty"`
	MaxPS int `json:"max_ps,omitempty"`
	// With is the job it shares its GPUs with (space sharing: each runs
	// on an MPS share of them); Throughput is then its pair throughput.
	With string `json:"with,omitempty"`
	// User is who submitted it (meta rondo.user, else the namespace).
	User string `json:"user,omitempty"`
	// Refused says why the scheduler will never run the job (a gang
	// larger than any GPU generation of its gandiva_fair VC).
	Refused string `json:"refused,omitempty"`
	// Intent and Reason are what the last plan did to the job and why
	// (engine.JobIntent; absent when the plan said nothing of it, e.g. a
	// job left waiting; a gang waiting on its reservation has the
	// reservation's reason, Reserved). CheckpointNow: the plan gives the job notice
	// (keep, checkpoint now, stop next round; its lease answers say
	// checkpoint_now).
	Intent        string `json:"intent,omitempty"`
	Reason        string `json:"reason,omitempty"`
	CheckpointNow bool   `json:"checkpoint_now,omitempty"`
	// RunSinceS is when its current run began (the snapshot's clock, as
	// arrival_s; absent when not running or unknown): a minimum runtime
	// counts from it.
	RunSinceS float64 `json:"run_since_s,omitempty"`
	// CheckpointAt is the checkpoint it last reported (the lease API's
	// checkpoint_at), RestoreS what its last (re)start cost: its reported
	// restore_s, else its measured start latency; absent when unknown.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	RestoreS     float64    `json:"restore_s,omitempty"`
	// Namespace is the job's Nomad namespace (when the backend has one).
	Namespace string `json:"namespace,omitempty"`
	// A job that does not run: Pending is why (the round's own reason,
	// engine.Plan.Waiting, or the backend's rejection), PendingKind its
	// key (engine.WaitKeys: the metric's reason label), QueuePosition its
	// place in its VC's queue (1: next) and Priority its round priority.
	// State is "rejected" (Rondo will not schedule it as submitted) or
	// "unschedulable" (larger than its VC can ever hold) for such jobs.
	Pending       string  `json:"pending_reason,omitempty"`
	PendingKind   string  `json:"pending_kind,omitempty"`
	QueuePosition int     `json:"queue_position,omitempty"`
	Priority      float64 `json:"priority,omitempty"`
	// WaitS is how long it has waited: since its arrival when it never
	// ran, else since it last stopped (0 while running).
	WaitS float64 `json:"wait_s,omitempty"`
	// History is the job's rounds that changed something (admits,
	// suspensions, migrations, resizes, notices) with their reasons,
	// oldest first; only GET /v1/jobs/{id} fills it.
	History []RoundEvent `json:"history,omitempty"`
}

// TypeThroughput is a job's throughput on one GPU type and its source.
type TypeThroughput struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// throughputsOf is a job's Throughputs (nil for none); a type without a
// source is the table's.
func throughputsOf(j *engine.Job) map[string]TypeThroughput {
	if len(j.Throughput) == 0 {
		return nil
	}
	out := make(map[string]TypeThroughput, len(j.Throughput))
	for t, v := range j.Throughput {
		src := j.ThroughputSource[t]
		if src == "" {
			src = engine.SourceTable
		}
		out[t] = TypeThroughput{Value: v, Source: src}
	}
	return out
}

// Status is what GET /v1/status returns.
type Status struct {
	Cluster      string               `json:"cluster"`
	Policy       string               `json:"policy"`
	VCs          []VC                 `json:"vcs"`
	Round        int                  `json:"round"`
	RoundSeconds float64              `json:"round_seconds"`
	LastRound    time.Time            `json:"last_round"`
	NextRound    time.Time            `json:"next_round"`
	Types        map[string]TypeUsage `json:"types"`
	Jobs         []JobStatus          `json:"jobs"`
	LastError    string               `json:"last_error,omitempty"`
	// Durable is true when the state is kept in a Store; StateSavedAt is
	// the last successful save.
	Durable      bool      `json:"durable"`
	StateSavedAt time.Time `json:"state_saved_at,omitempty"`
	// Reconciled reports how the decision a crash left in flight was
	// settled at start: job → "applied" or "rolled back".
	Reconciled map[string]string `json:"reconciled,omitempty"`
	// Reservations are the GPUs the last plan holds for waiting gangs
	// (reserve_after; engine.Plan.Reservations): idle or backfilled until
	// the gang starts on them.
	Reservations []engine.Reservation `json:"reservations,omitempty"`
	// Leader is true when this agent holds the leader lock (or runs
	// without one); a standby names the leader's status address in
	// LeaderAddr when it knows it.
	Leader     bool   `json:"leader"`
	LeaderAddr string `json:"leader_addr,omitempty"`
	// Version is the agent's build.
	Version string `json:"version,omitempty"`
	// Nodes are the cluster's nodes with their GPUs and the jobs on them.
	Nodes []NodeStatus `json:"nodes,omitempty"`
}

// Agent runs rounds.
type Agent struct {
	mu     sync.Mutex
	cfg    Config
	status Status

	// smu guards the durable state: the round loop and the lease API's
	// progress reports both write it.
	smu sync.Mutex
	st  *state.State

	// What the lease API answers from, set by each round (under mu).
	known   map[string]bool // active jobs
	planned map[string]bool // jobs the current plan runs
	// notice: jobs the current plan gives notice (a keep with
	// engine.JobIntent.Checkpoint): their leases say checkpoint_now.
	notice map[string]bool

	// For job status (under mu): rounds each job got GPUs, and jobs that
	// left the snapshot (finished) with their last status.
	rounds map[string]int
	done   map[string]JobStatus
	// refused are the jobs the last plan refused, with the reason.
	refused map[string]string
	// tracks are each listed job's history and what its pending fields
	// need between rounds (pending.go; in memory only).
	tracks map[string]*tracked

	// measured gathers the lease API's throughput reports since the last
	// snapshot, per job and GPU type (under smu); Observed hands their
	// mean to the round as engine.Job.Measured.
	measured map[string]map[string]*reports
	// partner: the job each job shares its GPUs with under the decision
	// in force (space sharing; under smu). Its reports are pair
	// throughputs, not the job's own isolated throughput.
	partner map[string]string
	// measuredWith gathers the pair throughputs reported since the last
	// snapshot (under smu); Observed hands a pair's to the round as
	// engine.Pair.Measured once both jobs reported.
	measuredWith map[pairReport]*reports

	// owners caches allocation → job for the lease API's child callers
	// (under mu).
	owners map[string]string
	// startedAt: jobs a round (re)started (Event), by the start of that
	// round, until their first progress report measures their start
	// latency (under smu).
	startedAt map[string]time.Time

	// accounts: each VC's GPU time since the agent started, by name
	// (under mu; vcview.go).
	accounts map[string]*vcAccount

	// blind: the last round could not observe Nomad (under mu).
	blind bool
	// begin is when the round in progress started (under mu); marks are
	// its backend's credit marks (the round's own).
	begin time.Time
	marks map[string]state.Credit

	// timeline: the last rounds' samples (timeline.go; under mu).
	timeline timeline
}

// New makes an agent.
func New(cfg Config) *Agent {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Agent{cfg: cfg, st: state.New(), known: map[string]bool{}, planned: map[string]bool{},
		rounds: map[string]int{}, done: map[string]JobStatus{}, measured: map[string]map[string]*reports{},
		measuredWith: map[pairReport]*reports{}, owners: map[string]string{}, notice: map[string]bool{},
		startedAt: map[string]time.Time{},
		status: Status{Cluster: cfg.Cluster, Policy: cfg.Policy, VCs: slices.Clone(cfg.VCs), Durable: cfg.Store != nil,
			RoundSeconds: cfg.Round.Seconds(), Types: map[string]TypeUsage{}, Leader: true, Version: version.Version}}
}

// Reconfigure swaps the engine (nil keeps it), the round length and the
// shown VCs; it takes effect at the next round.
func (a *Agent) Reconfigure(e Decider, policy string, round time.Duration, vcs []VC) {
	if e != nil {
		// The new decider carries on from the old one's history where it
		// can (same policies); else it starts fresh. (smu before mu: save
		// takes them in that order.)
		a.smu.Lock()
		h := a.st.Engine
		a.restoreMeasured(e, a.st)
		a.smu.Unlock()
		a.restoreHistory(e, h)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e != nil {
		a.cfg.Engine, a.cfg.Policy, a.status.Policy = e, policy, policy
	}
	a.cfg.Round, a.status.RoundSeconds = round, round.Seconds()
	a.cfg.VCs, a.status.VCs = vcs, slices.Clone(vcs)
}

// ErrLostState is returned by Run when the state was written by another
// allocator (a check-and-set conflict): this one must stop acting.
var ErrLostState = errors.New("agent: the durable state was changed by another allocator")

// Start loads the durable state (when a Store is configured), restores the
// backend's history and settles a decision left in flight by a crash.
// Run calls it; it is exported for tests.
func (a *Agent) Start(ctx context.Context) error {
	a.mu.Lock()
	store, b, log := a.cfg.Store, a.cfg.Backend, a.cfg.Logger
	a.mu.Unlock()
	st := state.New()
	if store != nil {
		var err error
		if st, err = store.Load(ctx); err != nil {
			return err
		}
	}
	d, durable := b.(Durable)
	if durable {
		if st.Epoch.IsZero() {
			st.Epoch = d.Epoch()
		}
		d.Restore(st.Epoch, st.Arrival, st.Received)
		if c, ok := b.(Creditor); ok {
			c.RestoreCredit(st.Credit)
		}
	}
	reconciled := map[string]string{}
	if st.InFlight != nil {
		pending := st.Pending()
		log.Warn("a decision was in flight when the previous allocator stopped", "round", st.InFlight.Round,
			"intents", len(st.InFlight.Intents), "pending", len(pending))
		if durable && len(pending) > 0 {
			applied, rolled, err := d.Reconcile(pending)
			if err != nil {
				return fmt.Errorf("agent: reconcile: %w", err)
			}
			for _, j := range applied {
				reconciled[j] = "applied"
			}
			for _, j := range rolled {
				reconciled[j] = "rolled back"
			}
		}
		st.Finish()
	}
	if store != nil {
		if err := store.Save(ctx, st); err != nil {
			return a.saveErr(err)
		}
	}
	a.mu.Lock()
	dec := a.cfg.Engine
	a.mu.Unlock()
	a.restoreHistory(dec, st.Engine)
	a.smu.Lock()
	a.st = st
	a.restoreMeasured(dec, st)
	a.smu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.Round = int(st.Round)
	a.status.StateSavedAt = st.SavedAt
	if len(reconciled) > 0 {
		a.status.Reconciled = reconciled
	}
	for _, j := range st.Jobs() {
		a.known[j] = true
	}
	log.Info("state loaded", "durable", store != nil, "round", st.Round, "jobs", len(st.Jobs()))
	return nil
}

// restoreHistory gives the decider the saved history, if it keeps one; a
// history it cannot take (another policy, a config change) is logged and
// the decider starts fresh.
func (a *Agent) restoreHistory(dec Decider, h []byte) {
	hk, ok := dec.(HistoryKeeper)
	if !ok || len(h) == 0 {
		return
	}
	if err := hk.UnmarshalHistory(h); err != nil {
		a.cfg.Logger.Warn("engine history not restored; the engine starts fresh", "error", err)
		return
	}
	a.cfg.Logger.Info("engine history restored", "bytes", len(h))
}

func (a *Agent) saveErr(err error) error {
	if errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("%w: %v", ErrLostState, err)
	}
	return err
}

// Run loads the state (Start), then runs a round at once and every Round
// until ctx ends or the state is lost to another writer.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	clock := &loop.Wall{
		Period: func() time.Duration {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.cfg.Round
		},
		OnNext: func(t time.Time) {
			a.mu.Lock()
			a.status.NextRound = t
			a.mu.Unlock()
		},
	}
	return loop.Run(ctx, clock, a.StepContext, func(err error) bool { return errors.Is(err, ErrLostState) })
}

// Step runs one round: observe, decide, record, enforce.
func (a *Agent) Step() { a.StepContext(context.Background()) }

// StepContext runs one round of the driver loop (allocator/loop) with the
// agent as its Recorder: the decision is saved (state.Begin) before
// anything is enforced, intents are marked applied as the backend reports
// them (OnEvent), and the state is saved again once the plan is enforced
// (state.Finish). It returns the round's error; ErrLostState means another
// allocator wrote the state.
func (a *Agent) StepContext(ctx context.Context) error {
	a.mu.Lock()
	b, e, log, tel := a.cfg.Backend, a.cfg.Engine, a.cfg.Logger, a.cfg.Telemetry
	a.begin = time.Now()
	a.mu.Unlock()
	_, _, err := (loop.Round{Backend: b, Decider: e, Recorder: a, Explain: true}).Step(ctx)
	if tel != nil {
		tel.RoundEnded(err)
	}
	if err != nil {
		log.Error("round failed", "error", err)
		a.mu.Lock()
		a.status.LastError = err.Error()
		// Nomad was unreachable (or the round was cut short by losing the
		// lock to it): the next round that sees Nomad re-plans from scratch.
		if loop.Observing(err) || state.Transient(err) || errors.Is(err, context.Canceled) {
			a.blind = true
		}
		a.mu.Unlock()
		return err
	}
	a.mu.Lock()
	a.status.LastError = ""
	a.mu.Unlock()
	return nil
}

// Observed prepares the decision (loop.Recorder): a reset after rounds
// that could not see Nomad, the backend's credit marks (what the
// snapshot's received time is up to) and the throughputs measured since
// the last round (the estimating stage learns from them).
func (a *Agent) Observed(_ context.Context, s *engine.Snapshot) error {
	a.mu.Lock()
	blind, e, b, log := a.blind, a.cfg.Engine, a.cfg.Backend, a.cfg.Logger
	a.blind = false
	a.mu.Unlock()
	if r, ok := e.(Resetter); ok && blind {
		log.Info("Nomad observed again after failed rounds: the allocation is recomputed")
		r.RequestReset()
	}
	a.marks = nil
	if c, ok := b.(Creditor); ok {
		a.marks = c.CreditMarks()
	}
	a.rejectUndeclared(s)
	a.rejectNamespaces(s)
	a.applyMeasured(s)
	return nil
}

// Decided records the history and the decision before any of it is
// enforced (loop.Recorder); a failed save means nothing is enforced.
func (a *Agent) Decided(ctx context.Context, s *engine.Snapshot, p *engine.Plan) error {
	a.mu.Lock()
	b, e, log, store := a.cfg.Backend, a.cfg.Engine, a.cfg.Logger, a.cfg.Store
	a.mu.Unlock()
	var intents []state.Intent
	if d, ok := b.(Durable); ok {
		intents = d.Intents(p)
	}
	a.smu.Lock()
	st := a.st
	active := map[string]bool{}
	for _, j := range s.Jobs {
		active[j.ID] = true
		st.Arrival[j.ID] = j.ArrivalS
		if len(j.ReceivedS) > 0 {
			st.Received[j.ID] = maps.Clone(j.ReceivedS)
		}
		if m, ok := a.marks[j.ID]; ok {
			if st.Credit == nil {
				st.Credit = map[string]state.Credit{}
			}
			st.Credit[j.ID] = m
		}
	}
	for _, id := range st.Jobs() {
		if !active[id] {
			st.RemoveJob(id) // finished or gone
		}
	}
	for id := range st.Checkpoints {
		if !active[id] {
			delete(st.Checkpoints, id) // reported, never in a snapshot
		}
	}
	for id := range a.startedAt {
		if !active[id] {
			delete(a.startedAt, id)
		}
	}
	if hk, ok := e.(HistoryKeeper); ok {
		if h, err := hk.MarshalHistory(); err != nil {
			log.Warn("engine history not saved", "error", err)
		} else {
			st.Engine = h
		}
	}
	a.partner = map[string]string{}
	for _, in := range p.Intents {
		if in.With != "" { // only a running unit's intents name a partner
			a.partner[in.Job] = in.With
		}
	}
	round := st.Round + 1
	st.Begin(state.Decision{ID: fmt.Sprintf("round-%d", round), Round: round, RecordedAt: time.Now().UTC(), Intents: intents})
	err := a.save(ctx, store, st)
	a.smu.Unlock()
	if err != nil {
		return fmt.Errorf("record decision (nothing enforced): %w", a.saveErr(err))
	}
	a.record(s, p, int(round))
	starts := 0
	for _, as := range p.Assignments {
		if as.Action == engine.Start {
			starts++
		}
	}
	log.Info("round", "round", round, "jobs", len(s.Jobs), "assignments", len(p.Assignments),
		"starts", starts, "suspends", len(p.Suspend), "recomputed", p.Recomputed)
	if log.IsDebug() {
		log.Debug("round plan", "round", round, "plan", planSummary(s, p))
	}
	return nil
}

// Enforced closes the decision once the plan is enforced (loop.Recorder).
// On an enforcement error the decision stays in flight with its applied
// marks; the next round's Begin replaces it (Nomad is re-observed).
func (a *Agent) Enforced(ctx context.Context, s *engine.Snapshot, p *engine.Plan, eerr error) error {
	a.mu.Lock()
	store, tel, begin := a.cfg.Store, a.cfg.Telemetry, a.begin
	a.mu.Unlock()
	a.smu.Lock()
	if eerr == nil {
		a.st.Finish()
	}
	serr := a.save(ctx, store, a.st)
	a.smu.Unlock()
	if tel != nil {
		tel.Round(time.Since(begin), s, p)
	}
	if eerr != nil {
		return eerr
	}
	if serr != nil {
		return a.saveErr(serr)
	}
	return nil
}

// save persists st (a no-op without a Store); call with smu held.
func (a *Agent) save(ctx context.Context, store Store, st *state.State) error {
	if store == nil {
		return nil
	}
	if err := store.Save(ctx, st); err != nil {
		return err
	}
	a.mu.Lock()
	a.status.StateSavedAt = st.SavedAt
	a.mu.Unlock()
	return nil
}

// Event is the backend's OnEvent hook: it marks the job's intent applied and
// counts the decision (admit, suspend, resume, migrate, preempt, retune,
// and an elastic job's grow or shrink).
func (a *Agent) Event(job, event string) {
	a.mu.Lock()
	tel, begin := a.cfg.Telemetry, a.begin
	a.mu.Unlock()
	a.smu.Lock()
	a.markAnyNamespace(job)
	switch event {
	case "admit", "resume", "migrate", "retune":
		// A (re)start: its first progress report measures its start
		// latency, from this round's start (recordCheckpoint).
		if begin.IsZero() {
			begin = time.Now()
		}
		a.startedAt[job] = begin
	}
	a.smu.Unlock()
	if tel != nil {
		switch event {
		case "admit", "suspend", "resume", "migrate", "preempt", "retune", "grow", "shrink":
			tel.Decision(event)
		}
	}
}

// markAnyNamespace marks the in-flight intent of job applied whatever its
// namespace (job is the backend's key, unique across namespaces). smu held.
func (a *Agent) markAnyNamespace(job string) bool {
	if a.st.InFlight == nil {
		return false
	}
	for i := range a.st.InFlight.Intents {
		if a.st.InFlight.Intents[i].Job == job {
			a.st.InFlight.Intents[i].Applied = true
			return true
		}
	}
	return false
}

func (a *Agent) record(s *engine.Snapshot, p *engine.Plan, round int) {
	a.smu.Lock()
	cks := maps.Clone(a.st.Checkpoints)
	a.smu.Unlock()
	types := map[string]TypeUsage{}
	for _, g := range s.GPUs {
		u := types[g.Type]
		u.Total++
		if g.Failed {
			u.Failed++
		}
		types[g.Type] = u
	}
	on := map[string]engine.Assignment{}
	for _, as := range p.Assignments {
		u := types[as.Type]
		u.Used += len(as.GPUs)
		types[as.Type] = u
		for _, j := range as.Jobs {
			on[j] = as
		}
	}
	xs := map[string]map[string]float64{}
	if al := p.Allocation; al != nil {
		for m, id := range al.JobIDs {
			row := make(map[string]float64, len(al.Types))
			for k, t := range al.Types {
				if k < len(al.X[m]) {
					row[t] = al.X[m][k]
				}
			}
			xs[id] = row
		}
	}
	pairTput := make(map[string]map[string][2]float64, len(s.Pairs))
	for _, pr := range s.Pairs {
		pairTput[engine.UnitKey(pr.Jobs[:])] = pr.Throughput
	}
	intents := make(map[string]engine.JobIntent, len(p.Intents))
	notice := map[string]bool{}
	for _, ji := range p.Intents {
		intents[ji.Job] = ji
		if ji.Checkpoint && !ji.Intent.Stops() {
			notice[ji.Job] = true
		}
	}
	reserved := make(map[string]engine.Reservation, len(p.Reservations))
	for _, r := range p.Reservations {
		reserved[r.Job] = r
	}
	waits := make(map[string]*engine.Waiting, len(p.Waiting))
	for i := range p.Waiting {
		waits[p.Waiting[i].Job] = &p.Waiting[i]
	}
	refused := map[string]string{}
	for _, u := range p.Users {
		for j, why := range u.Refused {
			refused[j] = why
		}
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	// A refused job is logged once, when first refused (and again if it
	// is refused anew after being accepted).
	for j, why := range refused {
		if a.refused[j] != why {
			a.cfg.Logger.Warn("job refused: it will never run", "job", j, "reason", why)
		}
	}
	a.refused = refused
	a.recordUsers(p.Users)
	a.pendingRound(s, p, round, now)
	jobs := make([]JobStatus, 0, len(s.Jobs))
	known := make(map[string]bool, len(s.Jobs))
	for _, j := range s.Jobs {
		known[j.ID] = true
		js := JobStatus{ID: j.ID, State: "queued", ScaleFactor: j.ScaleFactor, RemainingSteps: j.RemainingSteps,
			TotalSteps: j.TotalSteps, ArrivalS: j.ArrivalS, ReceivedS: maps.Clone(j.ReceivedS), X: xs[j.ID], VC: j.VC,
			User: j.User, Refused: refused[j.ID], CheckpointNow: notice[j.ID], Namespace: j.Namespace,
			Throughputs: throughputsOf(&j)}
		if ji, ok := intents[j.ID]; ok {
			js.Intent, js.Reason = string(ji.Intent), ji.Reason.String()
		} else if r, ok := reserved[j.ID]; ok {
			js.Reason = r.Reason().String() // a gang waiting on its reservation
		}
		if ck, ok := cks[j.ID]; ok {
			if !ck.At.IsZero() {
				at := ck.At
				js.CheckpointAt = &at
			}
			switch {
			case ck.RestoreS != nil:
				js.RestoreS = *ck.RestoreS
			case ck.StartLatencyS != nil:
				js.RestoreS = *ck.StartLatencyS
			}
		}
		for _, v := range j.ReceivedS {
			if v > 0 {
				js.State = "suspended"
			}
		}
		step := 0
		if j.Elastic != nil {
			step = max(j.Elastic.StepGPUs, 1)
			js.MinWorkers, js.MaxWorkers = max(j.ScaleFactor, 1)/step, j.Elastic.MaxGPUs/step
			if ps := j.Elastic.PS; ps != nil {
				js.MinPS, js.MaxPS = ps.Min, ps.Max
			}
		}
		if as, ok := on[j.ID]; ok {
			a.rounds[j.ID]++
			js.State, js.Type, js.GPUs = "running", as.Type, as.GPUs
			if ji, ok := intents[j.ID]; ok && ji.Intent == engine.IntentKeep {
				js.RunSinceS = j.RunSinceS // a start begins a new run
			}
			if step > 0 {
				js.Workers = len(as.GPUs) / step
				js.PS = as.PS
			}
			tp := j.Throughput[as.Type]
			if len(as.Jobs) == 2 {
				k := slices.Index(as.Jobs, j.ID)
				js.With = as.Jobs[1-k]
				tp = pairTput[engine.UnitKey(as.Jobs)][as.Type][k]
			}
			if tp > 0 {
				js.Throughput = tp
				eta := now.Add(time.Duration(j.RemainingSteps / tp * float64(time.Second)))
				js.ETA = &eta
			}
		}
		js.Rounds = a.rounds[j.ID]
		_, running := on[j.ID]
		a.pending(&js, &j, s, waits[j.ID], refused[j.ID], running, round, now)
		jobs = append(jobs, js)
	}
	// Rejected jobs are listed, never leased (not known to the lease API).
	rejected := make(map[string]bool, len(s.Rejected))
	for _, r := range s.Rejected {
		if !known[r.Job] && !rejected[r.Job] {
			rejected[r.Job] = true
			jobs = append(jobs, a.rejected(r, s, round, now))
		}
	}
	// Jobs that were active last round and are gone have finished (or
	// were removed); keep the last few for `rondo job status`.
	for _, prev := range a.status.Jobs {
		if !known[prev.ID] && !rejected[prev.ID] && prev.State != "done" && prev.State != "rejected" {
			prev.State, prev.GPUs, prev.ETA, prev.Throughput, prev.X = "done", nil, nil, 0, nil
			a.done[prev.ID] = prev
			delete(a.rounds, prev.ID)
		}
	}
	const keepDone = 200
	for id := range a.done {
		if known[id] || rejected[id] || len(a.done) > keepDone {
			delete(a.done, id)
		}
	}
	stateOrder := map[string]int{"running": 0, "suspended": 1, "queued": 2, "unschedulable": 3, "rejected": 4, "done": 5}
	sort.SliceStable(jobs, func(i, k int) bool { return stateOrder[jobs[i].State] < stateOrder[jobs[k].State] })
	doneIDs := make([]string, 0, len(a.done))
	for id := range a.done {
		doneIDs = append(doneIDs, id)
	}
	sort.Strings(doneIDs)
	for _, id := range doneIDs {
		jobs = append(jobs, a.done[id])
	}
	listed := make(map[string]bool, len(jobs))
	for _, js := range jobs {
		listed[js.ID] = true
	}
	a.forgetTracks(listed)
	planned := make(map[string]bool, len(on))
	for j := range on {
		planned[j] = true
	}
	a.known, a.planned, a.notice = known, planned, notice
	a.status.Reservations = slices.Clone(p.Reservations)
	a.status.Round = round
	a.status.LastRound = now
	a.status.Types = types
	a.status.Jobs = jobs
	a.recordViews(s, p, xs, jobs)
	a.sample(s, p, round, now)
}

// recordUsers puts the user-level mechanisms' shares on their VCs' status
// (a plan without a VC's users clears them: no active user). Under a.mu.
func (a *Agent) recordUsers(us []engine.UserShares) {
	for i := range a.status.VCs {
		v := &a.status.VCs[i]
		v.Users, v.Trades, v.Migrations = nil, nil, 0
		for _, u := range us {
			if u.VC == v.Name || (u.VC == "" && len(a.status.VCs) == 1) {
				v.Users, v.Trades, v.Migrations = u.Users, u.Trades, u.Migrations
			}
		}
	}
}

// reports is the running mean of one job's reports on one GPU type.
type reports struct {
	sum float64
	n   int
}

func (r *reports) add(v float64) {
	r.sum += v
	r.n++
}

// pairReport names what a job reported while sharing GPUs of a type with
// its partner.
type pairReport struct{ job, partner, typ string }

// applyMeasured puts the throughputs reported since the last snapshot in
// it (engine.Job.Measured: their mean per GPU type, one sample for the
// estimating stage) and starts gathering anew.
func (a *Agent) applyMeasured(s *engine.Snapshot) {
	a.smu.Lock()
	defer a.smu.Unlock()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		r := a.measured[j.ID]
		if len(r) == 0 {
			continue
		}
		j.Measured = maps.Clone(j.Measured) // the backend may share the map
		if j.Measured == nil {
			j.Measured = make(map[string]float64, len(r))
		}
		for typ, m := range r {
			j.Measured[typ] = m.sum / float64(m.n)
		}
	}
	clear(a.measured)
	if len(a.measuredWith) == 0 {
		return
	}
	pairs := slices.Clone(s.Pairs) // the backend may share its list
	at := make(map[[2]string]int, len(pairs))
	for i, pr := range pairs {
		at[pr.Jobs] = i
	}
	for r0, m0 := range a.measuredWith {
		i, ok := at[[2]string{r0.job, r0.partner}]
		m1 := a.measuredWith[pairReport{r0.partner, r0.job, r0.typ}]
		if !ok || m1 == nil {
			continue // not offered any more, or the partner's report has not come
		}
		pr := &pairs[i]
		pr.Measured = maps.Clone(pr.Measured)
		if pr.Measured == nil {
			pr.Measured = map[string][2]float64{}
		}
		pr.Measured[r0.typ] = [2]float64{m0.sum / float64(m0.n), m1.sum / float64(m1.n)}
	}
	s.Pairs = pairs
	clear(a.measuredWith)
}

// restoreMeasured gives dec the measurements st kept, if it learns from
// them (under smu).
func (a *Agent) restoreMeasured(dec Decider, st *state.State) {
	mr, ok := dec.(MeasurementRestorer)
	if !ok {
		return
	}
	for job, types := range st.Throughput {
		for typ, m := range types {
			mr.RestoreMeasured(job, typ, m.StepsPerSec)
		}
	}
}

// SetLeader says whether this agent acts (holds the leader lock, or runs
// without one) and, on a standby, the leader's status address when known:
// Status.Leader, Status.LeaderAddr and rondo_leader. An agent is leader
// until told otherwise.
func (a *Agent) SetLeader(leader bool, leaderAddr string) {
	a.mu.Lock()
	a.status.Leader, a.status.LeaderAddr = leader, leaderAddr
	tel := a.cfg.Telemetry
	a.mu.Unlock()
	if tel != nil {
		tel.SetLeader(leader)
	}
}

// IsLeader says whether this agent holds the leader lock (SetLeader).
func (a *Agent) IsLeader() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status.Leader
}

// Status returns a copy of the current status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.Jobs = append([]JobStatus(nil), s.Jobs...)
	s.VCs = slices.Clone(s.VCs) // recordUsers and recordViews rewrite the elements
	s.Nodes = slices.Clone(s.Nodes)
	s.Types = make(map[string]TypeUsage, len(a.status.Types))
	for k, v := range a.status.Types {
		s.Types[k] = v
	}
	return s
}

// Handler serves GET /v1/status, GET /v1/jobs/{id} (one job with its
// history, pending.go) and GET /v1/timeline (?since=ROUND: the rounds
// after it) as JSON, GET /v1/health, GET /metrics (Prometheus) when
// Telemetry is configured, and the web status page under /ui/
// (allocator/webui; withPage). With an Authorizer every path but
// /metrics, /v1/health and the page's files needs a token (auth.go).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	if a.cfg.Telemetry != nil {
		mux.Handle("GET /metrics", a.cfg.Telemetry.Handler())
	}
	mux.HandleFunc("GET /v1/health", a.health)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(a.Status())
	})
	mux.HandleFunc("GET /v1/jobs/{id...}", a.serveJob) // a key may hold a slash ("team-b/train")
	mux.HandleFunc("GET /v1/timeline", func(w http.ResponseWriter, r *http.Request) {
		since := 0
		if v := r.URL.Query().Get("since"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				http.Error(w, "since: not a round number: "+v, http.StatusBadRequest)
				return
			}
			since = n
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.Timeline(since))
	})
	return withPage(a.guard(mux))
}

// withPage serves the web status page's files under /ui/ (and redirects
// /ui there, keeping ?token=) in front of the API h. The files are the
// same for everyone and hold no cluster data, so they need no token, as
// Nomad's own UI: the page sends its token (?token=, kept in the browser)
// with each API request, which is where a token check belongs (wrap h,
// not this), and asks for one on a 401 or 403.
func withPage(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", webui.Handler())
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		u := "/ui/"
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery // keeps ?token=
		}
		http.Redirect(w, r, u, http.StatusFound)
	})
	mux.Handle("/", h)
	return mux
}

// planSummary is a round's snapshot and plan in one line, for debug logs:
// the healthy GPUs per type, what ran, and the plan's assignments (job@type
// gpus action) and suspensions.
func planSummary(s *engine.Snapshot, p *engine.Plan) string {
	var b strings.Builder
	healthy := map[string]int{}
	for _, g := range s.GPUs {
		if !g.Failed {
			healthy[g.Type]++
		}
	}
	types := slices.Sorted(maps.Keys(healthy))
	b.WriteString("healthy:")
	for _, t := range types {
		fmt.Fprintf(&b, " %s=%d", t, healthy[t])
	}
	b.WriteString("; ran:")
	for _, a := range s.Running {
		fmt.Fprintf(&b, " %s@%s%v", strings.Join(a.Jobs, "+"), a.Type, a.GPUs)
	}
	b.WriteString("; plan:")
	for _, a := range p.Assignments {
		fmt.Fprintf(&b, " %s@%s%v:%s", strings.Join(a.Jobs, "+"), a.Type, a.GPUs, a.Action)
	}
	fmt.Fprintf(&b, "; suspend: %v", p.Suspend)
	return b.String()
}

// Package agent runs the allocator's rounds against a backend on a wall
// clock and serves its status over HTTP. It knows engine types only; the
// command wires a backend (Nomad) and the config.
package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// Config configures an Agent.
type Config struct {
	Backend engine.Backend
	Engine  *engine.Engine
	Round   time.Duration
	Logger  hclog.Logger
	// Cluster and VCs are shown in the status.
	Cluster string
	Policy  string
	VCs     []VC
}

// VC is a virtual cluster as the status shows it.
type VC struct {
	Name   string `json:"name"`
	Policy string `json:"policy"`
}

// TypeUsage counts one GPU type's GPUs.
type TypeUsage struct {
	Total  int `json:"total"`
	Failed int `json:"failed"`
	Used   int `json:"used"`
}

// JobStatus is one active job in the last round.
type JobStatus struct {
	ID             string   `json:"id"`
	State          string   `json:"state"` // running or waiting
	Type           string   `json:"type,omitempty"`
	GPUs           []string `json:"gpus,omitempty"`
	ScaleFactor    int      `json:"scale_factor"`
	RemainingSteps float64  `json:"remaining_steps"`
	TotalSteps     float64  `json:"total_steps"`
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
}

// Agent runs rounds.
type Agent struct {
	mu     sync.Mutex
	cfg    Config
	status Status
}

// New makes an agent.
func New(cfg Config) *Agent {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Agent{cfg: cfg, status: Status{Cluster: cfg.Cluster, Policy: cfg.Policy, VCs: cfg.VCs,
		RoundSeconds: cfg.Round.Seconds(), Types: map[string]TypeUsage{}}}
}

// Reconfigure swaps the engine (nil keeps it), the round length and the
// shown VCs; it takes effect at the next round.
func (a *Agent) Reconfigure(e *engine.Engine, policy string, round time.Duration, vcs []VC) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e != nil {
		a.cfg.Engine, a.cfg.Policy, a.status.Policy = e, policy, policy
	}
	a.cfg.Round, a.status.RoundSeconds = round, round.Seconds()
	a.cfg.VCs, a.status.VCs = vcs, vcs
}

// Run runs a round at once and then every Round until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	for {
		start := time.Now()
		a.Step()
		a.mu.Lock()
		next := start.Add(a.cfg.Round)
		a.status.NextRound = next
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

// Step runs one round: observe, decide, enforce.
func (a *Agent) Step() {
	a.mu.Lock()
	b, e, log := a.cfg.Backend, a.cfg.Engine, a.cfg.Logger
	a.mu.Unlock()
	fail := func(err error) {
		log.Error("round failed", "error", err)
		a.mu.Lock()
		a.status.LastError = err.Error()
		a.mu.Unlock()
	}
	s, err := b.Observe()
	if err != nil {
		fail(err)
		return
	}
	p, err := e.Round(s)
	if err != nil {
		fail(err)
		return
	}
	a.record(s, p)
	starts := 0
	for _, as := range p.Assignments {
		if as.Action == engine.Start {
			starts++
		}
	}
	log.Info("round", "round", a.Status().Round, "jobs", len(s.Jobs), "assignments", len(p.Assignments),
		"starts", starts, "suspends", len(p.Suspend), "recomputed", p.Recomputed)
	if err := b.Enforce(p); err != nil {
		fail(err)
		return
	}
	a.mu.Lock()
	a.status.LastError = ""
	a.mu.Unlock()
}

func (a *Agent) record(s *engine.Snapshot, p *engine.Plan) {
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
	jobs := make([]JobStatus, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		js := JobStatus{ID: j.ID, State: "waiting", ScaleFactor: j.ScaleFactor, RemainingSteps: j.RemainingSteps, TotalSteps: j.TotalSteps}
		if as, ok := on[j.ID]; ok {
			js.State, js.Type, js.GPUs = "running", as.Type, as.GPUs
		}
		jobs = append(jobs, js)
	}
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].State == "running" && jobs[k].State != "running" })
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status.Round++
	a.status.LastRound = time.Now()
	a.status.Types = types
	a.status.Jobs = jobs
}

// Status returns a copy of the current status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.Jobs = append([]JobStatus(nil), s.Jobs...)
	s.Types = make(map[string]TypeUsage, len(a.status.Types))
	for k, v := range a.status.Types {
		s.Types[k] = v
	}
	return s
}

// Handler serves GET /v1/status as JSON.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(a.Status())
	})
	return mux
}

// Package fair is Gandiva-fair's mechanism (Chaudhary et al., EuroSys'20)
// for one VC: a drop-in for the Gavel engine's role in the round. Each
// round it takes an engine.Snapshot and returns an engine.Plan.
//
// On events (arrival, departure, healthy GPUs changed, RequestReset, the
// first round) it computes each user's share of every GPU generation
// (policies/fairshare: ticket-weighted water-filling, then trading), binds
// new jobs to a generation and a server (small jobs) or to the fewest
// servers holding them (multi-server gangs), and splits each user's share
// over its jobs as job tickets. Every quantum, gangs run centrally when
// they head every server's queue, then each server runs stride
// scheduling over its small jobs with backfill (stride.go). Load
// balancing migrates small jobs between servers (bind.go).
package fair

import (
	"errors"
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// Config configures a Scheduler.
type Config struct {
	// RoundS is the loop's round length in seconds (0: 360).
	RoundS float64
	// QuantumRounds is the quantum in rounds (0: 1).
	QuantumRounds int
	// Tickets per user; missing users get fairshare.DefaultTickets.
	Tickets map[string]int
	// Trading lets users trade generations (fairshare.TradeShares).
	Trading bool
	// TradeMargin is the market's margin (0: 0.05).
	TradeMargin float64
	// MaxMigrations bounds load-balancing moves per round (0: 2).
	MaxMigrations int
	// Imbalance is the load-balancing threshold: (max - min) / mean of the
	// servers' loads within a generation (0: 0.25).
	Imbalance float64
	// ResetFirst makes the first round recompute shares and tickets even
	// when a restored history records no event: the scheduler replaces
	// one whose users' tickets or trading changed (a reload).
	ResetFirst bool
}

const (
	defaultRoundS        = 360
	defaultMargin        = 0.05
	defaultMaxMigrations = 2
	defaultImbalance     = 0.25
	// strideL is stride scheduling's constant: stride = strideL / tickets.
	// Passes are floats, so it only sets their scale.
	strideL = 1 << 20
	// minTickets floors a job's tickets (a user whose share on the job's
	// generation is 0): the job then runs only on GPUs nobody else fits.
	minTickets = 1e-6
)

// Scheduler is Gandiva-fair's mechanism for one VC. It is not safe for
// concurrent use.
type Scheduler struct {
	cfg Config
	st  *state
	// Caches, rebuilt from the snapshot: the GPU layout, the allocation.
	lay   *layout
	alloc *policies.Allocation
	// Per round scratch.
	stamp int
	// firstDone: ResetFirst has been honoured (not in the history, so a
	// restore does not undo it).
	firstDone bool
}

// state is everything that changes later decisions: what MarshalHistory
// saves.
type state struct {
	// Rounds decided; the quantum starts when Rounds % QuantumRounds == 0.
	Rounds int `json:"rounds"`
	// Seen is false before the first round.
	Seen bool `json:"seen"`
	// Reset: RequestReset was called.
	Reset bool `json:"reset,omitempty"`
	// GPUSig and GPUCount identify the healthy GPUs of the last round.
	GPUSig   uint64 `json:"gpu_sig"`
	GPUCount int    `json:"gpu_count"`
	// Jobs are the runnable jobs of the last round with their binding,
	// pass and tickets.
	Jobs map[string]*jobState `json:"jobs"`
	// Fair are the shares before trading, Shares after, Trades the trades.
	Fair   fairshare.Shares  `json:"fair,omitempty"`
	Shares fairshare.Shares  `json:"shares,omitempty"`
	Trades []fairshare.Trade `json:"trades,omitempty"`
	// Received is the GPU-seconds each user was credited per type.
	Received map[string]map[string]float64 `json:"received,omitempty"`
	// Refused jobs with the reason.
	Refused map[string]string `json:"refused,omitempty"`
	// Migrations done; Balance: load balancing is pending.
	Migrations int  `json:"migrations"`
	Balance    bool `json:"balance,omitempty"`
}

// jobState is one runnable job's binding and stride state.
type jobState struct {
	User string `json:"user"`
	GPUs int    `json:"gpus"`
	// Type and Servers are the binding; one server for a small job.
	Type    string   `json:"type"`
	Servers []string `json:"servers"`
	Pass    float64  `json:"pass"`
	Tickets float64  `json:"tickets"`
	// LastRecv is the job's ReceivedS per type last round (what the pass
	// was charged up to).
	LastRecv map[string]float64 `json:"last_recv,omitempty"`

	// Per round, not saved.
	id    string
	job   *engine.Job
	order int
	stamp int
	srv   []*server // resolved Servers
	need  []int     // GPUs on each of srv
	rate  float64   // predicted GPUs (targets.go)
	pick  bool      // chosen this round
}

func (j *jobState) gang() bool { return len(j.Servers) > 1 }

// New validates cfg and returns a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.RoundS < 0 || math.IsNaN(cfg.RoundS) || math.IsInf(cfg.RoundS, 0) {
		return nil, fmt.Errorf("fair: round length %v", cfg.RoundS)
	}
	if cfg.RoundS == 0 {
		cfg.RoundS = defaultRoundS
	}
	if cfg.QuantumRounds < 0 {
		return nil, fmt.Errorf("fair: quantum of %d rounds", cfg.QuantumRounds)
	}
	if cfg.QuantumRounds == 0 {
		cfg.QuantumRounds = 1
	}
	for u, t := range cfg.Tickets {
		if t <= 0 {
			return nil, fmt.Errorf("fair: user %q has %d tickets (must be > 0)", u, t)
		}
	}
	if cfg.TradeMargin < 0 || cfg.TradeMargin >= 1 || math.IsNaN(cfg.TradeMargin) {
		return nil, fmt.Errorf("fair: trade margin %v (want [0, 1))", cfg.TradeMargin)
	}
	if cfg.TradeMargin == 0 {
		cfg.TradeMargin = defaultMargin
	}
	if cfg.MaxMigrations < 0 {
		return nil, fmt.Errorf("fair: %d migrations per round", cfg.MaxMigrations)
	}
	if cfg.MaxMigrations == 0 {
		cfg.MaxMigrations = defaultMaxMigrations
	}
	if cfg.Imbalance < 0 || math.IsNaN(cfg.Imbalance) || math.IsInf(cfg.Imbalance, 0) {
		return nil, fmt.Errorf("fair: imbalance threshold %v", cfg.Imbalance)
	}
	if cfg.Imbalance == 0 {
		cfg.Imbalance = defaultImbalance
	}
	return &Scheduler{cfg: cfg, st: newState()}, nil
}

func newState() *state {
	return &state{Jobs: map[string]*jobState{}, Received: map[string]map[string]float64{}, Refused: map[string]string{}}
}

// RequestReset recomputes the targets next round (after an outage).
func (s *Scheduler) RequestReset() { s.st.Reset = true }

func userOf(j *engine.Job) string {
	if j.User == "" {
		return "default"
	}
	return j.User
}

func (s *Scheduler) tickets(user string) int {
	if t, ok := s.cfg.Tickets[user]; ok {
		return t
	}
	return fairshare.DefaultTickets
}

func (s *Scheduler) quantumS() float64 { return s.cfg.RoundS * float64(s.cfg.QuantumRounds) }

// Round decides one round.
func (s *Scheduler) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	if snap == nil {
		return nil, errors.New("fair: nil snapshot")
	}
	st := s.st
	lay := s.layoutOf(snap.GPUs)
	event := !st.Seen || st.Reset || lay.sig != st.GPUSig || lay.n != st.GPUCount || (s.cfg.ResetFirst && !s.firstDone)
	s.firstDone = true
	departed := false
	s.stamp++

	// Runnable jobs, refusals, arrivals.
	clear(st.Refused)
	var arrived bool
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if reason := lay.refuse(j); reason != "" {
			st.Refused[j.ID] = reason
			continue
		}
		js := st.Jobs[j.ID]
		if js == nil {
			js = &jobState{User: userOf(j), GPUs: j.ScaleFactor, LastRecv: cloneRecv(j.ReceivedS)}
			st.Jobs[j.ID] = js
			arrived = true
		} else if js.GPUs != j.ScaleFactor || js.User != userOf(j) {
			// A resized or re-owned job: bind it again.
			js.GPUs, js.User, js.Type, js.Servers = j.ScaleFactor, userOf(j), "", nil
			event = true
		}
		js.id, js.job, js.order, js.stamp = j.ID, j, i, s.stamp
	}
	for id, js := range st.Jobs {
		if js.stamp != s.stamp {
			delete(st.Jobs, id)
			departed = true
		}
	}
	event = event || arrived || departed

	// Bindings that no longer hold (server gone or shrunk, type gone, the
	// job cannot run there any more) are dropped: bound again as arrivals.
	for _, js := range st.Jobs {
		if !lay.resolve(js) {
			js.Type, js.Servers, js.srv, js.need = "", nil, nil, nil
			event = true
		}
	}

	s.charge()

	if event {
		s.recompute(lay)
		if departed || len(st.Trades) > 0 {
			st.Balance = true
		}
		st.Seen, st.Reset, st.GPUSig, st.GPUCount = true, false, lay.sig, lay.n
	}
	boundary := st.Rounds%s.cfg.QuantumRounds == 0
	running := make(map[string]*engine.Assignment, len(snap.Running))
	for i := range snap.Running {
		a := &snap.Running[i]
		if len(a.Jobs) == 1 {
			running[a.Jobs[0]] = a
		}
	}
	if boundary && st.Balance {
		s.balance(lay, running)
	}
	if s.alloc == nil {
		s.predict(lay)
		s.alloc = s.allocation(lay)
	}
	plan := s.decide(snap, lay, running, boundary)
	plan.Recomputed = event
	plan.Allocation = s.alloc
	plan.Users = []engine.UserShares{s.userShares()}
	st.Rounds++
	return plan, nil
}

func cloneRecv(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for t, v := range m {
		out[t] = v
	}
	return out
}

// charge adds to each job's pass what the backend credited it since the
// last round: the growth of its ReceivedS, in quanta, times its GPUs,
// times its stride. Charging credited time (not what the plan said) means
// a job that was planned but did not run (a failed start, a slow
// checkpoint) is not charged, and one a backend ran longer is.
func (s *Scheduler) charge() {
	q := s.quantumS()
	for _, js := range s.st.Jobs {
		var d float64
		if js.LastRecv == nil {
			js.LastRecv = map[string]float64{}
		}
		for t, v := range js.job.ReceivedS {
			if g := v - js.LastRecv[t]; g > 0 {
				d += g
				r := s.st.Received[js.User]
				if r == nil {
					r = map[string]float64{}
					s.st.Received[js.User] = r
				}
				r[t] += g * float64(js.GPUs)
				js.LastRecv[t] = v
			}
		}
		if d > 0 && js.Tickets > 0 {
			js.Pass += d / q * float64(js.GPUs) * strideL / js.Tickets
		}
	}
}

// SwitchS is the suspend-and-start latency of a job on Nomad as the e2e
// test TestGandivaFairOnNomad measures it (docs/gandiva-fair.md): on the
// 2-core CI machine of December 2026 a task runs 1.22-1.45 s after its
// round's start on average, 2.18 s at most, a suspended one stops within
// 0.4 s (an earlier machine: 0.42-0.57 s, 0.89 s at most); rounded up to
// 2 s. It sets the default quantum. Real training jobs (CUDA context,
// data loading) start slower: set the quantum for them.
const SwitchS = 2.0

// MaxOverhead is the share of GPU time the default quantum may lose to
// switching jobs.
const MaxOverhead = 0.02

// DefaultQuantumRounds is the fewest whole rounds of roundS seconds whose
// quantum keeps one switch (SwitchS) under MaxOverhead of it: 1 for
// Rondo's default 6-minute round.
func DefaultQuantumRounds(roundS float64) int {
	if !(roundS > 0) {
		return 1
	}
	return max(1, int(math.Ceil(SwitchS/(MaxOverhead*roundS)-1e-9)))
}

package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/policies"
)

// History is what the engine keeps between rounds that changes its later
// decisions, beyond the cumulative received time a backend reports in every
// snapshot: the allocation in force, each unit's received-time baseline at
// the last recompute (the priority's denominator) and carried deficit, when
// and on which jobs and GPUs the last recompute happened (a restarted
// engine would otherwise recompute at once and reset every baseline),
// finish-time fairness's running isolated time and the agnostic policies'
// type-shuffle generator. An agent saves it with its durable state so that
// a restarted allocator decides as the one that stopped would have.
//
// Not kept: the solver's warm-start hint and aware LAS's incremental
// session (a recompute after a restart starts cold; the optimum's value is
// the same within the solver's certified tolerance, a degenerate LP may
// pick another optimal vertex) and placement caches.
type History struct {
	Policy     string  `json:"policy"`
	LastResetS float64 `json:"last_reset_s"`
	ResetDone  bool    `json:"reset_done,omitempty"`
	NeedUpdate bool    `json:"need_update,omitempty"`
	// Jobs active and healthy GPUs in the last round (events are changes
	// from them); GPUsSeen is false before the first round.
	Jobs     []string `json:"jobs,omitempty"`
	GPUs     []GPU    `json:"gpus,omitempty"`
	GPUsSeen bool     `json:"gpus_seen,omitempty"`
	// Allocation in force (nil before the first recompute).
	Allocation *HistoryAllocation `json:"allocation,omitempty"`
	// Units with a non-zero baseline or deficit.
	Units []HistoryUnit `json:"units,omitempty"`
	// Finish-time fairness: isolated time, throughput and steps done at the
	// last recompute, per job.
	IsoTimeS map[string]float64 `json:"iso_time_s,omitempty"`
	IsoTput  map[string]float64 `json:"iso_tput,omitempty"`
	IsoSteps map[string]float64 `json:"iso_steps,omitempty"`
	Rounds   int                `json:"rounds,omitempty"`
	// Shuffler is the type-shuffle generator's state (agnostic policies).
	Shuffler []uint32 `json:"shuffler,omitempty"`
	// Preemption that respects the work (preempt.go; absent from older
	// histories and when its options are off): when a plan of the engine
	// last started each job that runs (Job.RunSinceS's fallback), the jobs
	// noticed last round, when each job last ran (its arrival before) and
	// the reservation in force.
	RunStartS   map[string]float64 `json:"run_start_s,omitempty"`
	Noticed     []string           `json:"noticed,omitempty"`
	WaitSinceS  map[string]float64 `json:"wait_since_s,omitempty"`
	Reservation *Reservation       `json:"reservation,omitempty"`
}

// HistoryAllocation is a policies.Allocation without its solve statistics.
type HistoryAllocation struct {
	Policy    string      `json:"policy"`
	Types     []string    `json:"types"`
	JobIDs    []string    `json:"job_ids"`
	X         [][]float64 `json:"x"`
	PairJobs  [][2]string `json:"pair_jobs,omitempty"`
	PairX     [][]float64 `json:"pair_x,omitempty"`
	Effective []float64   `json:"effective,omitempty"`
	Objective *float64    `json:"objective,omitempty"`
}

// HistoryUnit is one unit's baseline and deficit per GPU type.
type HistoryUnit struct {
	Jobs     []string           `json:"jobs"`
	BaseS    map[string]float64 `json:"base_s,omitempty"`
	DeficitS map[string]float64 `json:"deficit_s,omitempty"`
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// History returns the engine's history (a deep copy).
func (e *Engine) History() *History {
	h := &History{Policy: e.canonical, LastResetS: e.lastReset, ResetDone: e.resetDone, NeedUpdate: e.needUpdate,
		GPUs: slices.Clone(e.lastGPUs), GPUsSeen: e.gpusSeen, Rounds: e.rounds,
		IsoTimeS: map[string]float64{}, IsoTput: map[string]float64{}, IsoSteps: map[string]float64{}}
	for id, st := range e.iso {
		if st.hasTime {
			h.IsoTimeS[id] = st.time
		}
		if st.hasTput {
			h.IsoTput[id] = st.tput
		}
		if st.hasSteps {
			h.IsoSteps[id] = st.steps
		}
	}
	for id := range e.lastJobs {
		h.Jobs = append(h.Jobs, id)
	}
	sort.Strings(h.Jobs)
	if a := e.alloc; a != nil {
		ha := &HistoryAllocation{Policy: a.Policy, Types: slices.Clone(a.Types), JobIDs: slices.Clone(a.JobIDs),
			PairJobs: slices.Clone(a.PairJobs)}
		for _, r := range a.X {
			ha.X = append(ha.X, slices.Clone(r))
		}
		for _, r := range a.PairX {
			ha.PairX = append(ha.PairX, slices.Clone(r))
		}
		ok := true
		for _, v := range a.Effective {
			ok = ok && finite(v)
		}
		if ok {
			ha.Effective = slices.Clone(a.Effective)
		}
		if finite(a.Objective) {
			o := a.Objective
			ha.Objective = &o
		}
		h.Allocation = ha
	}
	keys := make([]ukey, 0, len(e.units))
	for k, u := range e.units {
		if len(u.vtypes) > 0 || len(u.defOld) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b ukey) int {
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		if a[1] < b[1] {
			return -1
		}
		if a[1] > b[1] {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		u := e.units[k]
		hu := HistoryUnit{Jobs: []string{k[0]}, BaseS: u.baseMap(), DeficitS: u.defMap()}
		if k[1] != "" {
			hu.Jobs = append(hu.Jobs, k[1])
		}
		h.Units = append(h.Units, hu)
	}
	if e.shuffle {
		h.Shuffler = e.shuffler.State()
	}
	if len(e.runStart) > 0 {
		h.RunStartS = maps.Clone(e.runStart)
	}
	for id := range e.noticed {
		h.Noticed = append(h.Noticed, id)
	}
	sort.Strings(h.Noticed)
	if len(e.waitSince) > 0 {
		h.WaitSinceS = maps.Clone(e.waitSince)
	}
	if e.resv != nil {
		r := *e.resv
		r.GPUs = slices.Clone(r.GPUs)
		h.Reservation = &r
	}
	return h
}

// SetHistory replaces the engine's history with h (from History, possibly
// of an engine that stopped). The engine must run the same policy.
//
// Everything else the engine holds is rebuilt from scratch, as in a new
// engine: per-round caches are keyed by the round count, which the history
// rewinds, so an engine that decided a round whose plan was thrown away (an
// agent that re-takes its leader lock restores the last saved history into
// the engine it runs) would otherwise reuse that round's stale candidates.
// On an error the engine is left as it was.
func (e *Engine) SetHistory(h *History) error {
	if h == nil {
		return nil
	}
	if h.Policy != e.canonical {
		return fmt.Errorf("engine: history of policy %q, engine runs %q", h.Policy, e.canonical)
	}
	f, err := New(e.cfg)
	if err != nil {
		return err
	}
	if err := f.setHistory(h); err != nil {
		return err
	}
	*e = *f
	return nil
}

// setHistory loads h into a new engine.
func (e *Engine) setHistory(h *History) error {
	if len(h.Shuffler) > 0 && !e.shuffler.SetState(h.Shuffler) {
		return fmt.Errorf("engine: bad shuffler state in history")
	}
	e.lastReset, e.resetDone, e.needUpdate, e.rounds = h.LastResetS, h.ResetDone, h.NeedUpdate, h.Rounds
	e.lastJobs, e.lastIDs = make(map[string]bool, len(h.Jobs)), nil
	for _, id := range h.Jobs {
		e.lastJobs[id] = true
	}
	e.lastGPUs, e.gpusSeen = slices.Clone(h.GPUs), h.GPUsSeen
	e.iso = map[string]*isoState{}
	isoOf := func(id string) *isoState {
		st := e.iso[id]
		if st == nil {
			st = &isoState{}
			e.iso[id] = st
		}
		return st
	}
	for id, v := range h.IsoTimeS {
		st := isoOf(id)
		st.time, st.hasTime = v, true
	}
	for id, v := range h.IsoTput {
		st := isoOf(id)
		st.tput, st.hasTput = v, true
	}
	for id, v := range h.IsoSteps {
		st := isoOf(id)
		st.steps, st.hasSteps = v, true
	}
	if e.pre {
		e.runStart, e.waitSince = maps.Clone(h.RunStartS), maps.Clone(h.WaitSinceS)
		for _, id := range h.Noticed {
			if e.noticed == nil {
				e.noticed = map[string]bool{}
			}
			e.noticed[id] = true
		}
		if r := h.Reservation; r != nil && e.cfg.ReserveAfterS > 0 {
			cp := *r
			cp.GPUs = slices.Clone(r.GPUs)
			e.resv = &cp
		}
	}
	for _, hu := range h.Units {
		k, ok := keyOf(hu.Jobs)
		if !ok {
			return fmt.Errorf("engine: history unit of %d jobs", len(hu.Jobs))
		}
		u := &unit{key: UnitKey(hu.Jobs), jobs: slices.Clone(hu.Jobs)}
		u.setBaseDef(hu.BaseS, hu.DeficitS)
		e.units[k] = u
	}
	if ha := h.Allocation; ha != nil {
		a := &policies.Allocation{Policy: ha.Policy, Types: slices.Clone(ha.Types), JobIDs: slices.Clone(ha.JobIDs),
			PairJobs: slices.Clone(ha.PairJobs), Effective: slices.Clone(ha.Effective)}
		for _, r := range ha.X {
			a.X = append(a.X, slices.Clone(r))
		}
		for _, r := range ha.PairX {
			a.PairX = append(a.PairX, slices.Clone(r))
		}
		if len(a.X) != len(a.JobIDs) || len(a.PairX) != len(a.PairJobs) {
			return fmt.Errorf("engine: history allocation: %d rows for %d jobs, %d for %d pairs",
				len(a.X), len(a.JobIDs), len(a.PairX), len(a.PairJobs))
		}
		if ha.Objective != nil {
			a.Objective = *ha.Objective
		}
		e.setAllocation(a) // also sets the units' X and quiet flags
	} else {
		for _, u := range e.units {
			u.setQuiet()
		}
	}
	return nil
}

// MarshalHistory is History as JSON (what an agent saves).
func (e *Engine) MarshalHistory() ([]byte, error) { return json.Marshal(e.History()) }

// UnmarshalHistory is SetHistory from MarshalHistory's JSON.
func (e *Engine) UnmarshalHistory(b []byte) error {
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("engine: history: %w", err)
	}
	return e.SetHistory(&h)
}

// Package sizer is the round mechanism that sizes two-role elastic jobs
// (engine.Elastic with PS: DL2's workers, GPU tasks, and parameter
// servers, CPU tasks) with any dl2.Sizer (policies/dl2: the learned "dl2"
// or a baseline), as a round.Mechanism beside Gavel's engine and
// Gandiva-fair's scheduler. A round is one DL2 slot:
//
//	Snapshot ─► servers: healthy GPUs by server, CPUs from the node (else a default)
//	         ─► jobs in arrival order as dl2.Jobs (bounds, demand, epochs done, slots run)
//	         ─► dl2.NewSlot (minimums) ─► Sizer.Decide ─► dl2.Check
//	         ─► relabel: tasks moved between servers of equal capacity so that
//	            jobs stay where they ran (relabel.go)
//	         ─► Plan: each running job on concrete GPUs of the servers the slot
//	            chose (its GPUs of last round first), its PS count and servers;
//	            suspend what ran and got nothing; intents (engine.Annotate)
//
// A job without parameter servers (a plain job or a one-role elastic job)
// is a fixed job to the slot: exactly its minimum workers, no PS; the
// slot gives it that in arrival order when it fits, like every job's
// minimum. Nothing here knows a backend; the simulator and the agent run
// it alike (cmd/rondo/decider.go).
package sizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// DefaultCPUsPerServer is a server's CPUs when its node does not say
// (DL2's testbed: 16 cores a server).
const DefaultCPUsPerServer = 16

// Options configure a Mechanism.
type Options struct {
	// Sizer decides each slot (required).
	Sizer dl2.Sizer
	// Speed is the sizers' speed model (Optimus, Tetris, SRTF estimate
	// remaining times with it); nil: none known.
	Speed dl2.SpeedFunc
	// CPUsPerServer is a server's CPUs when the snapshot has no node for
	// it or its node's Cores are 0 (0: DefaultCPUsPerServer).
	CPUsPerServer int
	// OnSlot, when set, sees every slot once decided and checked, with
	// the servers it was decided on and their ids (tests, status).
	OnSlot func(servers []dl2.Server, ids []string, s *dl2.Slot)
}

// Mechanism sizes the jobs of a snapshot each round (round.Mechanism).
// Its history is the slots each job ran (dl2.Job.SlotsRun).
type Mechanism struct {
	o        Options
	slotsRun map[string]int
}

// New makes a mechanism; a nil Sizer is an error.
func New(o Options) (*Mechanism, error) {
	if o.Sizer == nil {
		return nil, errors.New("sizer: no sizer")
	}
	if o.CPUsPerServer < 0 {
		return nil, fmt.Errorf("sizer: %d CPUs per server", o.CPUsPerServer)
	}
	if o.CPUsPerServer == 0 {
		o.CPUsPerServer = DefaultCPUsPerServer
	}
	return &Mechanism{o: o, slotsRun: map[string]int{}}, nil
}

// Name is the sizer's name.
func (m *Mechanism) Name() string { return m.o.Sizer.Name() }

// RequestReset does nothing: every round is decided afresh.
func (m *Mechanism) RequestReset() {}

// server is one server of the snapshot: its healthy GPUs in snapshot order.
type server struct {
	id   string
	gpus []string
}

// servers groups the snapshot's healthy GPUs by server, in order of first
// appearance, with each server's CPUs.
func (m *Mechanism) servers(s *engine.Snapshot) ([]server, []dl2.Server, map[string]string) {
	cores := map[string]float64{}
	for _, n := range s.Nodes {
		cores[n.ID] = n.Cores
	}
	idx := map[string]int{}
	var srv []server
	typ := map[string]string{}
	for _, g := range s.GPUs {
		if g.Failed {
			continue
		}
		i, ok := idx[g.Server]
		if !ok {
			i = len(srv)
			idx[g.Server] = i
			srv = append(srv, server{id: g.Server})
		}
		srv[i].gpus = append(srv[i].gpus, g.ID)
		typ[g.ID] = g.Type
	}
	caps := make([]dl2.Server, len(srv))
	for i, v := range srv {
		c := m.o.CPUsPerServer
		if k := cores[v.id]; k > 0 {
			c = int(math.Floor(k))
		}
		caps[i] = dl2.Server{GPUs: len(v.gpus), CPUs: c}
	}
	return srv, caps, typ
}

// JobOf is a snapshot job as a slot sees it. A two-role elastic job
// (Elastic.PS) has workers ScaleFactor/StepGPUs .. MaxGPUs/StepGPUs of
// StepGPUs GPUs and ceil(WorkerCores) CPUs (default 1) each, PS.Min ..
// PS.Max parameter servers of ceil(PS.Cores) CPUs (default 1), its
// TotalSteps as epochs and TotalSteps - RemainingSteps done. Any other job
// is fixed: exactly its minimum workers (a one-role elastic job's
// ScaleFactor/StepGPUs of StepGPUs GPUs, a plain job's ScaleFactor of one
// GPU), one CPU each, no PS. (Round makes a plain job one worker of
// ScaleFactor GPUs when some server has that many, so that it is not
// spread.)
func JobOf(j *engine.Job, slotsRun int) dl2.Job {
	out := dl2.Job{ID: j.ID, Model: j.Model, ArrivalS: j.ArrivalS, Epochs: j.TotalSteps,
		Done: max(j.TotalSteps-j.RemainingSteps, 0), SlotsRun: slotsRun}
	step, workers := 1, max(j.ScaleFactor, 1)
	if el := j.Elastic; el != nil {
		step = max(el.StepGPUs, 1)
		workers = max(max(j.ScaleFactor, 1)/step, 1)
	}
	out.Demand = dl2.Demand{WorkerGPUs: step, WorkerCPUs: 1}
	out.Bounds = dl2.Bounds{MinWorkers: workers, MaxWorkers: workers}
	if el := j.Elastic; el.TwoRole() {
		out.Bounds.MaxWorkers = max(el.MaxGPUs/step, workers)
		out.Bounds.MinPS = max(el.PS.Min, 0)
		out.Bounds.MaxPS = max(el.PS.Max, out.Bounds.MinPS)
		out.Demand.WorkerCPUs = cores(el.WorkerCores)
		out.Demand.PSCPUs = cores(el.PS.Cores)
		out.Batch = el.Batch
	}
	return out
}

// cores is a task's whole CPUs: ceil(c), 1 when c is not positive.
func cores(c float64) int {
	if !(c > 0) || math.IsInf(c, 1) {
		return 1
	}
	return int(math.Ceil(c))
}

// Round decides one slot. An error from dl2.Check (a sizer that
// over-commits a server or a bound) is returned: never such a plan.
func (m *Mechanism) Round(s *engine.Snapshot) (*engine.Plan, error) {
	srv, caps, typ := m.servers(s)
	most := 0
	for _, c := range caps {
		most = max(most, c.GPUs)
	}
	jobs := make([]dl2.Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[i] = JobOf(&s.Jobs[i], m.slotsRun[s.Jobs[i].ID])
		if j := &jobs[i]; s.Jobs[i].Elastic == nil && j.Bounds.MinWorkers > 1 && most >= j.Bounds.MinWorkers {
			// A plain multi-GPU job runs whole on one server when one
			// is large enough (as the engine's fewest-servers pick).
			j.Demand.WorkerGPUs, j.Bounds = j.Bounds.MinWorkers, dl2.Bounds{MinWorkers: 1, MaxWorkers: 1}
		}
	}
	slot := dl2.NewSlot(caps, jobs, m.o.Speed)
	m.o.Sizer.Decide(slot)
	if err := dl2.Check(caps, slot); err != nil {
		return nil, fmt.Errorf("sizer %s: %w", m.o.Sizer.Name(), err)
	}
	relabel(s, srv, caps, slot)
	if err := dl2.Check(caps, slot); err != nil {
		return nil, fmt.Errorf("sizer: relabeled slot: %w", err)
	}
	if m.o.OnSlot != nil {
		ids := make([]string, len(srv))
		for i, v := range srv {
			ids[i] = v.id
		}
		m.o.OnSlot(caps, ids, slot)
	}
	p := m.plan(s, srv, typ, slot)
	// History: the slots each job ran in (a two-role job with a worker
	// and a PS, a fixed job with its workers), for the jobs still active.
	next := make(map[string]int, len(s.Jobs))
	for i := range s.Jobs {
		id := s.Jobs[i].ID
		n := m.slotsRun[id]
		a := slot.Alloc[i]
		if a.Workers > 0 && (a.PS > 0 || slot.Jobs[i].Bounds.MaxPS == 0) {
			n++
		}
		if n > 0 {
			next[id] = n
		}
	}
	m.slotsRun = next
	engine.Annotate(s, p, nil)
	return p, nil
}

// plan turns a decided slot into assignments: each job's workers on
// concrete GPUs of the servers the slot chose, the GPUs it held last round
// on a server first (kept in their order, so a job whose first workers
// stay is kept or resized, not moved), then free ones in snapshot order.
func (m *Mechanism) plan(s *engine.Snapshot, srv []server, typ map[string]string, slot *dl2.Slot) *engine.Plan {
	prev := map[string]*engine.Assignment{}
	for i := range s.Running {
		if a := &s.Running[i]; len(a.Jobs) == 1 {
			prev[a.Jobs[0]] = a
		}
	}
	onServer := map[string]int{}
	for i, v := range srv {
		for _, g := range v.gpus {
			onServer[g] = i
		}
	}
	taken := map[string]bool{}
	kept := make([][]string, len(s.Jobs)) // per job, the GPUs it keeps, in last round's order
	keptOn := make([]map[int]int, len(s.Jobs))
	for j := range s.Jobs {
		a := slot.Alloc[j]
		old := prev[s.Jobs[j].ID]
		if a.Workers == 0 || old == nil {
			continue
		}
		step := slot.Jobs[j].Demand.WorkerGPUs
		need := map[int]int{}
		for _, i := range a.WorkerOn {
			need[i] += step
		}
		// Whole workers only: at most need, a multiple of step, per server.
		have := map[int]int{}
		for _, g := range old.GPUs {
			if i, ok := onServer[g]; ok && !taken[g] {
				have[i]++
			}
		}
		quota := map[int]int{}
		for i, n := range need {
			k := min(n, have[i])
			quota[i] = k - k%step
		}
		for _, g := range old.GPUs {
			i, ok := onServer[g]
			if !ok || taken[g] || quota[i] == 0 {
				continue
			}
			quota[i]--
			taken[g] = true
			kept[j] = append(kept[j], g)
		}
		keptOn[j] = map[int]int{}
		for _, g := range kept[j] {
			keptOn[j][onServer[g]]++
		}
	}
	next := make([]int, len(srv)) // the next GPU of each server to look at
	free := func(i, n int) []string {
		var out []string
		for ; len(out) < n && next[i] < len(srv[i].gpus); next[i]++ {
			if g := srv[i].gpus[next[i]]; !taken[g] {
				taken[g] = true
				out = append(out, g)
			}
		}
		return out
	}
	p := &engine.Plan{TimeS: s.TimeS, Assignments: []engine.Assignment{}}
	for j := range s.Jobs {
		a := slot.Alloc[j]
		id := s.Jobs[j].ID
		if a.Workers == 0 {
			if prev[id] != nil {
				p.Suspend = append(p.Suspend, id)
			}
			continue
		}
		step := slot.Jobs[j].Demand.WorkerGPUs
		gpus := slices.Clone(kept[j])
		left := maps.Clone(keptOn[j])
		for _, i := range a.WorkerOn {
			if left[i] >= step {
				left[i] -= step
				continue
			}
			gpus = append(gpus, free(i, step)...)
		}
		as := engine.Assignment{Jobs: []string{id}, Type: typ[gpus[0]], GPUs: gpus, Action: engine.Start, PS: a.PS}
		for _, g := range gpus {
			if v := srv[onServer[g]].id; !slices.Contains(as.Servers, v) {
				as.Servers = append(as.Servers, v)
			}
		}
		for _, i := range a.PSOn {
			as.PSServers = append(as.PSServers, srv[i].id)
		}
		if old := prev[id]; old != nil {
			n := min(max(s.Jobs[j].ScaleFactor, 1), len(gpus), len(old.GPUs))
			if slices.Equal(old.GPUs[:n], gpus[:n]) {
				as.Action = engine.Keep
			}
		}
		p.Assignments = append(p.Assignments, as)
	}
	return p
}

// history is the mechanism's saved state.
type history struct {
	Kind     string         `json:"kind"`
	Sizer    string         `json:"sizer"`
	SlotsRun map[string]int `json:"slots_run,omitempty"`
}

const historyKind = "dl2-sizer"

// MarshalHistory saves the slots each active job ran in.
func (m *Mechanism) MarshalHistory() ([]byte, error) {
	return json.Marshal(history{Kind: historyKind, Sizer: m.o.Sizer.Name(), SlotsRun: m.slotsRun})
}

// UnmarshalHistory restores MarshalHistory's output (any sizer's: the
// slots a job ran do not depend on who sized them); another mechanism's
// history is an error.
func (m *Mechanism) UnmarshalHistory(b []byte) error {
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("sizer: history: %w", err)
	}
	if h.Kind != historyKind {
		return fmt.Errorf("sizer: not a sizer's history (kind %q)", h.Kind)
	}
	runs := make(map[string]int, len(h.SlotsRun))
	for id, n := range h.SlotsRun {
		if n < 0 {
			return fmt.Errorf("sizer: history: job %s ran %d slots", id, n)
		}
		runs[id] = n
	}
	m.slotsRun = runs
	return nil
}

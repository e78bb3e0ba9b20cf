// Package state holds the allocator's durable state and persists it in Nomad
// Variables with check-and-set, so that a restarted (or fail-over) allocator
// resumes where the previous one stopped and two allocators can never both
// write. See README.md for the layout and why Variables rather than an
// embedded store.
package state

import (
	"encoding/json"
	"slices"
	"time"
)

// SchemaVersion is written with every state; Load refuses newer versions
// rather than silently dropping fields it does not know.
const SchemaVersion = 1

// State is everything the allocator must not forget across a restart.
//
// Jobs are keyed by the agent's job key: the job id, or "namespace/id" when
// the agent manages several namespaces (ids are unique only per namespace).
type State struct {
	Version int `json:"version"`
	// Round is the number of the last round whose plan was recorded.
	Round int64 `json:"round"`
	// Received is the GPU time each job has received, per GPU type, in
	// seconds (Gavel's "time received", the denominator of the priorities).
	Received map[string]map[string]float64 `json:"received_s,omitempty"`
	// Throughput is the measured throughput per job and GPU type.
	Throughput map[string]map[string]Measurement `json:"throughput,omitempty"`
	// Epoch is the origin of the allocator's clock (time 0 of the engine's
	// snapshots); kept so that arrival times and SLO deadlines stay on one
	// clock across restarts. Zero until the first save.
	Epoch time.Time `json:"epoch,omitempty"`
	// Arrival is when the allocator first saw each job, in seconds since
	// Epoch (the engine's arrival order and SLO origin).
	Arrival map[string]float64 `json:"arrival_s,omitempty"`
	// Progress is the last reported number of steps done per job (the
	// lease/progress API), so that a restarted allocator knows how far
	// suspended jobs got.
	Progress map[string]float64 `json:"progress,omitempty"`
	// Epochs is the last reported number of epochs done per job, for the
	// jobs whose reports say (a two-role elastic job's progress, the
	// lease API's epochs_done). Absent in states written before it existed.
	Epochs map[string]float64 `json:"epochs_done,omitempty"`
	// Checkpoints is, per job, what it reported of its checkpoints and
	// restarts (the lease API's checkpoint_at, checkpoint_s, restore_s)
	// and its measured start latency: what checkpoint-aware preemption
	// weighs (#21). Absent in states written before it existed.
	Checkpoints map[string]Checkpoint `json:"checkpoints,omitempty"`
	// Engine is the decider's history between rounds (engine.History as
	// JSON, or the per-VC engines' under the per-VC deciders of allocator/round): the received-time
	// baselines of the last recompute, deficits, the allocation in force,
	// finish-time fairness's isolated time. Absent in states written before
	// it existed; a restarted agent then starts its engine fresh.
	Engine json.RawMessage `json:"engine,omitempty"`
	// Credit is, per job, when its received time was last credited (seconds
	// since Epoch, the observation Received is up to) and the Nomad
	// allocations it then held GPUs with. A restarted allocator credits a
	// job whose allocations are still the same running ones for the time
	// since (the allocator's downtime included), and nothing otherwise.
	// Absent in states written before it existed: such a restart credits
	// nothing for the downtime.
	Credit map[string]Credit `json:"credit,omitempty"`
	// InFlight is the plan being enforced; nil once it is fully applied.
	InFlight *Decision `json:"in_flight,omitempty"`
	// SavedAt is set by Save.
	SavedAt time.Time `json:"saved_at"`
}

// Credit is a job's last received-time credit (State.Credit).
type Credit struct {
	AtS    float64  `json:"at_s"`
	Allocs []string `json:"allocs,omitempty"`
}

// Checkpoint is what a job told the lease API of its checkpoints and
// restarts, and its start latency as the agent measured it (State.Checkpoints).
type Checkpoint struct {
	// At is when it last wrote a checkpoint (checkpoint_at; zero: never
	// said).
	At time.Time `json:"at,omitzero"`
	// WriteS is how long writing it took (checkpoint_s), RestoreS how long
	// its last (re)start took until it trained again (restore_s); nil:
	// never reported.
	WriteS   *float64 `json:"checkpoint_s,omitempty"`
	RestoreS *float64 `json:"restore_s,omitempty"`
	// StartLatencyS is measured: from the start of the round that last
	// (re)started the job to its first progress report after; nil: not
	// measured yet.
	StartLatencyS *float64 `json:"start_latency_s,omitempty"`
}

// Measurement is a throughput estimate from progress reports.
type Measurement struct {
	StepsPerSec float64   `json:"steps_per_s"`
	Samples     int64     `json:"samples"`
	At          time.Time `json:"at"`
}

// Decision is a round's plan as recorded before any of it is enforced. A
// restarted allocator finds it in InFlight and reconciles: it applies the
// intents not yet marked applied (after checking the cluster, since one may
// have been applied just before the crash) or rolls them back.
type Decision struct {
	ID         string    `json:"id"`
	Round      int64     `json:"round"`
	RecordedAt time.Time `json:"recorded_at"`
	Intents    []Intent  `json:"intents"`
}

// Intent is one job's part of a plan.
type Intent struct {
	Namespace string `json:"namespace,omitempty"`
	Job       string `json:"job"`
	// Action: admit, keep, suspend, resume, migrate, resize, preempt.
	Action   string   `json:"action"`
	Node     string   `json:"node,omitempty"`
	GPUType  string   `json:"gpu_type,omitempty"`
	GPUs     []string `json:"gpus,omitempty"`
	Cell     string   `json:"cell,omitempty"`
	Priority int      `json:"priority,omitempty"`
	// JobModifyIndex is the job's modify index the intent was planned
	// against. The backend registers with EnforceIndex set to it, so replaying
	// an intent that was in fact applied before a crash is refused by Nomad
	// instead of running the job twice; the refusal tells reconcile it was
	// applied.
	JobModifyIndex uint64 `json:"job_modify_index,omitempty"`
	Applied        bool   `json:"applied,omitempty"`
}

// New returns an empty state.
func New() *State {
	return &State{
		Version:    SchemaVersion,
		Received:   map[string]map[string]float64{},
		Throughput: map[string]map[string]Measurement{},
		Arrival:    map[string]float64{},
		Progress:   map[string]float64{},
	}
}

func (s *State) init() {
	if s.Received == nil {
		s.Received = map[string]map[string]float64{}
	}
	if s.Throughput == nil {
		s.Throughput = map[string]map[string]Measurement{}
	}
	if s.Arrival == nil {
		s.Arrival = map[string]float64{}
	}
	if s.Progress == nil {
		s.Progress = map[string]float64{}
	}
}

// AddReceived adds d of GPU time of gpuType to job.
func (s *State) AddReceived(job, gpuType string, d time.Duration) {
	s.init()
	m := s.Received[job]
	if m == nil {
		m = map[string]float64{}
		s.Received[job] = m
	}
	m[gpuType] += d.Seconds()
}

// SetThroughput records a throughput measurement.
func (s *State) SetThroughput(job, gpuType string, m Measurement) {
	s.init()
	t := s.Throughput[job]
	if t == nil {
		t = map[string]Measurement{}
		s.Throughput[job] = t
	}
	t[gpuType] = m
}

// RemoveJob forgets a finished job.
func (s *State) RemoveJob(job string) {
	delete(s.Received, job)
	delete(s.Throughput, job)
	delete(s.Arrival, job)
	delete(s.Progress, job)
	delete(s.Epochs, job)
	delete(s.Checkpoints, job)
	delete(s.Credit, job)
}

// Jobs returns every job the state knows anything about.
func (s *State) Jobs() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]float64{s.Arrival, s.Progress} {
		for j := range m {
			if !seen[j] {
				seen[j] = true
				out = append(out, j)
			}
		}
	}
	for j := range s.Received {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	for j := range s.Throughput {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	slices.Sort(out)
	return out
}

// Begin records d as the plan in flight and advances Round to d.Round. It
// only changes memory: the caller must Save before enforcing anything, which
// is what makes the decision survive a crash.
func (s *State) Begin(d Decision) {
	d.Intents = slices.Clone(d.Intents)
	s.InFlight = &d
	if d.Round > s.Round {
		s.Round = d.Round
	}
}

// MarkApplied marks the in-flight intent for (namespace, job) applied and
// reports whether there was one.
func (s *State) MarkApplied(namespace, job string) bool {
	if s.InFlight == nil {
		return false
	}
	for i := range s.InFlight.Intents {
		in := &s.InFlight.Intents[i]
		if in.Job == job && in.Namespace == namespace {
			in.Applied = true
			return true
		}
	}
	return false
}

// Pending returns the in-flight intents not yet applied.
func (s *State) Pending() []Intent {
	if s.InFlight == nil {
		return nil
	}
	var out []Intent
	for _, in := range s.InFlight.Intents {
		if !in.Applied {
			out = append(out, in)
		}
	}
	return out
}

// Finish clears the in-flight decision (all applied, or rolled back).
func (s *State) Finish() { s.InFlight = nil }

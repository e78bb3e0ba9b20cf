package sim

import (
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/faults"
)

// faultState replays a fault schedule (Options.Faults) against the
// simulated cluster. A failure takes effect in the snapshot of the first
// round that starts at or after it; a micro-task on a GPU that fails
// mid-round is cut at the failure (cut). Without a schedule (or with an
// empty one) s.faults is nil and every hook is a no-op, so results are
// exactly those of a run without faults.
type faultState struct {
	events []faults.Resolved
	gpus   [][]int // per event, indices into simulator.gpus
	next   int     // first event not yet applied
	index  map[string]int

	failures int // GPUs that went from healthy to failed
	cuts     int // micro-tasks cut by a failure
}

// initFaults resolves the schedule against the cluster buildCluster laid out.
func (s *simulator) initFaults() error {
	if s.o.Faults == nil || len(s.o.Faults.Events) == 0 {
		return nil
	}
	if s.o.Ideal {
		return fmt.Errorf("sim: fault injection needs the round-based mechanism, not the ideal one")
	}
	f := &faultState{index: make(map[string]int, len(s.gpus))}
	layout := make([]faults.GPU, len(s.gpus))
	for i, g := range s.gpus {
		layout[i] = faults.GPU{ID: g.ID, Type: g.Type, Server: g.Server}
		f.index[g.ID] = i
	}
	res := faults.ByType(layout)
	if s.nodeGPUs != nil {
		res = faults.ByNode(s.nodeGPUs) // VC mode: targets name nodes (vc.go)
	}
	var err error
	if f.events, err = s.o.Faults.Resolve(res); err != nil {
		return err
	}
	for _, ev := range f.events {
		idx := make([]int, len(ev.GPUs))
		for k, id := range ev.GPUs {
			idx[k] = f.index[id]
		}
		f.gpus = append(f.gpus, idx)
	}
	s.faults = f
	return nil
}

// nextFaultS is the time of the next event not yet applied, +Inf if none.
func (s *simulator) nextFaultS() float64 {
	if f := s.faults; f != nil && f.next < len(f.events) {
		return f.events[f.next].TimeS
	}
	return math.Inf(1)
}

// idleUntil is where an idle round that would end at t ends: earlier at
// the next fault event, whose recovery may let a job run again.
func (s *simulator) idleUntil(t float64) float64 {
	if f := s.nextFaultS(); f < t || (t <= s.now && !math.IsInf(f, 1)) {
		return f
	}
	return t
}

// recoveryScheduled reports whether an event still to come recovers GPUs:
// until then, idle rounds are waiting for hardware, not stuck.
func (s *simulator) recoveryScheduled() bool {
	if f := s.faults; f != nil {
		for _, ev := range f.events[f.next:] {
			if !ev.Fail {
				return true
			}
		}
	}
	return false
}

// beforeStep runs at the start of every step, while s.running is the
// round in progress: it replays the events that fall inside the round,
// before its latest micro-task's finish (each cut shortens the round, so
// the end is recomputed per event).
func (s *simulator) beforeStep() {
	if s.o.observe != nil {
		s.o.observe(s)
	}
	f := s.faults
	if f == nil || len(s.running) == 0 {
		return
	}
	for f.next < len(f.events) {
		end := s.now
		for _, m := range s.running {
			end = math.Max(end, m.finish)
		}
		if f.events[f.next].TimeS >= end {
			return
		}
		s.applyFault(f.next)
		f.next++
	}
}

// faultsUntil applies every event at or before t, the start of a round,
// so that its snapshot sees them.
func (s *simulator) faultsUntil(t float64) {
	f := s.faults
	if f == nil {
		return
	}
	for f.next < len(f.events) && f.events[f.next].TimeS <= t {
		s.applyFault(f.next)
		f.next++
	}
}

// applyFault sets the event's GPUs failed or healthy (either is
// idempotent) and cuts the running micro-tasks it hits.
func (s *simulator) applyFault(i int) {
	f := s.faults
	ev := f.events[i]
	hit := map[string]bool{}
	for _, g := range f.gpus[i] {
		if s.gpus[g].Failed != ev.Fail {
			s.gpus[g].Failed = ev.Fail
			if ev.Fail {
				f.failures++
				hit[s.gpus[g].ID] = true
			} else {
				// Idle rounds count again from the recovery.
				s.idleRounds = 0
			}
		}
	}
	if len(hit) == 0 {
		return
	}
	for k := range s.running {
		m := &s.running[k]
		if m.begin >= ev.TimeS || ev.TimeS >= m.finish {
			continue
		}
		for _, id := range m.gpus {
			if hit[id] {
				s.cut(m, ev.TimeS)
				break
			}
		}
	}
}

// cut ends a micro-task at t, when one of its GPUs fails: each job keeps
// the steps it completed by t (its start cost first), is credited up to t
// by complete, and counts as preempted unless it finished anyway. The
// unit no longer holds its GPUs: the next round neither keeps it nor
// suspends it, and its restart pays the start and preemption costs.
func (s *simulator) cut(m *micro, t float64) {
	ran := math.Max(t-m.begin-m.cost, 0)
	ids := make([]string, len(m.jobs))
	for i, js := range m.jobs {
		ids[i] = js.id
		if m.dl2 {
			// Epochs, not whole steps; a cut job does not finish.
			if got := m.tput[i] * ran; got < m.steps[i] {
				m.steps[i], m.dl2End = got, false
			}
		} else {
			m.steps[i] = math.Min(math.Floor(m.tput[i]*ran), m.steps[i])
		}
		if js.remaining-m.steps[i] > 0 {
			s.preemptions++
		}
	}
	m.finish, m.cut = t, true
	s.faults.cuts++
	key := engine.UnitKey(ids)
	prev := make([]engine.Assignment, 0, len(s.prev))
	for _, a := range s.prev {
		if engine.UnitKey(a.Jobs) != key {
			prev = append(prev, a)
		}
	}
	s.prev = prev
}

// faultResult adds the fault counters to a result.
func (s *simulator) faultResult(r *Result) {
	if f := s.faults; f != nil {
		r.GPUFailures, r.FaultInterruptions = f.failures, f.cuts
	}
}

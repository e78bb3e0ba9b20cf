package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rondo-sched/rondo/policies"
)

// lasState is the incremental LAS solve kept between recomputes: the
// session (policies.LASSession) and, per job it holds, what LAS reads of
// the job, to tell a changed job from an unchanged one. The jobs are kept
// in the last problem's order, so that the next problem's list, usually
// the same but for a few arrivals and departures, is walked beside them
// (as the engine's jobsDelta walks the snapshot) instead of looked up.
type lasState struct {
	sess  *policies.LASSession
	types map[string]policies.GPUType
	in    map[string]bool // the session's jobs
	ids   []string        // the session's jobs in the last problem's order
	jobs  []lasJob        // theirs
	rows  []float64       // theirs: k rates each, as problem's rows
	// lasSolve's, reused.
	gone   []string
	change []lasChange
	from   []int    // per problem job, its index in ids (kept or replaced)
	spare  []lasJob // the next jobs
	pos    map[string]int
}

// lasJob is what a LAS problem reads of a job (policies.lasProblem,
// newInstance) besides its rates (lasState.rows, the problem's rows,
// which determine its throughput map): nothing else of policies.Job
// changes its row.
type lasJob struct {
	uncons map[string]float64 // a copy: the problem's map may be the snapshot's
	sf     int
	weight float64
}

type lasChange int8

const (
	lasKeep    lasChange = iota // in the session, unchanged
	lasReplace                  // in the session, changed: leaves and arrives again
	lasArrive                   // new
)

func (a lasJob) equal(j *policies.Job) bool {
	return a.sf == j.ScaleFactor && a.weight == j.Weight && maps.Equal(a.uncons, j.UnconsolidatedThroughput)
}

// incremental reports whether this recompute's problem is solved by the
// LAS session: aware LAS, not forced cold, not under GavelCompat (whose
// results stay those of the cold solve, bit for bit: docs/parity), and a
// problem the session models (no pairs, no entities).
func (e *Engine) incremental(p *policies.Problem) bool {
	return e.canonical == "max_min_fairness_perf" && !e.cfg.ColdSolve && !e.cfg.GavelCompat &&
		len(p.Pairs) == 0 && len(p.Entities) == 0 && len(p.Users) == 0
}

// solveLAS solves p with the LAS session: the jobs that left since the
// last recompute leave it, those that arrived (or whose throughputs, scale
// factor or weight changed: they leave and arrive again) join it, and it
// re-solves from its last solve. The session is rebuilt from scratch when
// the GPU types or counts change, and dropped on any error (the next
// recompute then starts a new one).
func (e *Engine) solveLAS(p *policies.Problem, rows []float64) (*policies.Allocation, error) {
	start := time.Now()
	a, err := e.lasSolve(p, rows)
	if err != nil {
		e.las = nil
		return nil, err
	}
	a.SolveMS = float64(time.Since(start).Microseconds()) / 1000
	return a, nil
}

// lasSolve brings the session to p and solves it. rows are p's jobs'
// rates, len(p.GPUTypes) each in type-name order (Engine.problem's):
// with the same types they tell whether a job's throughputs changed, also
// in place in the same map.
func (e *Engine) lasSolve(p *policies.Problem, rows []float64) (*policies.Allocation, error) {
	st := e.las
	if st == nil || !maps.Equal(st.types, p.GPUTypes) {
		sess, err := policies.NewLASSession(p.GPUTypes)
		if err != nil {
			return nil, err
		}
		st = &lasState{sess: sess, types: maps.Clone(p.GPUTypes), in: map[string]bool{}}
		e.las = st
	}
	k := len(p.GPUTypes)
	if len(rows) != len(p.Jobs)*k {
		return nil, fmt.Errorf("engine: las: %d rates for %d jobs on %d types", len(rows), len(p.Jobs), k)
	}
	if !st.delta(p, rows, k) {
		st.fullDelta(p, rows, k)
	}
	// Departures first (a slot they free is reused by an arrival), in id
	// order: slots break ties in the session, so their order must not
	// depend on the map's.
	slices.Sort(st.gone)
	for _, id := range st.gone {
		if err := st.sess.Remove(id); err != nil {
			return nil, err
		}
		delete(st.in, id)
	}
	// Then, in the problem's order, the jobs that changed leave and
	// arrive again, and the new ones arrive.
	jobs := slices.Grow(st.spare[:0], len(p.Jobs))[:len(p.Jobs)]
	for i := range p.Jobs {
		j := &p.Jobs[i]
		switch st.change[i] {
		case lasKeep:
			jobs[i] = st.jobs[st.from[i]]
			continue
		case lasReplace:
			if err := st.sess.Remove(j.ID); err != nil {
				return nil, err
			}
		}
		if err := st.sess.Add(*j); err != nil {
			return nil, err
		}
		st.in[j.ID] = true
		jobs[i] = lasJob{uncons: maps.Clone(j.UnconsolidatedThroughput), sf: j.ScaleFactor, weight: j.Weight}
	}
	st.ids = st.ids[:0]
	for i := range p.Jobs {
		st.ids = append(st.ids, p.Jobs[i].ID)
	}
	st.jobs, st.spare = jobs, st.jobs
	st.rows = append(st.rows[:0], rows...)
	if _, err := st.sess.Solve(); err != nil {
		return nil, err
	}
	return st.sess.AllocationFor(p)
}

// delta finds what changed from the session's jobs to p's by walking the
// two lists side by side: a job in its place is compared with itself,
// a job of p not in the session arrived, and one that is in it means the
// session's jobs passed over on the way left. False when the walk cannot
// tell (an order change, a repeated id): fullDelta then looks every job
// up.
func (st *lasState) delta(p *policies.Problem, rows []float64, k int) bool {
	last := st.ids
	if len(last) != len(st.in) || len(last) != len(st.jobs) {
		return false
	}
	st.grow(len(p.Jobs))
	gone := st.gone[:0]
	kept, w := 0, 0
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if w == len(last) || last[w] != j.ID {
			if !st.in[j.ID] {
				st.change[i], st.from[i] = lasArrive, -1
				continue
			}
			for w < len(last) && last[w] != j.ID {
				gone = append(gone, last[w])
				w++
			}
			if w == len(last) {
				st.gone = gone
				return false // earlier in the last order
			}
		}
		st.change[i], st.from[i] = st.compare(w, j, rows[i*k:i*k+k], k), w
		w++
		kept++
	}
	st.gone = append(gone, last[w:]...)
	// Every job passed over is counted gone, so the count proves the walk
	// found exactly the departures (a repeated id fails it).
	return len(last)-len(st.gone) == kept
}

// fullDelta is delta by lookups.
func (st *lasState) fullDelta(p *policies.Problem, rows []float64, k int) {
	if st.pos == nil {
		st.pos = map[string]int{}
	}
	clear(st.pos)
	for w, id := range st.ids {
		st.pos[id] = w
	}
	st.grow(len(p.Jobs))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		w, ok := st.pos[j.ID]
		if !ok || w < 0 {
			st.change[i], st.from[i] = lasArrive, -1
			continue
		}
		st.change[i], st.from[i] = st.compare(w, j, rows[i*k:i*k+k], k), w
		st.pos[j.ID] = -1 - w // seen
	}
	gone := st.gone[:0]
	for w, id := range st.ids {
		if st.pos[id] == w {
			gone = append(gone, id)
		}
	}
	st.gone = gone
}

func (st *lasState) grow(n int) {
	st.change = slices.Grow(st.change[:0], n)[:n]
	st.from = slices.Grow(st.from[:0], n)[:n]
}

// compare tells whether p's job j, with rates row, is the session's job
// at w unchanged.
func (st *lasState) compare(w int, j *policies.Job, row []float64, k int) lasChange {
	if slices.Equal(st.rows[w*k:w*k+k], row) && st.jobs[w].equal(j) {
		return lasKeep
	}
	return lasReplace
}

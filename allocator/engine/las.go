package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/rondo-sched/rondo/policies"
)

// lasState is the incremental LAS solve kept between recomputes: the
// session (policies.LASSession) and, per job it holds, what LAS reads of
// the job (throughputs, scale factor, weight), to tell a changed job from
// an unchanged one.
type lasState struct {
	sess  *policies.LASSession
	types map[string]policies.GPUType
	jobs  map[string]lasJob
	seen  map[string]bool // lasSolve's, reused
	gone  []string        // lasSolve's, reused
}

// lasJob is what a LAS problem reads of a job (policies.lasProblem,
// newInstance): nothing else of policies.Job changes its row.
type lasJob struct {
	tput, uncons map[string]float64
	sf           int
	weight       float64
}

func lasJobOf(j *policies.Job) lasJob {
	return lasJob{tput: j.Throughput, uncons: j.UnconsolidatedThroughput, sf: j.ScaleFactor, weight: j.Weight}
}

func (a lasJob) equal(b lasJob) bool {
	return a.sf == b.sf && a.weight == b.weight && sameRates(a.tput, b.tput) && sameRates(a.uncons, b.uncons)
}

// sameRates is maps.Equal, at once for the same map (a job's throughput
// map usually passes unchanged from one recompute to the next; rates are
// never NaN, so a map always equals itself).
func sameRates(a, b map[string]float64) bool {
	return mapID(a) == mapID(b) || maps.Equal(a, b)
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
func (e *Engine) solveLAS(p *policies.Problem) (*policies.Allocation, error) {
	start := time.Now()
	a, err := e.lasSolve(p)
	if err != nil {
		e.las = nil
		return nil, err
	}
	a.SolveMS = float64(time.Since(start).Microseconds()) / 1000
	return a, nil
}

func (e *Engine) lasSolve(p *policies.Problem) (*policies.Allocation, error) {
	st := e.las
	if st == nil || !maps.Equal(st.types, p.GPUTypes) {
		sess, err := policies.NewLASSession(p.GPUTypes)
		if err != nil {
			return nil, err
		}
		st = &lasState{sess: sess, types: maps.Clone(p.GPUTypes), jobs: map[string]lasJob{}, seen: map[string]bool{}}
		e.las = st
	}
	clear(st.seen)
	for i := range p.Jobs {
		st.seen[p.Jobs[i].ID] = true
	}
	// Departures first (a slot they free is reused by an arrival), in id
	// order: slots break ties in the session, so their order must not
	// depend on the map's.
	gone := st.gone[:0]
	for id := range st.jobs {
		if !st.seen[id] {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		if err := st.sess.Remove(id); err != nil {
			return nil, err
		}
		delete(st.jobs, id)
	}
	st.gone = gone
	for i := range p.Jobs {
		j := &p.Jobs[i]
		now := lasJobOf(j)
		if old, ok := st.jobs[j.ID]; ok {
			if old.equal(now) {
				continue
			}
			if err := st.sess.Remove(j.ID); err != nil {
				return nil, err
			}
		}
		if err := st.sess.Add(*j); err != nil {
			return nil, err
		}
		// Its own copies: the problem's maps may be the snapshot's.
		now.tput, now.uncons = maps.Clone(now.tput), maps.Clone(now.uncons)
		st.jobs[j.ID] = now
	}
	if _, err := st.sess.Solve(); err != nil {
		return nil, err
	}
	return st.sess.AllocationFor(p)
}

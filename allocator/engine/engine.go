package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rondo-sched/rondo/allocator/pyrand"
	"github.com/rondo-sched/rondo/policies"
)

// SolveFunc is policies.Solve's signature; tests may substitute a solver.
type SolveFunc func(name string, p *policies.Problem) (*policies.Allocation, error)

// Config is the mechanism's configuration.
type Config struct {
	Policy string
	// RoundS is the round length (default 360 s).
	RoundS float64
	// GavelCompat reproduces the reference's quirks (see GAVEL-NOTES):
	// received time restarts at a half-round credit on every recompute,
	// recomputes at most every MinResetIntervalS (default 1,920 s, except
	// while no reset has happened after t=0), jobs that arrived after the
	// last recompute may take GPUs that then stay idle.
	GavelCompat bool
	// MinResetIntervalS throttles recomputes (default 0; 1,920 in compat).
	MinResetIntervalS float64
	// Seed drives the agnostic policies' per-round type shuffle (Seed+5)
	// and is passed to randomized policies.
	Seed int64
	// Packing offers colocated pairs to the policy and the mechanism;
	// default: the policy's name ends in "_packed" or is "gandiva".
	Packing *bool
	// TypeOrder is the order GPU types are filled in (default v100, p100,
	// k80, then other types by name).
	TypeOrder []string
	// Solve replaces policies.SolveWithHint (tests); nil is the default.
	Solve SolveFunc
	// ColdSolve solves every recompute from scratch (policies.SolveCold)
	// even for max_min_fairness_perf, which by default is re-solved
	// incrementally (policies.LASSession), and for the space-sharing
	// policies, whose programs by default start from the last recompute's
	// basis: the same optimum's value within the solver's tolerance,
	// though not always the same optimum. GavelCompat implies it.
	ColdSolve bool
	// OnSolve, when set, is called after every recompute's solve with the
	// problem and the allocation (tests compare solvers with it).
	OnSolve func(p *policies.Problem, a *policies.Allocation)
	// Entities are the hierarchical policies' entities of the engine's VC
	// (weight; "fairness" or "fifo" inside). Empty: the policy is given no
	// entities (water-filling then runs every job in one). Set: each job
	// goes to the entity EntityOf names, and the policy sees them all.
	Entities map[string]policies.Entity
	// ResetFirst makes the first round recompute even when a restored
	// history records no event: the engine replaces one whose policy was
	// given other entities (a reload).
	ResetFirst bool

	// Preemption that respects the work (preempt.go). All off by default:
	// the mechanism is Gavel's.

	// MinRuntimeS: a job, once started, keeps its GPUs this long (from
	// Job.RunSinceS) unless one of them fails or they leave the engine
	// (a guaranteed job needs their cell). Its received time still counts,
	// so its priority falls and fairness over time holds.
	MinRuntimeS float64
	// CheckpointAware: when the round must stop a running job for a
	// waiting one, it prefers the victim that loses least (work since its
	// last checkpoint, restore cost), does not make a start that costs
	// more than it gains, and gives a victim with unsaved work one round's
	// notice (JobIntent.Checkpoint: checkpoint now, stop next round).
	CheckpointAware bool
	// ReserveAfterS: a gang (scale factor > 1) that has waited this long
	// gets a reservation (Plan.Reservations); 0: none.
	ReserveAfterS float64
}

// DefaultEntity takes the jobs that name no declared entity (EntityOf):
// weight 1 and fairness inside unless the VC declares an entity of this
// name.
const DefaultEntity = "default"

// EntityOf is the entity a job runs in under cfg's entities: the job's own
// Entity when declared; else its User when an entity of that name is
// declared; else DefaultEntity. An undeclared name is not an error: the
// job shares the default entity (naming a new entity must not buy a new
// share). "" when cfg declares no entities.
func (cfg *Config) EntityOf(j *Job) string {
	if len(cfg.Entities) == 0 {
		return ""
	}
	if _, ok := cfg.Entities[j.Entity]; ok && j.Entity != "" {
		return j.Entity
	}
	if _, ok := cfg.Entities[j.User]; ok && j.User != "" {
		return j.User
	}
	return DefaultEntity
}

// Engine holds the mechanism's state between rounds: the allocation, the
// received-time baselines at the last recompute, deficits, and FTF's
// running isolated time. It is not safe for concurrent use.
type Engine struct {
	cfg       Config
	canonical string
	packing   bool
	shuffle   bool
	fifo      bool
	shuffler  *pyrand.Random

	alloc      *policies.Allocation
	hint       *policies.Hint     // warm start for the next solve
	las        *lasState          // incremental LAS (las.go); nil: none yet
	xIndex     map[ukey][]float64 // unit -> X per alloc.Types index
	typeIndex  map[string]int     // type -> index in alloc.Types
	lastReset  float64
	resetDone  bool
	needUpdate bool
	lastJobs   map[string]bool
	// lastIDs is last round's job ids in snapshot order (nil: unknown),
	// spareSet the map lastJobs is rebuilt into next (the two swap).
	lastIDs  []string
	spareSet map[string]bool
	// goneIDs, addedIDs: jobsDelta's buffers.
	goneIDs, addedIDs []string
	lastGPUs          []GPU // healthy GPUs last round
	gpusSeen          bool

	// Units persist across rounds and carry their received-time baseline
	// at the last recompute, deficit and allocation row; order is this
	// round's active units in priority-table order, full all of them
	// (units.go).
	units                   map[ukey]*unit
	order                   []*unit
	snapJobs                []*unit
	pt                      pairTab // the snapshot's pairs (units.go)
	spareTab                pairTab
	spareJobs               []*unit
	remap                   []int32
	full                    []slot // every unit in order, dormant pairs too (units.go)
	byLate                  []int32
	bucketStart, bucketFill []int32
	orderDirty              bool               // a pair was activated: e.order lacks it
	curPairs                []Pair             // this round's snapshot's (syncUnits)
	layouts                 map[string]*layout // per type, while the healthy GPUs are unchanged
	slab                    []unit             // newUnit's
	pairRows                []int              // setXInOrder's
	jobXIndex               map[string]int     // jobX's
	stamp                   int
	elSoft                  map[string][]string // last round's elastic extras per type (elastic.go)
	elAny                   bool                // this round's snapshot has elastic jobs
	candBufs                map[string]*candBuf // per type, reused every round
	// zKeyGen changes whenever units' deficits or shares may have
	// (recompute), zGen when the units or their order did: candidates'
	// cached order is then stale.
	zGen, zKeyGen, zBuild int
	// resetTypes are the types at the last reset (the columns of
	// unit.baseV of a unit whose vgen is typesGen+1).
	resetTypes []string
	typesGen   int // changes of resetTypes
	prepStamp  int // the last prepare (round.go)

	// Finish-time fairness's running isolated time, per job.
	iso          map[string]*isoState
	probRows     []float64               // problem's scratch
	selected     map[string][]*candidate // selectUnits', emptied every round
	selSlab      []candidate             // selectUnits' copies of the selected candidates
	annMaps      annotateMaps            // Round's annotate's
	prevAt       map[string]int          // place's: a running unit's index in Snapshot.Running
	spareRunning []Assignment            // RecycleRunning's, for place
	rPlaced      map[string]bool         // Round's, reused (roundMaps)
	rActive      map[string]*Job
	rounds       int

	// entityOf is each job's entity at the last recompute (only with
	// entities): a job moved to another entity is a reset event.
	entityOf map[string]string
	// firstDone: ResetFirst has been honoured.
	firstDone bool

	// Preemption that respects the work (preempt.go). pre: one of its
	// options is on (else none of it runs); pr is the round's own state,
	// between preBegin and preFinish; preTaken the jobs taken before
	// selection. Kept between rounds (History): when a plan of this
	// engine last started each running job, the jobs noticed last round,
	// when each job last ran (its arrival before) and the reservation.
	pre       bool
	pr        *preRound
	preTaken  int
	runStart  map[string]float64
	noticed   map[string]bool
	waitSince map[string]float64
	resv      *Reservation
}

// New checks the configuration.
func New(cfg Config) (*Engine, error) {
	if cfg.Policy == "" {
		return nil, fmt.Errorf("engine: no policy")
	}
	if cfg.RoundS == 0 {
		cfg.RoundS = 360
	}
	if cfg.RoundS < 0 || math.IsNaN(cfg.RoundS) {
		return nil, fmt.Errorf("engine: round length must be positive")
	}
	if cfg.MinRuntimeS < 0 || cfg.ReserveAfterS < 0 || math.IsNaN(cfg.MinRuntimeS) || math.IsNaN(cfg.ReserveAfterS) ||
		math.IsInf(cfg.MinRuntimeS, 0) || math.IsInf(cfg.ReserveAfterS, 0) {
		return nil, fmt.Errorf("engine: minimum runtime and reservation wait must be finite and not negative")
	}
	if cfg.GavelCompat && cfg.MinResetIntervalS == 0 {
		cfg.MinResetIntervalS = 1920
	}
	// Bad entities would fail every recompute: refuse them here.
	for n, ent := range cfg.Entities {
		if !(ent.Weight > 0) || math.IsInf(ent.Weight, 0) {
			return nil, fmt.Errorf("engine: entity %q: weight must be a positive number", n)
		}
		if ent.Policy != "" && ent.Policy != "fairness" && ent.Policy != "fifo" {
			return nil, fmt.Errorf("engine: entity %q: policy %q (want fairness or fifo)", n, ent.Policy)
		}
	}
	name := cfg.Policy
	if c, err := policies.Canonical(name); err == nil {
		name = c
	}
	e := &Engine{cfg: cfg, canonical: name, shuffler: pyrand.New(cfg.Seed + 5),
		lastJobs: map[string]bool{}, units: map[ukey]*unit{}, iso: map[string]*isoState{}}
	e.packing = strings.HasSuffix(name, "_packed") || name == "gandiva"
	if cfg.Packing != nil {
		e.packing = *cfg.Packing
	}
	// Gavel shuffles the type order for agnostic, non-packing policies and
	// skips priority-0 candidates only for FIFO.
	e.shuffle = !strings.Contains(name, "perf") && !e.packing
	e.fifo = strings.HasPrefix(name, "fifo")
	e.pre = cfg.MinRuntimeS > 0 || cfg.CheckpointAware || cfg.ReserveAfterS > 0
	return e, nil
}

// Allocation is the allocation in force (nil before the first recompute).
func (e *Engine) Allocation() *policies.Allocation { return e.alloc }

// Packing reports whether pairs are offered to the policy.
func (e *Engine) Packing() bool { return e.packing }

// UnitKey names a unit: a job id, or "a+b" for a pair.
func UnitKey(jobs []string) string { return strings.Join(jobs, "+") }

func healthyCounts(gpus []GPU) map[string]int {
	types, n := countTypes(gpus)
	c := make(map[string]int, len(types))
	for i, t := range types {
		c[t] = n[i]
	}
	return c
}

// countTypes is the GPUs' types in the order they first appear, and each
// type's healthy GPUs. A few types over many GPUs, usually listed by type:
// counted in slices (the last type first), with no map per GPU.
func countTypes(gpus []GPU) (types []string, healthy []int) {
	last := -1
	for i := range gpus {
		g := &gpus[i]
		if last < 0 || types[last] != g.Type {
			last = slices.Index(types, g.Type)
			if last < 0 {
				types, healthy = append(types, g.Type), append(healthy, 0)
				last = len(types) - 1
			}
		}
		if !g.Failed {
			healthy[last]++
		}
	}
	return types, healthy
}

// healthy is the GPUs that have not failed.
func healthy(gpus []GPU) []GPU {
	out := make([]GPU, 0, len(gpus))
	for _, g := range gpus {
		if !g.Failed {
			out = append(out, g)
		}
	}
	return out
}

// sameHealthy reports whether gpus' healthy GPUs are last (in order).
func sameHealthy(gpus, last []GPU) bool {
	k := 0
	for _, g := range gpus {
		if g.Failed {
			continue
		}
		if k >= len(last) || last[k] != g {
			return false
		}
		k++
	}
	return k == len(last)
}

// noteEvents marks a recompute as needed when the job set or the healthy
// GPUs changed since the last round.
func (e *Engine) noteEvents(s *Snapshot) {
	if e.sameJobs(s) {
		e.noteGPUs(s)
		return
	}
	if !e.jobsDelta(s) {
		now := e.spareSet
		if now == nil {
			now = make(map[string]bool, len(s.Jobs))
		}
		clear(now)
		for _, j := range s.Jobs {
			now[j.ID] = true
			if !e.lastJobs[j.ID] {
				e.needUpdate = true
			}
		}
		for id := range e.lastJobs {
			if !now[id] {
				e.needUpdate = true
				delete(e.iso, id)
			}
		}
		e.lastJobs, e.spareSet = now, e.lastJobs
	}
	e.lastIDs = e.lastIDs[:0]
	for i := range s.Jobs {
		e.lastIDs = append(e.lastIDs, s.Jobs[i].ID)
	}
	e.noteGPUs(s)
}

// jobsDelta updates lastJobs from last round's ids walked beside the
// snapshot's, looking up only where they differ: with the jobs that stay
// in the same relative order (a backend lists its jobs in a stable order),
// a snapshot id that was there means last round's id in its place left,
// and one that was not arrived. False, with nothing changed, when the walk
// cannot tell (no ids kept, the order changed): every departure is among
// the ids the walk passes over, so their count proves it found exactly
// the departures.
func (e *Engine) jobsDelta(s *Snapshot) bool {
	last := e.lastIDs
	if len(last) != len(e.lastJobs) {
		return false
	}
	gone, added := e.goneIDs[:0], e.addedIDs[:0]
	w := 0
	for i := range s.Jobs {
		id := s.Jobs[i].ID
		if w < len(last) && last[w] == id {
			w++
			continue
		}
		if !e.lastJobs[id] {
			added = append(added, id)
			continue
		}
		for w < len(last) && last[w] != id {
			gone = append(gone, last[w])
			w++
		}
		if w == len(last) {
			return false // id was there, but earlier: the order changed
		}
		w++
	}
	gone = append(gone, last[w:]...)
	e.goneIDs, e.addedIDs = gone, added
	if len(last)-len(gone) != len(s.Jobs)-len(added) {
		return false
	}
	for _, id := range gone {
		delete(e.lastJobs, id)
		delete(e.iso, id)
	}
	for _, id := range added {
		e.lastJobs[id] = true
	}
	if len(gone) > 0 || len(added) > 0 {
		e.needUpdate = true
	}
	return true
}

// sameJobs reports whether the snapshot lists last round's ids in the same
// order (most rounds: then the set is not rebuilt). Any other list, even
// of the same set, goes through jobsDelta or the rebuild, which also keep
// the set exact when a (faulty) snapshot repeats an id.
func (e *Engine) sameJobs(s *Snapshot) bool {
	if len(s.Jobs) != len(e.lastJobs) || len(s.Jobs) != len(e.lastIDs) {
		return false
	}
	for i := range s.Jobs {
		if s.Jobs[i].ID != e.lastIDs[i] {
			return false
		}
	}
	return true
}

// noteGPUs marks a recompute as needed when the healthy GPUs changed.
func (e *Engine) noteGPUs(s *Snapshot) {
	if !e.gpusSeen || !sameHealthy(s.GPUs, e.lastGPUs) {
		e.lastGPUs, e.gpusSeen = healthy(s.GPUs), true
		e.needUpdate = true
		e.layouts = nil
	}
}

// RequestReset makes the next round recompute the allocation (subject to
// the recompute throttle), as a job arrival or a GPU failure would: the
// agent calls it when it sees Nomad again after rounds it could not
// observe.
func (e *Engine) RequestReset() { e.needUpdate = true }

// Allocate brings the allocation up to date with the snapshot: on a reset
// event (subject to the recompute throttle) it resets received time and
// solves the policy. It reports whether it recomputed.
func (e *Engine) Allocate(s *Snapshot) (bool, float64, error) {
	e.noteEvents(s)
	e.syncUnits(s)
	if e.cfg.ResetFirst && !e.firstDone {
		e.firstDone = true
		e.needUpdate = true
	}
	if !e.needUpdate && len(e.cfg.Entities) > 0 {
		e.needUpdate = e.entitiesMoved(s)
	}
	if !e.needUpdate {
		return false, 0, nil
	}
	elapsed := s.TimeS - e.lastReset
	allowed := elapsed >= e.cfg.MinResetIntervalS || !e.resetDone
	if e.cfg.GavelCompat {
		// The reference tests last_reset_time == 0, which stays true until
		// a reset happens after t = 0.
		allowed = elapsed >= e.cfg.MinResetIntervalS || e.lastReset == 0
	}
	if !allowed {
		return false, 0, nil
	}
	e.resetReceived(s, elapsed)
	p := e.problem(s)
	total := 0
	for _, t := range p.GPUTypes {
		total += t.Count
	}
	var a *policies.Allocation
	if total == 0 {
		// No healthy GPU: nothing to allocate until one recovers.
		a = &policies.Allocation{Policy: e.canonical}
	} else {
		var err error
		if e.cfg.Solve != nil {
			a, err = e.cfg.Solve(e.cfg.Policy, p)
		} else if e.incremental(p) {
			a, err = e.solveLAS(p, e.probRows[:len(p.Jobs)*len(p.GPUTypes)])
		} else if e.cfg.ColdSolve || e.cfg.GavelCompat {
			// Gavel solves every program from scratch.
			a, e.hint, err = policies.SolveCold(e.cfg.Policy, p, e.hint)
		} else {
			// Consecutive recomputes differ by a few jobs: warm-start
			// each from the last.
			a, e.hint, err = policies.SolveWithHint(e.cfg.Policy, p, e.hint)
		}
		if err != nil {
			return false, 0, fmt.Errorf("engine: t=%.0f: %w", s.TimeS, err)
		}
		if e.cfg.OnSolve != nil {
			e.cfg.OnSolve(p, a)
		}
	}
	e.setAllocation(a)
	e.needUpdate = false
	e.lastReset = s.TimeS
	e.resetDone = true
	return true, a.SolveMS, nil
}

func (e *Engine) setAllocation(a *policies.Allocation) {
	e.alloc = a
	e.typeIndex = map[string]int{}
	for i, t := range a.Types {
		e.typeIndex[t] = i
	}
	e.xIndex, e.jobXIndex = nil, nil // built on demand (xLookup, jobX)
	e.zKeyGen++
	if !e.setXInOrder(a) {
		idx := e.xLookup()
		for k, u := range e.units {
			u.setX(idx, k)
			u.setQuiet()
		}
		// Dormant pairs: in the allocation or not, and active if they
		// got a share.
		activated := false
		for i, u := range e.pt.u {
			if u != nil && e.pt.dor[i] {
				row, ok := idx[e.pt.k[i]]
				activated = e.dormantRow(i, row, ok) || activated
			}
		}
		if activated {
			e.rebuildOrder()
		}
	}
}

// setXInOrder gives this round's units their rows of a without hashing
// every unit's key: with packing there are tens of thousands of pairs, and
// a policy's pairs are the snapshot's, in its order (engine.problem keeps
// it), so one walk along both finds them. It reports false, doing nothing,
// when the units are not exactly this round's or a's pairs are not in
// the snapshot's order (a history's allocation): then every unit is
// looked up.
func (e *Engine) setXInOrder(a *policies.Allocation) bool {
	if len(e.units) != len(e.order) || len(a.PairX) != len(a.PairJobs) || len(a.X) != len(a.JobIDs) {
		return false
	}
	rows := e.pairRows[:0]
	i := 0
	for _, jobs := range a.PairJobs {
		k := ukey(jobs)
		for i < len(e.pt.k) && e.pt.k[i] != k {
			i++
		}
		if i == len(e.pt.k) || e.pt.u[i] == nil {
			e.pairRows = rows
			return false
		}
		rows = append(rows, i)
		i++
	}
	e.pairRows = rows
	jobs := make([]*unit, len(a.JobIDs))
	for m, id := range a.JobIDs {
		if jobs[m] = e.units[ukey{id, ""}]; jobs[m] == nil {
			return false
		}
	}
	for _, u := range e.order {
		u.xrow, u.inX = nil, false
	}
	clear(e.pt.inX)
	for m, u := range jobs {
		u.xrow, u.inX = a.X[m], true
	}
	activated := false
	for p, i := range rows {
		if e.pt.dor[i] {
			activated = e.dormantRow(i, a.PairX[p], true) || activated
			continue
		}
		e.pt.inX[i] = true
		u := e.pt.u[i]
		u.xrow, u.inX = a.PairX[p], true
	}
	if activated {
		e.rebuildOrder()
	}
	for _, u := range e.order {
		u.setQuiet()
	}
	return true
}

// dormantRow records whether the dormant pair i (an index in the
// snapshot's pairs) is in the allocation, with row, and activates it if
// the row is a share; it reports whether it did (e.order then lacks it).
func (e *Engine) dormantRow(i int, row []float64, inX bool) bool {
	e.pt.inX[i] = inX
	if !inX || allZero(row) {
		return false // stays dormant
	}
	e.activate(int32(i))
	u := e.pt.u[i]
	u.xrow = row
	u.setQuiet()
	return true
}

// jobX is a job's row of the allocation (nil, false: not in it).
func (e *Engine) jobX(id string) ([]float64, bool) {
	a := e.alloc
	if a == nil {
		return nil, false
	}
	if e.jobXIndex == nil {
		e.jobXIndex = make(map[string]int, len(a.JobIDs))
		for m, id := range a.JobIDs {
			e.jobXIndex[id] = m
		}
	}
	if m, ok := e.jobXIndex[id]; ok {
		return a.X[m], true
	}
	return nil, false
}

// xLookup is the allocation's rows by unit, built on first use after a
// recompute (setXInOrder usually makes it unnecessary).
func (e *Engine) xLookup() map[ukey][]float64 {
	a := e.alloc
	if e.xIndex != nil || a == nil {
		return e.xIndex
	}
	e.xIndex = make(map[ukey][]float64, len(a.JobIDs)+len(a.PairJobs))
	for m, id := range a.JobIDs {
		e.xIndex[ukey{id, ""}] = a.X[m]
	}
	for p, jobs := range a.PairJobs {
		e.xIndex[ukey(jobs)] = a.PairX[p]
	}
	return e.xIndex
}

// x is the unit's share of type typ in the allocation in force.
func (e *Engine) x(u *unit, typ string) float64 {
	if u.xrow == nil {
		return 0
	}
	i, ok := e.typeIndex[typ]
	if !ok {
		return 0
	}
	return u.xrow[i]
}

// resetReceived restarts every unit's received time and adds the deficit
// X·elapsed − received to the carried deficit. Units that never ran, have
// no share and no deficit stay as they are (all zeros), which keeps a
// recompute linear in the units that matter when packing offers thousands
// of pairs. Units absent from the snapshot are forgotten.
func (e *Engine) resetReceived(s *Snapshot, elapsed float64) {
	types := typeNames(s.GPUs)
	if !slices.Equal(types, e.resetTypes) {
		e.typesGen++ // pairs' dense received time (pairCum) is stale
	}
	e.resetTypes = types
	// Each type's column in the allocation in force (-1: none), as x reads it.
	xi := make([]int, len(types))
	for i, t := range types {
		xi[i] = -1
		if j, ok := e.typeIndex[t]; ok {
			xi[i] = j
		}
	}
	for _, u := range e.order {
		if u.trivial() {
			continue
		}
		if u.vgen != e.typesGen+1 {
			u.retype(types, e.typesGen+1)
		}
		for i, t := range types {
			cum := u.cum[t]
			received := cum - u.baseV[i]
			x := 0.0
			if u.xrow != nil && xi[i] >= 0 {
				x = u.xrow[xi[i]]
			}
			u.defV[i] += x*elapsed - received
			u.baseV[i] = cum
		}
		u.setQuiet()
	}
	for k, u := range e.units {
		if u.seen != e.stamp {
			delete(e.units, k)
			// Units share slabs (newUnit): a dead one's references
			// would keep an old allocation's rows and the snapshot's
			// maps alive as long as any unit of its slab lives.
			u.xrow, u.cum, u.jt, u.pt, u.vtypes, u.defOld = nil, nil, nil, nil, nil, nil
			u.ja, u.jb = nil, nil
		}
	}
	e.zKeyGen++
}

// typeNames is the GPUs' types in name order.
func typeNames(gpus []GPU) []string {
	types, _ := countTypes(gpus)
	sort.Strings(types)
	return types
}

// entitiesMoved reports whether a job is now in another entity than at the
// last recompute (its meta changed). Jobs not seen at one (new, or before
// a restored history's first recompute here) are not moves.
func (e *Engine) entitiesMoved(s *Snapshot) bool {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if old, ok := e.entityOf[j.ID]; ok && old != e.cfg.EntityOf(j) {
			return true
		}
	}
	return false
}

// problem builds the policy's input. It also advances finish-time
// fairness's running isolated time: each recompute adds the steps done
// since the last one over the isolated (1/n equal share) throughput then.
func (e *Engine) problem(s *Snapshot) *policies.Problem {
	counts := healthyCounts(s.GPUs)
	p := &policies.Problem{GPUTypes: map[string]policies.GPUType{}, Seed: e.cfg.Seed}
	for t, c := range counts {
		p.GPUTypes[t] = policies.GPUType{Count: c}
	}
	pairs := e.packing && len(s.Pairs) > 0
	var in map[string]bool // the runnable jobs, for pairs
	if pairs {
		in = make(map[string]bool, len(s.Jobs))
	}
	// Each job's throughput on each type, looked up once: rows[r*k+i] is
	// runnable job r's on names[i] (types in name order, so that sums do
	// not depend on map order).
	names := slices.Sorted(maps.Keys(counts))
	k := len(names)
	rows := slices.Grow(e.probRows[:0], len(s.Jobs)*k)[:len(s.Jobs)*k]
	runnable := make([]int, 0, len(s.Jobs))     // indexes in s.Jobs
	iso := make([]*isoState, 0, len(s.Jobs))    // runnable's
	isoTimes := make([]float64, 0, len(s.Jobs)) // p.Jobs' IsolatedTimeS, one allocation
	p.Jobs = make([]policies.Job, 0, len(s.Jobs))
	for ji := range s.Jobs {
		j := &s.Jobs[ji]
		row := rows[len(runnable)*k : len(runnable)*k+k]
		// all: the job runs on every type of the cluster and on no other,
		// so the policy takes its own map (no policy modifies it), not a
		// copy narrowed to the cluster.
		all, any := len(j.Throughput) == k, false
		for i, t := range names {
			v := j.Throughput[t]
			row[i] = v
			if v > 0 {
				any = true
			} else {
				all = false
			}
		}
		tp := j.Throughput
		if !all {
			if !any {
				continue // cannot run anywhere in this cluster
			}
			// Narrowed to this cluster's types where the job runs.
			tp = make(map[string]float64, k)
			for i, t := range names {
				if row[i] > 0 {
					tp[t] = row[i]
				}
			}
		}
		runnable = append(runnable, ji)
		if pairs {
			in[j.ID] = true
		}
		done := j.TotalSteps - j.RemainingSteps
		st := e.iso[j.ID]
		if st == nil {
			st = &isoState{}
			e.iso[j.ID] = st
		}
		iso = append(iso, st)
		if st.tput > 0 {
			// Steps lost to a restart from an older checkpoint (done
			// falls) take back isolated time, never below none.
			st.time = math.Max(st.time+(done-st.steps)/st.tput, 0)
			st.hasTime = true
		}
		st.steps, st.hasSteps = done, true
		isoTimes = append(isoTimes, st.time) // never grows: a stable address
		// An unset scale factor means one GPU here; policies refuse 0.
		pj := policies.Job{ID: j.ID, Throughput: tp, ScaleFactor: max(j.ScaleFactor, 1), Weight: j.Weight,
			RemainingSteps: math.Max(j.RemainingSteps, 0), TimeSinceStartS: math.Max(s.TimeS-j.ArrivalS, 0),
			IsolatedTimeS: &isoTimes[len(isoTimes)-1]}
		if j.DeadlineS > 0 && j.DeadlineS > j.ArrivalS {
			// policies count slo_s from the job's start.
			slo := j.DeadlineS - j.ArrivalS
			pj.SLOs = &slo
		}
		p.Jobs = append(p.Jobs, pj)
	}
	e.probRows = rows
	if len(e.cfg.Entities) > 0 {
		rj := make([]Job, len(runnable))
		for r, ji := range runnable {
			rj[r] = s.Jobs[ji]
		}
		e.setEntities(p, rj)
	}
	// Isolated throughput for the next interval: an equal 1/n share.
	cn := make([]float64, k)
	for i, t := range names {
		cn[i] = float64(counts[t])
	}
	n := float64(len(runnable))
	for r, ji := range runnable {
		sf := float64(max(s.Jobs[ji].ScaleFactor, 1))
		sum := 0.0
		for i := range names {
			sum += cn[i] / (n * sf)
		}
		scale := 1.0
		if sum > 1 {
			scale = 1 / sum
		}
		tput := 0.0
		for i, v := range rows[r*k : r*k+k] {
			tput += v * cn[i] / (n * sf) * scale
		}
		iso[r].tput, iso[r].hasTput = tput, true
	}
	if pairs {
		// Tens of thousands of pairs at every recompute, but few
		// throughput maps (the simulator shares one per model pair): each
		// map is checked against the types, or narrowed to them, once per
		// call, and pairs listed by first job look that job up once.
		keep := pairMaps{}
		p.Pairs = make([]policies.Pair, 0, len(s.Pairs))
		lastID, lastIn := "", false
		for i, pr := range s.Pairs {
			if i == 0 || pr.Jobs[0] != lastID {
				lastID, lastIn = pr.Jobs[0], in[pr.Jobs[0]]
			}
			if !lastIn || !in[pr.Jobs[1]] {
				continue
			}
			key := mapID(pr.Throughput)
			tp, ok := keep[key]
			if !ok {
				tp = pr.Throughput
				if !sameKeys(tp, counts) {
					tp = make(map[string][2]float64, len(counts))
					for t := range counts {
						tp[t] = pr.Throughput[t]
					}
				}
				keep[key] = tp
			}
			p.Pairs = append(p.Pairs, policies.Pair{Jobs: pr.Jobs, Throughput: tp})
		}
	}
	return p
}

// setEntities gives the policy the configured entities and each job's
// (EntityOf), adding the default entity when a job falls into it
// undeclared, and records them for entitiesMoved.
func (e *Engine) setEntities(p *policies.Problem, runnable []Job) {
	p.Entities = make(map[string]policies.Entity, len(e.cfg.Entities)+1)
	for n, ent := range e.cfg.Entities {
		p.Entities[n] = ent
	}
	e.entityOf = make(map[string]string, len(runnable))
	for i := range runnable {
		ent := e.cfg.EntityOf(&runnable[i])
		p.Jobs[i].Entity = ent
		e.entityOf[runnable[i].ID] = ent
		if _, ok := p.Entities[ent]; !ok {
			p.Entities[ent] = policies.Entity{Weight: 1, Policy: "fairness"}
		}
	}
}

// sameKeys reports whether m has exactly the types in counts.
func sameKeys(m map[string][2]float64, counts map[string]int) bool {
	if len(m) != len(counts) {
		return false
	}
	for t := range m {
		if _, ok := counts[t]; !ok {
			return false
		}
	}
	return true
}

// Fluid decides only the allocation, for backends that realize X fluidly
// (the simulator's ideal baseline, Gavel Fig. 13b): its plans carry the
// allocation in force and no assignments.
type Fluid struct{ *Engine }

// Round brings the allocation up to date.
func (f Fluid) Round(s *Snapshot) (*Plan, error) {
	recomputed, solveMS, err := f.Allocate(s)
	if err != nil {
		return nil, err
	}
	return &Plan{TimeS: s.TimeS, Recomputed: recomputed, SolveMS: solveMS, Allocation: f.alloc}, nil
}

// isoState is a job's running isolated time (finish-time fairness): the
// time, the isolated throughput for the next interval and the steps done
// at the last recompute; has* say which were set (History's maps).
type isoState struct {
	time, tput, steps          float64
	hasTime, hasTput, hasSteps bool
}

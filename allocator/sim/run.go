package sim

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/ledger"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// pairState is a colocation of two active jobs of equal scale factor that
// the measurements allow; it lives in its earlier job's partner list.
type pairState struct {
	a, b *jobState
	key  string
	tput map[string][2]float64
	recv map[string]float64 // nil until the pair first runs
	li   int                // index in simulator.pairList while it is clean
}

// simulator is the virtual-time backend state.
type simulator struct {
	o         Options
	tb        *throughputs.Table
	eng       *engine.Engine
	types     []string
	isoCounts []float64           // the cluster's GPUs per type, in types' order (isoTputOf's)
	retired   []engine.Assignment // last round's Running, replaced by this round's plan
	gpus      []engine.GPU
	nGPUs     int
	src       Source
	pending   *trace.Job

	all      []*jobState
	active   []*jobState
	byIDs    map[string]*jobState // active jobs
	led      *ledger.Ledger       // received time (jobState.received, pairState.recv are its accounts)
	pairs    map[string]*pairState
	pairTput map[[2]throughputs.Key]map[string][2]float64
	viewTput map[[2]throughputs.Key]map[string][2]float64 // the policy's (HiddenPairs)
	// pairList is the snapshot's pairs, rebuilt only when pairsDirty.
	pairList []engine.Pair
	// jobBuf is the snapshot's jobs, rewritten every round: no round
	// keeps a snapshot past its own (the loop has no recorder here), and
	// at a thousand active jobs a fresh slice per round was a sixth of
	// the run's CPU (zeroing it).
	jobBuf     []engine.Job
	pairsDirty bool

	now, roundStart, roundEnd float64
	hasRoundEnd               bool
	running                   []micro
	prev                      []engine.Assignment

	busyGPUS    float64
	rounds      int
	recomputes  int
	preemptions int
	retunes     int
	solveMS     []float64
	windowDone  int
	idleRounds  int
	peakActive  int
	steps       int         // clock ticks (Next)
	faults      *faultState // nil without fault injection (faults.go)
	classBusy   *ClassBusy  // nil unless Options.BusyWindowS (busy.go)

	// VC mode (vc.go): the nodes, each node's GPU ids in index order, and
	// the jobs the plans stopped per VC and of the opportunistic class.
	nodes    []engine.Node
	nodeGPUs map[string][]string
	vcStops  map[string]int
	oppStops int
	meas     *measurer // nil without measurement noise (measure.go)
	oppEvict int       // opportunistic jobs stopped for guaranteed work

	// Placement (placement.go): GPUs per server, profiles, GPU → server.
	srvGPUs   map[string]int
	prof      profiling
	gpuServer map[string]string

	dl2 *dl2State // Options.DL2 (dl2.go); nil without

	// Restart costs and preemption (costs.go): each model's row, the
	// counters and the jobs reserved for.
	jobCosts   map[string]JobCosts
	lostGPUS   float64
	restarts   int
	migrations int
	noticed    int
	reserved   map[string]bool

	waiting map[string]int // job-rounds per waiting reason (Options.Explain)
}

// Run simulates the trace to the end of the measurement window.
func Run(src Source, o Options) (*Result, error) {
	wall := time.Now()
	s := &simulator{o: o, src: src, tb: o.Throughputs, pairs: map[string]*pairState{}, byIDs: map[string]*jobState{}, led: ledger.New(),
		pairTput: map[[2]throughputs.Key]map[string][2]float64{}}
	if s.tb == nil {
		s.tb = throughputs.Default()
	}
	if o.Cluster.GPUsPerServer <= 0 {
		s.o.Cluster.GPUsPerServer = 1
	}
	if o.WindowEnd < o.WindowStart {
		return nil, fmt.Errorf("sim: window end before start")
	}
	if err := s.buildCluster(); err != nil {
		return nil, err
	}
	if err := s.initFaults(); err != nil {
		return nil, err
	}
	if err := s.initDL2(); err != nil {
		return nil, err
	}
	if err := s.initCosts(); err != nil {
		return nil, err
	}
	// The one driver loop, on the simulator's virtual clock; the ideal
	// baseline decides only the allocation and realizes it fluidly; in VC
	// mode the given decider decides.
	r := loop.Round{Backend: s, Decider: o.Decider, Explain: o.Explain}
	if o.Decider != nil {
		if o.Ideal {
			return nil, fmt.Errorf("sim: a decider of its own needs the round-based mechanism, not the ideal one")
		}
	} else {
		eng, err := engine.New(o.Engine)
		if err != nil {
			return nil, err
		}
		s.eng = eng
		r.Decider = eng
		if o.Ideal {
			r.Decider = engine.Fluid{Engine: eng}
		}
	}
	var err error
	if r.Decider, err = s.initPlacement(r.Decider); err != nil {
		return nil, err
	}
	if r.Decider, err = s.initMeasure(r.Decider); err != nil {
		return nil, err
	}
	if err := s.fetch(); err != nil {
		return nil, err
	}
	if s.o.RoundGrid && s.pending != nil {
		// The first round too falls on the grid, with every job that
		// arrived by then.
		s.now = s.gridNext(s.pending.ArrivalS)
	}
	step := func(ctx context.Context) error {
		_, p, err := r.Step(ctx)
		if d, ok := r.Decider.(*engine.Engine); ok && err == nil && d == s.eng {
			// Nothing else holds the plan: only Enforce read it. Its
			// assignments are the next snapshot's Running; last round's
			// Running is listed no more.
			s.eng.Recycle(p)
			s.eng.RecycleRunning(s.retired)
		}
		s.retired = nil
		return err
	}
	if err := loop.Run(context.Background(), s, step, loop.Always); err != nil {
		return nil, err
	}
	res := s.result()
	s.faultResult(res)
	s.vcResult(res)
	res.EstimateErrorMean = s.meas.estimateError()
	s.busyResult(res)
	s.preemptionResult(res)
	res.WallS = time.Since(wall).Seconds()
	return res, nil
}

func (s *simulator) buildCluster() error {
	if len(s.o.Nodes) > 0 {
		return s.buildNodes()
	}
	for t := range s.o.Cluster.Types {
		s.types = append(s.types, t)
	}
	sort.Strings(s.types)
	per := s.o.Cluster.GPUsPerServer
	for _, t := range s.types {
		n := s.o.Cluster.Types[t]
		for i := 0; i < n; i++ {
			s.gpus = append(s.gpus, engine.GPU{ID: fmt.Sprintf("%s-%d", t, i), Type: t,
				Server: fmt.Sprintf("%s-s%d", t, i/per)})
		}
		s.nGPUs += n
	}
	if s.nGPUs == 0 {
		return fmt.Errorf("sim: the cluster has no GPUs")
	}
	return nil
}

func (s *simulator) fetch() error {
	j, ok, err := s.src.Next()
	if err != nil {
		return err
	}
	if !ok {
		s.pending = nil
		return nil
	}
	if err := s.checkDL2(&j); err != nil {
		return err
	}
	if err := s.checkCosts(&j); err != nil {
		return err
	}
	s.pending = &j
	return nil
}

func (s *simulator) inWindow(id int) bool {
	if s.o.WindowEnd == 0 {
		return true
	}
	return id >= s.o.WindowStart && id < s.o.WindowEnd
}

func (s *simulator) finished() bool {
	if s.o.WindowEnd > 0 {
		return s.windowDone >= s.o.WindowEnd-s.o.WindowStart
	}
	return s.pending == nil && len(s.active) == 0
}

func (s *simulator) addJob(tj trace.Job) {
	s.gavelProfile(&tj)
	js := &jobState{tj: tj, id: fmt.Sprint(tj.ID), tput: map[string]float64{}, remaining: tj.TotalSteps,
		started: -1}
	js.received = s.led.Job(js.id)
	if s.o.Costs != nil {
		js.jc = s.jobCosts[tj.Model]
	}
	for _, t := range s.types {
		if twoRole(&tj) {
			js.tput[t] = s.dl2Tput(&tj)
		} else if tj.StepsPerS != nil {
			if v := tj.StepsPerS[t]; v > 0 {
				js.tput[t] = v
			}
		} else if v, ok := s.tb.Isolated(tj.Key(), t); ok {
			js.tput[t] = v
		}
	}
	s.all = append(s.all, js)
	if s.packs() {
		for _, a := range s.active {
			if a.tj.ScaleFactor != js.tj.ScaleFactor {
				continue
			}
			tp := s.pairView(a, js)
			useful := false
			for _, v := range tp {
				useful = useful || (v[0] > 0 && v[1] > 0)
			}
			if !useful {
				continue
			}
			ps := &pairState{a: a, b: js, key: engine.UnitKey([]string{a.id, js.id}), tput: tp}
			a.partners = append(a.partners, ps)
			s.pairs[ps.key] = ps
			s.pairsDirty = true
		}
	}
	s.active = append(s.active, js)
	s.byIDs[js.id] = js
}

// isoTput is a job's throughput on an equal 1/n share of the cluster.
func (s *simulator) isoTput(js *jobState, n int) float64 {
	if n == js.isoN {
		return js.isoV
	}
	v := s.isoTputOf(js, n)
	js.isoN, js.isoV = n, v
	return v
}

func (s *simulator) isoTputOf(js *jobState, n int) float64 {
	// Dense rows in s.types' order (the sums' order): the cluster's
	// counts and the job's rates are fixed for the run.
	if s.isoCounts == nil {
		for _, t := range s.types {
			s.isoCounts = append(s.isoCounts, float64(s.o.Cluster.Types[t]))
		}
	}
	if js.isoRates == nil {
		js.isoRates = make([]float64, len(s.types))
		for i, t := range s.types {
			js.isoRates[i] = js.tput[t]
		}
	}
	sf := float64(max(js.tj.ScaleFactor, 1))
	sum, tput := 0.0, 0.0
	for i, c := range s.isoCounts {
		x := c / (float64(n) * sf)
		sum += x
		tput += js.isoRates[i] * x
	}
	if sum > 1 {
		tput /= sum
	}
	return tput
}

// Next is the virtual clock: the run goes on until every measured job
// finished or a limit stops it.
func (s *simulator) Next(context.Context) bool {
	if s.steps > 0 {
		s.peakActive = max(s.peakActive, len(s.active))
		if s.o.Progress != nil {
			s.o.Progress(s.now, s.rounds, len(s.active), s.windowDone)
		}
	}
	s.steps++
	if s.finished() {
		return false
	}
	if s.o.MaxTimeS > 0 && s.now > s.o.MaxTimeS {
		return false
	}
	return s.o.MaxActive <= 0 || len(s.active) <= s.o.MaxActive
}

// Observe advances virtual time to the end of the round (the latest
// micro-task's finish), else to the next arrival, credits what ran, adds
// the jobs that arrived and reports the snapshot; nil while no job is
// active.
func (s *simulator) Observe() (*engine.Snapshot, error) {
	s.beforeStep()
	s.countBusy()
	// Advance the clock: to the end of the round, else to the next arrival
	// (or fault event).
	if len(s.running) > 0 {
		end := s.now
		for _, m := range s.running {
			end = math.Max(end, m.finish)
		}
		if s.hasRoundEnd {
			s.roundStart = s.roundEnd
		}
		end = s.gridEnd(end)
		s.roundEnd, s.hasRoundEnd = end, true
		s.now = end
		s.idleRounds = 0
	} else if s.pending != nil && s.pending.ArrivalS > s.now {
		s.now = math.Min(s.gridNext(s.pending.ArrivalS), s.nextFaultS())
	} else if s.pending == nil || s.pending.ArrivalS <= s.now {
		if len(s.active) > 0 && s.rounds > 0 {
			// Nothing ran and nothing arrives: idle for a round (a recompute
			// may be throttled), and give up if that never ends.
			s.idleRounds++
			if s.idleRounds > 10000 && !s.recoveryScheduled() {
				return nil, fmt.Errorf("sim: t=%.0f: %d active jobs can never run", s.now, len(s.active))
			}
			s.now = s.idleUntil(s.now + s.o.Engine.RoundS)
		}
	}
	s.complete()
	s.faultsUntil(s.now)
	for s.pending != nil && s.pending.ArrivalS <= s.now {
		s.addJob(*s.pending)
		if err := s.fetch(); err != nil {
			return nil, err
		}
	}
	if len(s.active) == 0 {
		return nil, nil
	}
	return s.snapshot(), nil
}

// Enforce runs the plan's units for one round (micro-tasks), or under the
// ideal baseline the allocation fluidly until the next arrival.
func (s *simulator) Enforce(plan *engine.Plan) error {
	s.vcIntents(plan)
	for _, w := range plan.Waiting {
		if s.waiting == nil {
			s.waiting = map[string]int{}
		}
		s.waiting[w.Reason.WaitKey()]++
	}
	if s.o.Ideal {
		return s.ideal(plan)
	}
	return s.mechanism(plan)
}

// complete credits the finished round's micro-tasks.
func (s *simulator) complete() {
	for _, m := range s.running {
		credited := m.finish - s.roundStart
		if !s.o.Engine.GavelCompat || s.o.Ideal {
			credited = m.finish - m.start()
		}
		s.busyGPUS += credited * float64(len(m.gpus))
		held := m.finish - m.start()
		if len(m.jobs) == 2 {
			if ps := s.pairs[m.pairKey]; ps != nil && s.led.CreditPair(ps.key, m.typ, credited) {
				ps.recv = s.led.Pair(ps.key)
				if !s.pairsDirty {
					// Only this entry changes: no need to rebuild.
					s.pairList[ps.li].ReceivedS = ps.recv
				}
			}
		}
		for i, js := range m.jobs {
			if js.done {
				continue
			}
			if len(m.jobs) == 1 {
				js.received.Credit(m.typ, credited)
			}
			price := s.o.Cluster.PricePerHourUS[m.typ]
			js.cost += price * credited / 3600 * float64(max(js.tj.ScaleFactor, 1, len(m.gpus)))
			if m.dl2 {
				// Epochs done, accumulated as dl2.Env does.
				js.dl2Done += m.steps[i]
				js.remaining = js.tj.TotalSteps - js.dl2Done
				if m.dl2End {
					js.remaining = 0
				}
			} else {
				js.remaining -= m.steps[i]
			}
			js.heldS += held
			s.measure(js, &m, i)
			if it := m.iso[i]; it > 0 {
				js.isoTime += m.steps[i] / it
			}
			if s.o.Costs != nil && !m.dl2 {
				s.account(js, &m, i)
			}
			if js.remaining <= 0 {
				js.done = true
				js.finish = m.finish
				if len(m.jobs) == 2 && !s.o.Engine.GavelCompat && m.tput[i] > 0 {
					// A job of a pair finishes at its own last step (its
					// task exits then), not at its partner's; Gavel
					// records the pair's micro-task end (GavelCompat).
					js.finish = m.start() + m.cost + m.steps[i]/m.tput[i]
				}
				if s.inWindow(js.tj.ID) {
					s.windowDone++
				}
			}
		}
	}
	// Reused next round (nothing keeps the round's micro-tasks).
	clear(s.running)
	s.running = s.running[:0]
	kept := s.active[:0]
	anyDone := false
	for _, js := range s.active {
		if !js.done {
			kept = append(kept, js)
		} else {
			anyDone = true
			delete(s.byIDs, js.id)
			s.led.Forget(js.id)
			for _, ps := range js.partners {
				delete(s.pairs, ps.key)
				s.led.ForgetPair(ps.key)
			}
			js.partners = nil
		}
	}
	if anyDone && len(s.pairs) > 0 {
		for _, js := range kept {
			ps := js.partners[:0]
			for _, p := range js.partners {
				if p.b.done {
					delete(s.pairs, p.key)
					s.led.ForgetPair(p.key)
				} else {
					ps = append(ps, p)
				}
			}
			clear(js.partners[len(ps):])
			js.partners = ps
		}
		s.pairsDirty = true
	}
	for i := len(kept); i < len(s.active); i++ {
		s.active[i] = nil
	}
	s.active = kept
}

// pairView is what the policy is told of a pair's throughputs: the table's,
// or with Options.HiddenPairs the estimate of a hidden pair (the pair then
// runs at the table's, pairKeys).
func (s *simulator) pairView(a, b *jobState) map[string][2]float64 {
	if s.o.HiddenPairs == nil {
		return s.pairKeys(a, b)
	}
	k := [2]throughputs.Key{a.tj.Key(), b.tj.Key()}
	if v, ok := s.viewTput[k]; ok {
		return v
	}
	v := map[string][2]float64{}
	for _, t := range s.types {
		if p, ok := s.o.HiddenPairs.Pair(s.tb, k[0], k[1], t); ok {
			v[t] = p
		}
	}
	if s.viewTput == nil {
		s.viewTput = map[[2]throughputs.Key]map[string][2]float64{}
	}
	s.viewTput[k] = v
	return v
}

func (s *simulator) pairKeys(a, b *jobState) map[string][2]float64 {
	k := [2]throughputs.Key{a.tj.Key(), b.tj.Key()}
	if v, ok := s.pairTput[k]; ok {
		return v
	}
	v := map[string][2]float64{}
	for _, t := range s.types {
		if p, ok := s.tb.Pair(k[0], k[1], t); ok {
			v[t] = p
		}
	}
	s.pairTput[k] = v
	return v
}

func (s *simulator) snapshot() *engine.Snapshot {
	snap := &engine.Snapshot{TimeS: s.now, GPUs: s.gpus, Running: s.prev, Jobs: s.jobBuf[:0]}
	vc := s.o.Decider != nil // VC mode: the nodes, each job's VC and class (vc.go)
	if vc || s.o.Placement != nil {
		snap.Nodes = s.nodes
	}
	for _, js := range s.active {
		j := engine.Job{ID: js.id, ScaleFactor: js.tj.ScaleFactor, Throughput: js.tput, Weight: js.tj.Priority,
			ArrivalS: js.tj.ArrivalS, TotalSteps: js.tj.TotalSteps, RemainingSteps: js.remaining, ReceivedS: js.received,
			Started: js.ran, Measured: js.measured, Model: js.tj.Model, Profile: js.tj.Profile, User: js.tj.User}
		js.measured = nil // reported once
		if s.o.Costs != nil {
			s.snapshotCosts(js, &j)
		}
		if v := s.compatOrderSpeed(js); v != 1 {
			j.Throughput = make(map[string]float64, len(js.tput))
			for t, x := range js.tput {
				j.Throughput[t] = x * v
			}
		}
		if vc {
			j.VC = js.tj.VC
			if js.tj.Opportunistic {
				j.Class = engine.Opportunistic
			}
		}
		if js.tj.SLOFactor > 0 {
			j.DeadlineS = js.tj.ArrivalS + js.tj.SLOFactor*s.durationS(js)
		}
		if twoRole(&js.tj) {
			j.Elastic = dl2Elastic(&js.tj)
		} else if js.tj.ElasticMaxGPUs > max(js.tj.ScaleFactor, 1) {
			j.Elastic = &engine.Elastic{StepGPUs: max(js.tj.ElasticStepGPUs, 1), MaxGPUs: js.tj.ElasticMaxGPUs}
		}
		snap.Jobs = append(snap.Jobs, j)
	}
	s.jobBuf = snap.Jobs
	if s.packs() {
		// Pairs ordered by (earlier job, later job) in arrival order.
		if s.pairsDirty {
			s.pairList = s.pairList[:0]
			for _, a := range s.active {
				for _, ps := range a.partners {
					ps.li = len(s.pairList)
					s.pairList = append(s.pairList, engine.Pair{Jobs: [2]string{a.id, ps.b.id}, Throughput: ps.tput, ReceivedS: ps.recv})
				}
			}
			s.pairsDirty = false
		}
		snap.Pairs = s.meas.pairsMeasured(s.pairList)
	}
	return snap
}

func (s *simulator) durationS(js *jobState) float64 {
	if js.tj.DurationS > 0 {
		return js.tj.DurationS
	}
	if v := js.tput["v100"]; v > 0 {
		return js.tj.TotalSteps / v
	}
	return 0
}

func (s *simulator) byID(ids []string) []*jobState {
	out := make([]*jobState, 0, len(ids))
	for _, id := range ids {
		if js := s.byIDs[id]; js != nil {
			out = append(out, js)
		}
	}
	return out
}

func (s *simulator) mechanism(plan *engine.Plan) error {
	s.rounds++
	if plan.Recomputed {
		s.recomputes++
		s.solveMS = append(s.solveMS, plan.SolveMS)
	}
	n := len(s.active)
	round := s.roundS()
	for _, js := range s.active {
		js.compatSpeed = 0 // not placed this round: its profile's speedup
	}
	s.stops(plan)
	// The plan's intents follow its assignments job by job: whether a job
	// keeps its GPUs is the round's decision, not re-derived here.
	intents := plan.Intents
	for _, a := range plan.Assignments {
		jobs := s.byID(a.Jobs)
		m := micro{jobs: jobs, typ: a.Type, gpus: a.GPUs, begin: s.now}
		var tput [2]float64
		if len(jobs) == 2 {
			m.pairKey = engine.UnitKey(a.Jobs)
			tput = s.pairKeys(jobs[0], jobs[1])[a.Type]
		} else {
			f := s.cpuFactor(jobs[0], a, 0)
			tput[0] = s.resizedTput(jobs[0], a) * f
			jobs[0].compatSpeed = f
		}
		cost := 0.0
		var notice [2]bool
		restart := false
		for k, js := range jobs {
			in := intents[k].Intent
			moved := in != engine.IntentKeep && in != engine.IntentResize
			if in == engine.IntentRetune {
				s.retunes++
				if s.o.Placement != nil && s.o.Placement.Compat {
					moved = false // the reference re-places for free
				} else {
					s.preemptions++
				}
			}
			if s.o.PreemptionCostS > 0 && js.ran && moved {
				cost = math.Max(cost, s.o.PreemptionCostS)
			}
			if s.o.StartCostS > 0 && moved {
				cost = math.Max(cost, s.o.StartCostS)
			}
			if in == engine.IntentMigrate {
				s.preemptions++
				s.migrations++
			}
			if moved && js.ran {
				s.restarts++
				restart = true
			}
			if s.o.Costs != nil {
				notice[k] = s.start(js, moved, intents[k].Checkpoint, &cost)
			}
		}
		if restart && s.o.Costs != nil {
			s.lostGPUS += cost * float64(len(a.GPUs))
		}
		intents = intents[len(a.Jobs):]
		m.finish, m.cost, m.tput = s.now, cost, tput
		if len(jobs) == 1 && s.dl2 != nil && twoRole(&jobs[0].tj) {
			js := jobs[0]
			s.dl2Run(&m, js, a, round)
			m.iso = append(m.iso, s.isoTput(js, n))
			if !js.ran {
				js.ran = true
				js.started = s.now
			}
			s.running = append(s.running, m)
			continue
		}
		for i, js := range jobs {
			steps := math.Min(math.Floor(tput[i]*math.Max(round-cost, 0)), js.remaining)
			if notice[i] && steps < js.remaining {
				// Checkpoint at the round's end, on notice: its time is
				// not spent training.
				m.ckpt[i] = js.jc.CheckpointS
				steps = math.Min(math.Floor(tput[i]*math.Max(round-cost-m.ckpt[i], 0)), js.remaining)
			}
			m.steps = append(m.steps, steps)
			m.iso = append(m.iso, s.isoTput(js, n))
			if tput[i] > 0 {
				end := s.now + cost + steps/tput[i]
				if m.ckpt[i] > 0 {
					end += m.ckpt[i]
				}
				m.finish = math.Max(m.finish, end)
			}
			if s.o.FinishAtRoundEnd {
				m.finish = s.now + round
			}
			if !js.ran {
				js.ran = true
				js.started = s.now
			}
		}
		s.running = append(s.running, m)
	}
	s.preemptions += len(plan.Suspend)
	s.retired, s.prev = s.prev, plan.Assignments
	return nil
}

// ideal realizes the allocation fluidly until the next arrival.
func (s *simulator) ideal(plan *engine.Plan) error {
	s.rounds++
	if plan.Recomputed {
		s.recomputes++
		s.solveMS = append(s.solveMS, plan.SolveMS)
	}
	a := plan.Allocation
	if a == nil {
		return nil
	}
	idx := map[string]int{}
	for i, id := range a.JobIDs {
		idx[id] = i
	}
	dt := 0.0
	if s.pending != nil {
		dt = s.pending.ArrivalS - s.now
	} else {
		// No more arrivals: run until the first job would finish.
		dt = math.Inf(1)
		for i, id := range a.JobIDs {
			if js := s.byID([]string{id}); len(js) == 1 && a.Effective[i] > 0 {
				dt = math.Min(dt, js[0].remaining/a.Effective[i])
			}
		}
		if math.IsInf(dt, 1) {
			return fmt.Errorf("sim: t=%.0f: the allocation runs no job", s.now)
		}
		dt = math.Max(math.Ceil(dt)+1, 1)
	}
	steps := map[string]float64{}
	for m, id := range a.JobIDs {
		js := s.byID([]string{id})
		if len(js) == 0 {
			continue
		}
		for k, t := range a.Types {
			steps[id] += math.Trunc(a.X[m][k] * dt * js[0].tput[t])
		}
	}
	for p, pj := range a.PairJobs {
		js := s.byID(pj[:])
		if len(js) != 2 {
			continue
		}
		tp := s.pairKeys(js[0], js[1])
		for k, t := range a.Types {
			for i := range 2 {
				steps[pj[i]] += math.Trunc(a.PairX[p][k] * dt * tp[t][i])
			}
		}
	}
	n := len(s.active)
	for _, js := range s.active {
		st, ok := steps[js.id]
		if !ok {
			continue
		}
		if !js.ran && st > 0 {
			js.ran, js.started = true, s.now
		}
		s.running = append(s.running, micro{jobs: []*jobState{js}, typ: "", gpus: nil,
			steps: []float64{st}, iso: []float64{s.isoTput(js, n)}, finish: s.now + dt, begin: s.now})
	}
	// Busy time: the allocation's GPU share over the interval.
	for m := range a.X {
		sf := 1.0
		if js := s.byID([]string{a.JobIDs[m]}); len(js) == 1 {
			sf = float64(max(js[0].tj.ScaleFactor, 1))
		}
		for k := range a.Types {
			s.busyGPUS += a.X[m][k] * sf * dt
		}
	}
	for p := range a.PairX {
		for k := range a.Types {
			s.busyGPUS += a.PairX[p][k] * dt
		}
	}
	return nil
}

func (s *simulator) result() *Result {
	r := &Result{Policy: s.o.Engine.Policy, Rounds: s.rounds, Recomputes: s.recomputes, Preemptions: s.preemptions, Retunes: s.retunes, EndS: s.now,
		PeakActive: s.peakActive, WaitingReasons: s.waiting}
	r.Finished = s.finished()
	var jcts, rhos []float64
	first, last := math.Inf(1), 0.0
	slo := 0
	anySLO := false
	for _, js := range s.all {
		in := s.inWindow(js.tj.ID)
		jr := JobResult{ID: js.tj.ID, Model: js.tj.Model, ScaleFactor: js.tj.ScaleFactor, Priority: js.tj.Priority,
			ArrivalS: js.tj.ArrivalS, StartS: js.started, TotalSteps: js.tj.TotalSteps, InWindow: in, Done: js.done, CostUSD: js.cost}
		r.CostUSD += js.cost
		if js.done {
			jr.FinishS = js.finish
			jr.JCTS = js.finish - js.tj.ArrivalS
			if js.isoTime > 0 {
				jr.Rho = jr.JCTS / js.isoTime
			}
		}
		r.Jobs = append(r.Jobs, jr)
		if !in {
			continue
		}
		r.JobsInWindow++
		if js.tj.SLOFactor > 0 {
			anySLO = true
			if !js.done || js.finish > js.tj.ArrivalS+js.tj.SLOFactor*s.durationS(js) {
				slo++
			}
		}
		first = math.Min(first, js.tj.ArrivalS)
		if js.done {
			r.JobsDone++
			jcts = append(jcts, jr.JCTS)
			last = math.Max(last, js.finish)
			if jr.Rho > 0 {
				rhos = append(rhos, jr.Rho)
			}
		}
	}
	r.Users = userResults(s.all)
	if anySLO {
		r.SLOViolations = &slo
	}
	if len(jcts) > 0 {
		sum := 0.0
		for _, v := range jcts {
			sum += v
		}
		r.AvgJCTS = sum / float64(len(jcts))
		sj := sortedCopy(jcts)
		r.P50JCTS = Percentile(sj, 50)
		r.P99JCTS = Percentile(sj, 99)
		r.MakespanS = last - first
	}
	if len(rhos) > 0 {
		sum, gt := 0.0, 0
		for _, v := range rhos {
			sum += v
			r.FTFRhoMax = math.Max(r.FTFRhoMax, v)
			if v > 1 {
				gt++
			}
		}
		r.FTFRhoAvg = sum / float64(len(rhos))
		r.FTFRhoFracGt1 = float64(gt) / float64(len(rhos))
	}
	if s.now > 0 {
		r.Utilization = s.busyGPUS / (float64(s.nGPUs) * s.now)
	}
	if len(s.solveMS) > 0 {
		ss := sortedCopy(s.solveMS)
		r.SolveMSP50 = Percentile(ss, 50)
		r.SolveMSMax = ss[len(ss)-1]
	}
	return r
}

// resizedTput is a job's throughput on an assignment: the table's at its
// scale factor, or for an elastic job resized to n GPUs the table's value at
// n when measured, else linear from the largest measured scale factor
// below n (throughputs.Table.Scaled).
func (s *simulator) resizedTput(js *jobState, a engine.Assignment) float64 {
	sf := max(js.tj.ScaleFactor, 1)
	n := len(a.GPUs)
	if n == sf || js.tj.ElasticMaxGPUs <= sf {
		return js.tput[a.Type]
	}
	if v, ok := s.tb.Scaled(js.tj.Model, n, a.Type); ok {
		return v
	}
	return js.tput[a.Type] * float64(n) / float64(sf)
}

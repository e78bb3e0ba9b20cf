package nomad

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/internal/crashpoint"
)

const (
	nodeTarget   = "${node.unique.id}"
	deviceTarget = "${device.ids}"
)

// Enforce carries a plan out: it scales suspended jobs to 0 and waits for
// them to stop (their tasks get kill_timeout to checkpoint), re-registers
// started jobs with pins, leaves kept jobs untouched, then waits (bounded
// by AckTimeout) until the allocations reflect the plan.
func (b *Backend) Enforce(p *engine.Plan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.intents = intentsOf(p)
	var errs []error
	starting := map[string]bool{}
	for _, a := range p.Assignments {
		if a.Action == engine.Start {
			for _, id := range a.Jobs {
				starting[id] = true
			}
		}
	}
	// Every stop of this phase is one independent scale call: they are
	// collected in the plan's order, issued a few at a time, and reported
	// (log, events, errors) in that order.
	var stops []stopOp
	for _, id := range p.Suspend {
		stops = append(stops, stopOp{id: id, event: b.eventOf(id, engine.IntentSuspend)})
	}
	// A lone sharer (its partner left during the interval) is not
	// reported as running (runningPairs), so a plan that does not run it
	// does not list it in Suspend: it stops here, as the simulator ends
	// its pair's run with the round. Left running it would hold its share
	// against the next pair planned on that GPU.
	planned := map[string]bool{}
	for _, a := range p.Assignments {
		for _, id := range a.Jobs {
			planned[id] = true
		}
	}
	// Both sweeps over every job below go in id order (reports, events
	// and errors in a stable order): sorted once.
	ids := slices.Sorted(maps.Keys(b.jobs))
	for _, id := range ids {
		st := b.jobs[id]
		if !st.shared || len(st.gpus) == 0 || planned[id] || slices.Contains(p.Suspend, id) {
			continue
		}
		stops = append(stops, stopOp{id: id, event: string(engine.IntentSuspend)})
	}
	// Moving jobs stop first, all of them, before any start: a destructive
	// update whose new GPUs are still held keeps the old allocation, so two
	// jobs swapping GPUs would wait on each other forever. A retuned job
	// (same GPUs, other cores and memory) stops the same way: its task
	// checkpoints, and the start below restarts it with its new resources
	// once every retuned job's old ones are free.
	for _, a := range p.Assignments {
		if a.Action != engine.Start {
			continue
		}
		for _, id := range a.Jobs {
			if st := b.jobs[id]; st != nil && st.live > 0 {
				why := "rondo: vacate for migration"
				if b.eventOf(id, engine.IntentMigrate) == string(engine.IntentRetune) {
					why = "rondo: retune (restart with other cores and memory)"
				}
				stops = append(stops, stopOp{id: id, why: why})
			}
		}
	}
	stopping, stopErrs := b.stopAll(stops)
	errs = append(errs, stopErrs...)
	// A two-role job resized under rondo.scaling = "checkpoint" stops
	// like a moving job (its tasks checkpoint) and restarts below at its
	// new counts.
	restart := map[string]string{}
	for _, a := range p.Assignments {
		c, ok := b.twoRoleResize(a)
		if !ok || !b.jobs[a.Jobs[0]].checkpointScaling() {
			continue
		}
		id := a.Jobs[0]
		if err := b.scaleZero(id, "rondo: "+c.event()+" (checkpoint, restart at the new size)"); err != nil {
			errs = append(errs, err)
			continue
		}
		stopping = append(stopping, id)
		restart[id] = c.event()
	}
	// Elastic jobs the plan keeps with fewer workers shrink now, before
	// any start needs their GPUs: the count alone drops (Nomad stops the
	// highest allocation indexes, the workers the engine dropped). A
	// two-role job's parameter servers change with its re-registration
	// below.
	shrinking := map[string]int{}
	for _, a := range p.Assignments {
		if w, ok := b.resize(a); ok && w < b.workers(a.Jobs[0], len(b.jobs[a.Jobs[0]].gpus)) {
			if err := b.scaleTo(a.Jobs[0], w, "shrink"); err != nil {
				errs = append(errs, err)
				continue
			}
			shrinking[a.Jobs[0]] = w
		}
		if c, ok := b.twoRoleResize(a); ok && restart[a.Jobs[0]] == "" && c.workers < c.workersWas {
			id := a.Jobs[0]
			st := b.jobs[id]
			w := c.workers
			if _, _, err := b.cfg.Client.Jobs().Scale(b.rawID(id), st.group, &w, "rondo: "+c.event(), false, nil, b.wopts(id)); err != nil {
				errs = append(errs, fmt.Errorf("nomad: scale %s to %d (%s): %w", id, w, c.event(), err))
				continue
			}
			b.setRoles(id, w, c.psWas)
			shrinking[id] = w
		}
	}
	// A job in the GPU pool that holds no allocation Rondo placed but still
	// has a count — pending placement, or submitted straight to the pool
	// past the gate — would take GPUs behind Rondo's back: withdraw it
	// unless this plan starts it. Withdrawals are independent scale calls
	// (after an agent died mid-enforcement there may be hundreds): issued
	// with stopAll, reported in id order.
	var withdraw []stopOp
	for _, id := range ids {
		st := b.jobs[id]
		if st.inPool && len(st.gpus) == 0 && !starting[id] && (groupCount(st.job, st.group) > 0 ||
			st.psGroup != "" && groupCount(st.job, st.psGroup) > 0) {
			event := "withdraw"
			if !st.admitted {
				event = "gate"
			}
			withdraw = append(withdraw, stopOp{id: id, event: event})
		}
		if !st.inPool && st.psGroup != "" && st.psLive > 0 && !starting[id] {
			// A two-role job waiting for admission: its parameter servers
			// need no GPU, so they run wherever the job was submitted.
			// They wait with the workers.
			zero := 0
			if _, _, err := b.cfg.Client.Jobs().Scale(b.rawID(id), st.psGroup, &zero, "rondo: gate", false, nil, b.wopts(id)); err != nil {
				errs = append(errs, fmt.Errorf("nomad: scale %s group %s to 0 (gate): %w", id, st.psGroup, err))
				continue
			}
			b.log.Info("gate", "job", id, "group", st.psGroup, "why", "parameter servers wait for the job's admission")
			b.event(id, "gate")
		}
	}
	_, werrs := b.stopAll(withdraw)
	errs = append(errs, werrs...)
	if err := b.waitAllocs("suspended jobs to stop", len(stopping)+len(shrinking), func(by allocsByJob) bool {
		for _, id := range stopping {
			if n, _, _ := liveGPUs(by[id]); n > 0 {
				return false
			}
		}
		for id, w := range shrinking {
			if n, _ := liveIn(by[id], b.jobs[id].group); n > w {
				return false
			}
		}
		return true
	}); err != nil {
		errs = append(errs, err)
	}
	// Starts are independent registrations: issue them a few at a time
	// (a thousand sequential round trips take half a minute).
	var starts []engine.Assignment
	var elastic []elasticStart
	for _, a := range p.Assignments {
		if a.Action != engine.Start {
			continue
		}
		if b.isElastic(a) {
			elastic = append(elastic, elasticStart{a: a})
		} else {
			starts = append(starts, a)
		}
	}
	// Starts of jobs with a task still exiting (afterExits) wait for it,
	// after the others have started.
	res := b.planResources(starts)
	starts, elastic, heldStarts, heldElastic := b.splitExiting(starts, elastic)
	errs = append(errs, b.startPinned(starts, res)...)
	if len(heldStarts)+len(heldElastic) > 0 {
		late, lateElastic, held := b.afterExits(heldStarts, heldElastic)
		errs = append(errs, held...)
		errs = append(errs, b.startPinned(late, res)...)
		elastic = append(elastic, lateElastic...)
	}
	// Elastic jobs are pinned to nodes only (so that they can grow by count
	// without a restart): they start, and grow, once every pinned start
	// holds its GPUs, into what is left on their nodes.
	for _, a := range p.Assignments {
		if w, ok := b.resize(a); ok && w > b.workers(a.Jobs[0], len(b.jobs[a.Jobs[0]].gpus)) {
			elastic = append(elastic, elasticStart{a: a})
		}
		// A two-role job's resize: re-registered at its new counts, in
		// place, or after the stop above (checkpoint scaling).
		if c, ok := b.twoRoleResize(a); ok {
			id := a.Jobs[0]
			if _, stopped := restart[id]; stopped || !b.jobs[id].checkpointScaling() {
				elastic = append(elastic, elasticStart{a: a, event: c.event(), fresh: stopped})
			}
		}
	}
	errs = append(errs, b.startElastic(elastic)...)
	return errors.Join(errs...)
}

// exiting reports whether an allocation is stopped but its task has not
// exited yet: Nomad marks a scaled-down allocation desired-stop at once,
// while the task checkpoints on SIGTERM for up to its kill_timeout.
func exiting(a *api.AllocationListStub) bool {
	return a.DesiredStatus != "run" && (a.ClientStatus == "pending" || a.ClientStatus == "running")
}

// exitingNow lists the jobs with a task still exiting.
func exitingNow(by allocsByJob) map[string]bool {
	jobs := map[string]bool{}
	for id, allocs := range by {
		for _, a := range allocs {
			if exiting(a) {
				jobs[id] = true
			}
		}
	}
	return jobs
}

// overlaps reports whether a start of ids would overlap an exiting task of
// the same job.
func overlaps(exitingJobs map[string]bool, ids []string) bool {
	for _, id := range ids {
		if exitingJobs[id] {
			return true
		}
	}
	return false
}

// splitExiting separates, from one listing, the starts of jobs with a task
// still exiting (afterExits) from the others.
func (b *Backend) splitExiting(starts []engine.Assignment, elastic []elasticStart) (ready []engine.Assignment, readyE []elasticStart,
	held []engine.Assignment, heldE []elasticStart) {
	if len(starts)+len(elastic) == 0 {
		return starts, elastic, nil, nil
	}
	by, err := b.ackAllocs()
	if err != nil {
		// Unlisted: every start waits in afterExits, which lists again.
		return nil, nil, starts, elastic
	}
	jobs := exitingNow(by)
	for _, a := range starts {
		if overlaps(jobs, a.Jobs) {
			held = append(held, a)
		} else {
			ready = append(ready, a)
		}
	}
	for _, e := range elastic {
		if overlaps(jobs, e.a.Jobs) {
			heldE = append(heldE, e)
		} else {
			readyE = append(readyE, e)
		}
	}
	return ready, readyE, held, heldE
}

// afterExits waits until no held start's job has a task still exiting:
// its new task would read the checkpoint the old one is about to write, so
// the job would run twice and lose that work. Nomad marks a stopped
// allocation desired-stop at once, while its task checkpoints on SIGTERM
// for up to its kill_timeout; such tasks are left by this round's stops (a
// job moved to other GPUs) or by an agent that died mid-enforcement. (A
// GPU itself is not handed over early: Nomad places nothing on a device
// until the allocation holding it has stopped on its client.) A start
// still held at the ack timeout is dropped with an error and planned again
// next round.
func (b *Backend) afterExits(starts []engine.Assignment, elastic []elasticStart) ([]engine.Assignment, []elasticStart, []error) {
	var jobs map[string]bool // with a task exiting, at the last listing
	anyHeld := func() bool {
		for _, a := range starts {
			if overlaps(jobs, a.Jobs) {
				return true
			}
		}
		for _, e := range elastic {
			if overlaps(jobs, e.a.Jobs) {
				return true
			}
		}
		return false
	}
	err := b.waitUntil("stopped tasks to exit", func() (bool, error) {
		by, err := b.ackAllocs()
		if err != nil {
			return false, err
		}
		jobs = exitingNow(by)
		return !anyHeld(), nil
	})
	if err == nil {
		return starts, elastic, nil
	}
	var errs []error
	var okStarts []engine.Assignment
	for _, a := range starts {
		if jobs == nil || overlaps(jobs, a.Jobs) {
			errs = append(errs, fmt.Errorf("nomad: start %s held: a stopped task of the job has not exited: %w", strings.Join(a.Jobs, "+"), err))
			continue
		}
		okStarts = append(okStarts, a)
	}
	var okElastic []elasticStart
	for _, e := range elastic {
		if jobs == nil || overlaps(jobs, e.a.Jobs) {
			errs = append(errs, fmt.Errorf("nomad: start %s held: a stopped task of the job has not exited: %w", strings.Join(e.a.Jobs, "+"), err))
			continue
		}
		okElastic = append(okElastic, e)
	}
	return okStarts, okElastic, errs
}

// startPinned registers the starts (a few at a time), each job with its
// CPU and memory from res (planResources; none: its own), and waits until
// each runs on exactly its GPUs.
func (b *Backend) startPinned(starts []engine.Assignment, res map[string]*TaskResources) []error {
	var errs []error
	okStart := make([]bool, len(starts))
	var emu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, startParallelism)
	for i, a := range starts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ok := true
			for _, id := range a.Jobs {
				if err := b.start(id, a, res[id]); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
					ok = false
				}
			}
			okStart[i] = ok
		}()
	}
	wg.Wait()
	var started []engine.Assignment
	for i, a := range starts {
		if okStart[i] {
			started = append(started, a)
		}
	}
	left := map[string]bool{} // jobs stopped or purged since their start
	if err := b.waitAllocs("started jobs to run on their GPUs", len(started), func(by allocsByJob) bool {
		for _, a := range started {
			want := append([]string(nil), a.GPUs...)
			sort.Strings(want)
			for _, id := range a.Jobs {
				n, running, got := liveGPUs(by[id])
				if n == 0 && (left[id] || b.left(id)) {
					// Its user stopped it while it was starting: nothing
					// will run, the next observation sees it gone.
					left[id] = true
					continue
				}
				if n == 0 || running < n || strings.Join(got, ",") != strings.Join(want, ",") {
					return false
				}
			}
		}
		return true
	}); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// left reports whether job id was purged or stopped (by its user): a
// start the round waits for will then never run.
func (b *Backend) left(id string) bool {
	job, _, err := b.cfg.Client.Jobs().Info(b.rawID(id), b.qopts(id))
	if err != nil {
		var ue api.UnexpectedResponseError
		return errors.As(err, &ue) && ue.StatusCode() == 404
	}
	return job != nil && job.Stop != nil && *job.Stop
}

// allocsByJob is allAllocs's answer: every allocation, by job id.
type allocsByJob = map[string][]*api.AllocationListStub

// waitAllocs waits (waitUntil) until done holds for a fresh listing of
// every allocation; with nothing to wait for (pending 0) it returns at once.
func (b *Backend) waitAllocs(what string, pending int, done func(allocsByJob) bool) error {
	return b.waitUntil(what, func() (bool, error) {
		if pending == 0 {
			return true, nil
		}
		by, err := b.ackAllocs()
		if err != nil {
			return false, err
		}
		return done(by), nil
	})
}

// waitUntil polls f until it holds, the backend is stopped, or AckTimeout
// passes. A timeout wraps the last error f returned during the wait, even
// if later polls succeeded: a Nomad outage that made the wait time out
// stays visible to state.Transient, so the next round recomputes.
func (b *Backend) waitUntil(what string, f func() (bool, error)) error {
	deadline := time.Now().Add(b.cfg.AckTimeout)
	var seen error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		if err != nil {
			seen = err
		}
		select {
		case <-b.cfg.Done:
			return fmt.Errorf("nomad: interrupted while waiting for %s", what)
		default:
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("nomad: waiting for %s: %w", what, err)
			}
			if seen != nil {
				return fmt.Errorf("nomad: timed out after %v waiting for %s (Nomad failed during the wait: %w)", b.cfg.AckTimeout, what, seen)
			}
			return fmt.Errorf("nomad: timed out after %v waiting for %s", b.cfg.AckTimeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startParallelism bounds the concurrent registrations of one Enforce.
const startParallelism = 8

// stopOp is one scale-to-zero of Enforce's stop phase: a suspension
// (event set: logged and reported as that event) or a vacate before a
// start (why set).
type stopOp struct{ id, event, why string }

// stopAll scales the jobs of ops to zero, startParallelism at a time (a
// full rotation stops every running job: a thousand sequential round trips
// would take most of a round), then reports them in ops' order: the jobs
// that stopped and the errors.
func (b *Backend) stopAll(ops []stopOp) (stopped []string, errs []error) {
	res := make([]error, len(ops))
	var wg sync.WaitGroup
	sem := make(chan struct{}, startParallelism)
	for i, op := range ops {
		if b.jobs[op.id] == nil {
			res[i] = fmt.Errorf("nomad: suspend %s: unknown job", op.id)
			continue
		}
		why := op.why
		if op.event != "" {
			why = "rondo: " + op.event
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res[i] = b.scaleZero(op.id, why)
		}()
	}
	wg.Wait()
	for i, op := range ops {
		if res[i] != nil {
			errs = append(errs, res[i])
			continue
		}
		if op.event != "" {
			st := b.jobs[op.id]
			b.log.Info(op.event, "job", op.id, "gpus", strings.Join(st.gpus, ","), "nodes", b.nodeNames(st.servers))
			b.event(op.id, op.event)
		}
		stopped = append(stopped, op.id)
	}
	return stopped, errs
}

// liveGPUs returns, of a job's allocations, the live ones (pending or
// running, desired to run), how many of them run, and the sorted GPU ids
// they hold.
func liveGPUs(allocs []*api.AllocationListStub) (liveN, running int, gpus []string) {
	for _, a := range allocs {
		if !live(a) {
			continue
		}
		liveN++
		if a.ClientStatus == "running" {
			running++
		}
		if a.AllocatedResources != nil {
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					for _, id := range d.DeviceIDs {
						gpus = append(gpus, gpuOf(id)) // a share counts as its GPU
					}
				}
			}
		}
	}
	sort.Strings(gpus)
	return liveN, running, gpus
}

func groupCount(job *api.Job, group string) int {
	if job == nil {
		return 0
	}
	for _, tg := range job.TaskGroups {
		if deref(tg.Name) == group {
			return deref(tg.Count)
		}
	}
	return 0
}

func (b *Backend) event(id, event string) {
	if b.cfg.OnEvent != nil {
		b.cfg.OnEvent(id, event)
	}
}

// intentsOf indexes a plan's intents by job.
func intentsOf(p *engine.Plan) map[string]engine.Intent {
	m := make(map[string]engine.Intent, len(p.Intents))
	for _, in := range p.Intents {
		m[in.Job] = in.Intent
	}
	return m
}

// eventOf names what the plan does to a job (admit, resume, migrate,
// suspend, preempt): the round's intent. A plan built without intents
// (by hand, in tests) gets def.
func (b *Backend) eventOf(id string, def engine.Intent) string { return intentOr(b.intents, id, def) }

func intentOr(m map[string]engine.Intent, id string, def engine.Intent) string {
	if in, ok := m[id]; ok {
		return string(in)
	}
	return string(def)
}

// scaleZero scales the job's GPU group to 0, and a two-role job's
// parameter servers too.
func (b *Backend) scaleZero(id, why string) error {
	zero := 0
	st := b.jobs[id]
	if _, _, err := b.cfg.Client.Jobs().Scale(b.rawID(id), st.group, &zero, why, false, nil, b.wopts(id)); err != nil {
		return fmt.Errorf("nomad: scale %s to 0 (%s): %w", id, why, err)
	}
	crashpoint.Hit(crashpoint.Enforce)
	if st.psGroup != "" {
		if _, _, err := b.cfg.Client.Jobs().Scale(b.rawID(id), st.psGroup, &zero, why, false, nil, b.wopts(id)); err != nil {
			return fmt.Errorf("nomad: scale %s group %s to 0 (%s): %w", id, st.psGroup, why, err)
		}
		b.setRoles(id, 0, 0)
	}
	return nil
}

func (b *Backend) nodeNames(ids []string) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = b.nodes[id]
		if names[i] == "" {
			names[i] = id
		}
	}
	return strings.Join(names, ",")
}

// start (re-)registers the job in the GPU pool pinned to the assignment's
// nodes and GPUs, its GPU tasks with res (nil: their own resources), with
// the job's modify index enforced.
func (b *Backend) start(id string, a engine.Assignment, res *TaskResources) error {
	st := b.jobs[id]
	if st == nil {
		return fmt.Errorf("nomad: start %s: unknown job", id)
	}
	c := b.cfg.Client
	job, _, err := c.Jobs().Info(b.rawID(id), b.qopts(id))
	if err != nil {
		return fmt.Errorf("nomad: start %s: %w", id, err)
	}
	if err := b.rewrite(job, st, a, res); err != nil {
		return fmt.Errorf("nomad: start %s: %w", id, err)
	}
	_, _, err = c.Jobs().RegisterOpts(job, &api.RegisterOptions{EnforceIndex: true, ModifyIndex: deref(job.JobModifyIndex)}, b.wopts(id))
	if err != nil {
		return fmt.Errorf("nomad: start %s: %w", id, err)
	}
	crashpoint.Hit(crashpoint.Enforce)
	if st.psGroup != "" {
		b.setRoles(id, groupCount(job, st.group), groupCount(job, st.psGroup))
	}
	event := b.eventOf(id, engine.IntentAdmit)
	if res != nil || job.Meta[MetaOwnResources] != "" {
		b.log.Info(event, "job", id, "type", a.Type, "gpus", strings.Join(a.GPUs, ","), "nodes", b.nodeNames(a.Servers),
			"resources", res.describe())
	} else {
		b.log.Info(event, "job", id, "type", a.Type, "gpus", strings.Join(a.GPUs, ","), "nodes", b.nodeNames(a.Servers))
	}
	b.event(id, event)
	return nil
}

// rewrite turns the job's spec into the start of assignment a: pins (Pin,
// or PinShared with the partner's env), the task env, res as the GPU
// tasks' resources (SetResources), the GPU pool, the class's priority, and
// the scale factor recorded at the first start.
func (b *Backend) rewrite(job *api.Job, st *jobState, a engine.Assignment, res *TaskResources) error {
	var err error
	if k := slices.Index(a.Jobs, deref(job.ID)); len(a.Jobs) == 2 && k >= 0 {
		err = PinShared(job, st.group, a, k, b.shares)
		partner := a.Jobs[1-k]
		model := ""
		if ps := b.jobs[partner]; ps != nil {
			model = ps.policy.Model
		}
		setPartner(job, st.group, partner, model)
	} else {
		err = Pin(job, st.group, a, b.serverOf)
		setPartner(job, st.group, "", "")
	}
	if err != nil {
		return err
	}
	AddTaskEnv(job, st.group, b.checkpointRoot(job), b.cfg.LeaseAddr)
	if st.psGroup != "" {
		// A two-role job run at its minimum (NoElastic: cells decide):
		// its parameter servers at theirs, anywhere in the pool.
		if err := PinPS(job, st.psGroup, st.policy.PSMin, nil); err != nil {
			return err
		}
		AddTaskEnv(job, st.psGroup, b.checkpointRoot(job), b.cfg.LeaseAddr)
	}
	if err := SetResources(job, st.group, res); err != nil {
		return err
	}
	pool := b.poolOf(a.Servers)
	job.NodePool = &pool
	prio := GuaranteedPriority
	if st.policy.Class == hcl.Opportunistic {
		prio = OpportunisticPriority
	}
	job.Priority = &prio
	LowerScalingMin(job, st.group, st.policy)
	if job.Meta[MetaGPUs] == "" {
		// Safe: the job is not running (admission) or is being moved.
		if job.Meta == nil {
			job.Meta = map[string]string{}
		}
		job.Meta[MetaGPUs] = fmt.Sprint(st.sf)
	}
	return nil
}

func (b *Backend) serverOf(gpu string) string {
	for _, g := range b.gpus {
		if g.ID == gpu {
			return g.Server
		}
	}
	return ""
}

// Pin rewrites the GPU group of job to run exactly on the assignment: node
// pins on ${node.unique.id}, GPU pins with ${device.ids} set_contains_any.
// One allocation per server when every server holds the same number of the
// GPUs, else one allocation per GPU. Earlier pins are replaced, and a job
// that ran on shares requests exclusive GPUs again.
func Pin(job *api.Job, group string, a engine.Assignment, serverOf func(string) string) error {
	tg := groupOf(job, group)
	if tg == nil {
		return fmt.Errorf("no group %q", group)
	}
	if len(a.GPUs) == 0 || len(a.Servers) == 0 {
		return errors.New("assignment without GPUs")
	}
	count, _ := layout(a, false, serverOf)
	devices := len(a.GPUs) / count
	tg.Count = &count
	pinNodes(tg, a.Servers)
	pinDevices(tg, "", devices, a.GPUs)
	return nil
}

// pinNodes replaces the group's node pin with the servers.
func pinNodes(tg *api.TaskGroup, servers []string) {
	var cs []*api.Constraint
	for _, c := range tg.Constraints {
		if c.LTarget != nodeTarget {
			cs = append(cs, c)
		}
	}
	if len(servers) == 1 {
		cs = append(cs, api.NewConstraint(nodeTarget, "=", servers[0]))
	} else {
		cs = append(cs, api.NewConstraint(nodeTarget, "set_contains_any", strings.Join(servers, ",")))
	}
	tg.Constraints = cs
}

// pinDevices sets every GPU request of the group to count devices pinned
// to ids: named name (shares), or nvidia/gpu when "" and the request was
// for shares (a user's own exclusive request name is kept).
func pinDevices(tg *api.TaskGroup, name string, count int, ids []string) {
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if !isGPURequest(d.Name) {
				continue
			}
			switch {
			case name != "":
				d.Name = name
			case isShareRequest(d.Name):
				d.Name = "nvidia/gpu"
			}
			n := uint64(count)
			d.Count = &n
			var dc []*api.Constraint
			for _, c := range d.Constraints {
				if c.LTarget != deviceTarget {
					dc = append(dc, c)
				}
			}
			d.Constraints = append(dc, api.NewConstraint(deviceTarget, "set_contains_any", strings.Join(ids, ",")))
		}
	}
}

// isElastic reports whether an assignment is one elastic job's.
func (b *Backend) isElastic(a engine.Assignment) bool {
	if len(a.Jobs) != 1 {
		return false
	}
	st := b.jobs[a.Jobs[0]]
	return st != nil && st.elastic != nil
}

// workers is an elastic job's worker count on n GPUs.
func (b *Backend) workers(id string, n int) int {
	return n / max(b.jobs[id].elastic.StepGPUs, 1)
}

// resize reports the worker count of a kept elastic job whose size the plan
// changes (ok false for anything else).
func (b *Backend) resize(a engine.Assignment) (int, bool) {
	if a.Action != engine.Keep || !b.isElastic(a) {
		return 0, false
	}
	st := b.jobs[a.Jobs[0]]
	if st.elastic.TwoRole() || len(a.GPUs) == len(st.gpus) {
		return 0, false
	}
	return b.workers(a.Jobs[0], len(a.GPUs)), true
}

// scaleTo sets an elastic job's worker count (shrink); running workers below
// the new count are untouched.
func (b *Backend) scaleTo(id string, workers int, event string) error {
	st := b.jobs[id]
	if _, _, err := b.cfg.Client.Jobs().Scale(b.rawID(id), st.group, &workers, "rondo: "+event, false, nil, b.wopts(id)); err != nil {
		return fmt.Errorf("nomad: scale %s to %d (%s): %w", id, workers, event, err)
	}
	crashpoint.Hit(crashpoint.Enforce)
	b.log.Info(event, "job", id, "workers", workers, "was", b.workers(id, len(st.gpus)))
	b.event(id, event)
	return nil
}

// elasticStart is one elastic job to (re-)register: a start, a grow, or a
// two-role job's resize (event its name; fresh: the job was stopped for
// it, checkpoint scaling).
type elasticStart struct {
	a     engine.Assignment
	event string
	fresh bool
}

// startElastic starts elastic jobs and grows kept ones: each is
// re-registered with its worker count and node pins (PinElastic; a count
// and node-constraint change keeps running allocations in place), a
// two-role job with its parameter servers' count and nodes too (PinPS),
// then it waits until every one runs its workers on as many GPUs as
// planned, and its parameter servers.
func (b *Backend) startElastic(as []elasticStart) []error {
	var errs []error
	type started struct {
		a       engine.Assignment
		workers int
		ps      int // -1: no parameter servers
	}
	var done []started
	for _, e := range as {
		a := e.a
		id := a.Jobs[0]
		st := b.jobs[id]
		job, _, err := b.cfg.Client.Jobs().Info(b.rawID(id), b.qopts(id))
		if err == nil {
			err = PinElastic(job, st.group, a, st.elastic.StepGPUs)
		}
		ps, psWas := -1, 0
		var servers []string
		if err == nil && st.psGroup != "" {
			var keep bool
			psWas = groupCount(st.job, st.psGroup)
			if a.Action == engine.Start {
				psWas = st.psLive // the count of a job not running is not in force
			}
			ps, servers, keep = b.psTarget(st, a)
			if keep {
				servers = strings.Split(nodePin(groupOf(job, st.psGroup)), ",")
				if servers[0] == "" {
					servers = nil
				}
			}
			err = PinPS(job, st.psGroup, ps, servers)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("nomad: start %s: %w", id, err))
			continue
		}
		event := e.event
		if event == "" {
			event = "grow"
		}
		if a.Action == engine.Start || e.fresh {
			if a.Action == engine.Start {
				event = b.eventOf(id, engine.IntentAdmit)
			}
			// Not running: env and identity may change (AddTaskEnv).
			AddTaskEnv(job, st.group, b.checkpointRoot(job), b.cfg.LeaseAddr)
			if st.psGroup != "" {
				AddTaskEnv(job, st.psGroup, b.checkpointRoot(job), b.cfg.LeaseAddr)
			}
			pool := b.poolOf(a.Servers)
			job.NodePool = &pool
			prio := GuaranteedPriority
			if st.policy.Class == hcl.Opportunistic {
				prio = OpportunisticPriority
			}
			job.Priority = &prio
			LowerScalingMin(job, st.group, st.policy)
		}
		if _, _, err := b.cfg.Client.Jobs().RegisterOpts(job, &api.RegisterOptions{EnforceIndex: true,
			ModifyIndex: deref(job.JobModifyIndex)}, b.wopts(id)); err != nil {
			errs = append(errs, fmt.Errorf("nomad: %s %s: %w", event, id, err))
			continue
		}
		crashpoint.Hit(crashpoint.Enforce)
		workers := b.workers(id, len(a.GPUs))
		kv := []any{"job", id, "type", a.Type, "workers", workers, "was", b.workers(id, len(st.gpus)), "nodes", b.nodeNames(a.Servers)}
		if ps >= 0 {
			kv = append(kv, "ps", ps, "ps_was", psWas, "ps_nodes", b.nodeNames(distinct(servers)))
			if e.fresh {
				kv = append(kv, "scaling", hcl.ScalingCheckpoint)
			}
			b.setRoles(id, workers, ps)
		}
		b.log.Info(event, kv...)
		b.event(id, event)
		done = append(done, started{a: a, workers: workers, ps: ps})
	}
	if err := b.waitAllocs("elastic jobs to run their workers", len(done), func(by allocsByJob) bool {
		for _, d := range done {
			id := d.a.Jobs[0]
			st := b.jobs[id]
			n, running := liveIn(by[id], st.group)
			_, _, got := liveGPUs(by[id])
			if n != d.workers || running < n || len(got) != len(d.a.GPUs) {
				return false
			}
			if d.ps >= 0 {
				if n, running := liveIn(by[id], st.psGroup); n != d.ps || running < n {
					return false
				}
			}
		}
		return true
	}); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// liveIn counts a job's live allocations of one group and how many of
// them run.
func liveIn(allocs []*api.AllocationListStub, group string) (liveN, running int) {
	for _, a := range allocs {
		if a.TaskGroup != group || !live(a) {
			continue
		}
		liveN++
		if a.ClientStatus == "running" {
			running++
		}
	}
	return liveN, running
}

// PinElastic rewrites an elastic job's GPU group for an assignment: count =
// workers (GPUs / step), a node pin on the assignment's servers, and no GPU
// id pin (device constraints are part of the task's resources, and
// changing them replaces every allocation; a count or group-constraint
// change does not). The device count (one worker's GPUs) is left alone.
// Nomad picks the GPUs on the pinned nodes, which is why the backend starts
// elastic jobs after every pinned start holds its GPUs.
func PinElastic(job *api.Job, group string, a engine.Assignment, step int) error {
	var tg *api.TaskGroup
	for _, g := range job.TaskGroups {
		if deref(g.Name) == group {
			tg = g
		}
	}
	if tg == nil {
		return fmt.Errorf("no group %q", group)
	}
	if len(a.GPUs) == 0 || len(a.Servers) == 0 || step <= 0 || len(a.GPUs)%step != 0 {
		return fmt.Errorf("assignment of %d GPUs is not whole workers of %d", len(a.GPUs), step)
	}
	count := len(a.GPUs) / step
	tg.Count = &count
	var cs []*api.Constraint
	for _, c := range tg.Constraints {
		if c.LTarget != nodeTarget {
			cs = append(cs, c)
		}
	}
	servers := append([]string(nil), a.Servers...)
	sort.Strings(servers)
	if len(servers) == 1 {
		cs = append(cs, api.NewConstraint(nodeTarget, "=", servers[0]))
	} else {
		cs = append(cs, api.NewConstraint(nodeTarget, "set_contains_any", strings.Join(servers, ",")))
	}
	tg.Constraints = cs
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if !isGPURequest(d.Name) {
				continue
			}
			var dc []*api.Constraint
			for _, c := range d.Constraints {
				if c.LTarget != deviceTarget {
					dc = append(dc, c)
				}
			}
			d.Constraints = dc
		}
	}
	return nil
}

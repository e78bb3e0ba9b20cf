package nomad

// Two-role elastic jobs (DL2, docs/elastic.md "Two roles (DL2)"): a worker
// group (the group with GPU devices, elastic in count like any elastic
// job) and a parameter-server group (meta rondo.ps_group, CPU tasks) whose
// count the round also decides (engine.Assignment.PS, PSServers).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/hcl"
)

// roleInfo is what the lease API tells a two-role job's tasks: the groups
// and the counts in force (what Rondo last set in Nomad, read back from
// the job at each Observe), and the total batch.
type roleInfo struct {
	workerGroup, psGroup string
	workers, ps, batch   int
}

// allocSlot is an allocation's job, group and index (its name's
// "[i]"), which never change.
type allocSlot struct {
	job, group string
	index      int
}

// maxSlots bounds the cache of allocation slots.
const maxSlots = 10000

// psGroupOf checks a two-role job's groups and returns its parameter-server
// group: the group pol.PSGroup names, which must exist, be another group
// than the workers' and request no GPU.
func psGroupOf(job *api.Job, worker *api.TaskGroup, pol hcl.JobPolicy) (*api.TaskGroup, error) {
	ps := groupOf(job, pol.PSGroup)
	switch {
	case ps == nil:
		return nil, fmt.Errorf("%s = %q: the job has no such task group", hcl.MetaPSGroup, pol.PSGroup)
	case ps == worker:
		return nil, fmt.Errorf("%s = %q is the worker group (the one requesting GPUs)", hcl.MetaPSGroup, pol.PSGroup)
	}
	for _, t := range ps.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if isGPURequest(d.Name) {
				return nil, fmt.Errorf("%s = %q requests GPUs: parameter servers are CPU tasks", hcl.MetaPSGroup, pol.PSGroup)
			}
		}
	}
	return ps, nil
}

// groupCores is one instance of a group's CPU in cores: each task's
// reserved cores, else its cpu MHz / coreMHz (1 core when coreMHz is
// unknown), summed; 1 when no task says.
func groupCores(tg *api.TaskGroup, coreMHz float64) float64 {
	total := 0.0
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		switch {
		case deref(t.Resources.Cores) > 0:
			total += float64(deref(t.Resources.Cores))
		case deref(t.Resources.CPU) > 0 && coreMHz > 0:
			total += float64(deref(t.Resources.CPU)) / coreMHz
		case deref(t.Resources.CPU) > 0:
			total++
		}
	}
	if !(total > 0) {
		return 1
	}
	return total
}

// coreMHz is one core's compute on the observed GPU nodes (the slowest
// one's), 0 when none is known.
func (b *Backend) coreMHz() float64 {
	v := 0.0
	for _, c := range b.caps {
		if c.CoreMHz > 0 && (v == 0 || c.CoreMHz < v) {
			v = c.CoreMHz
		}
	}
	return v
}

// twoRole fills an elastic range's parameter servers, the workers' cores
// and the batch from a two-role job's groups (psGroupOf's error for a
// malformed job).
func (b *Backend) twoRole(job *api.Job, worker *api.TaskGroup, pol hcl.JobPolicy, el *engine.Elastic) (*api.TaskGroup, error) {
	ps, err := psGroupOf(job, worker, pol)
	if err != nil {
		return nil, err
	}
	if el != nil {
		mhz := b.coreMHz()
		el.PS = &engine.PSGroup{Min: pol.PSMin, Max: pol.PSMax, Cores: groupCores(ps, mhz)}
		el.WorkerCores = groupCores(worker, mhz)
		el.Batch = pol.BatchSize
	}
	return ps, nil
}

// twoRoleProgress is a two-role job's total and done in epochs when it
// declares rondo.epochs: the epochs it reported (Config.Epochs), else its
// steps × epochs / rondo.steps when it declares both; ok false without
// rondo.epochs (its steps are its progress, as for any job).
func (b *Backend) twoRoleProgress(job *api.Job, pol hcl.JobPolicy) (total, done float64, ok bool) {
	if !(pol.Epochs > 0) {
		return 0, 0, false
	}
	if e, ok := b.cfg.Epochs(job); ok {
		return pol.Epochs, e, true
	}
	if pol.Steps > 0 {
		if s, ok := b.cfg.Progress(job); ok {
			return pol.Epochs, min(s/float64(pol.Steps), 1) * pol.Epochs, true
		}
	}
	return pol.Epochs, 0, true
}

// nodePin is a group's node pin: its servers sorted and joined, "" none.
func nodePin(tg *api.TaskGroup) string {
	if tg == nil {
		return ""
	}
	for _, c := range tg.Constraints {
		if c.LTarget == nodeTarget {
			return sortedJoin(strings.Split(c.RTarget, ","))
		}
	}
	return ""
}

// distinct returns the distinct values of s, sorted.
func distinct(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

// PinPS rewrites a two-role job's parameter-server group: count = n and a
// node pin on the distinct servers (none when servers is empty). Count and
// group constraints change in place: running parameter servers on nodes
// still allowed keep running. Nothing else of the group changes.
func PinPS(job *api.Job, group string, n int, servers []string) error {
	tg := groupOf(job, group)
	if tg == nil {
		return fmt.Errorf("no group %q", group)
	}
	if n < 0 {
		return fmt.Errorf("%d parameter servers", n)
	}
	tg.Count = &n
	var cs []*api.Constraint
	for _, c := range tg.Constraints {
		if c.LTarget != nodeTarget {
			cs = append(cs, c)
		}
	}
	switch ds := distinct(servers); len(ds) {
	case 0:
	case 1:
		cs = append(cs, api.NewConstraint(nodeTarget, "=", ds[0]))
	default:
		cs = append(cs, api.NewConstraint(nodeTarget, "set_contains_any", strings.Join(ds, ",")))
	}
	tg.Constraints = cs
	return nil
}

// psTarget is what a two-role job's parameter servers become under
// assignment a: a sizer's count and servers when it gave some (a.PS > 0);
// else (the engine decided, it leaves parameter servers alone) the count
// in force, at least the minimum, and the pin in force for a kept job,
// the minimum and no pin for a start. keep is true when the pin stays.
func (b *Backend) psTarget(st *jobState, a engine.Assignment) (n int, servers []string, keep bool) {
	if a.PS > 0 {
		return a.PS, a.PSServers, false
	}
	min := 0
	if st.elastic.TwoRole() {
		min = st.elastic.PS.Min
	} else {
		min = st.policy.PSMin
	}
	if a.Action == engine.Keep {
		return max(groupCount(st.job, st.psGroup), min), nil, true
	}
	return min, nil, false
}

// twoRoleChange is a kept two-role job's resize under a plan.
type twoRoleChange struct {
	workers, workersWas int
	ps, psWas           int
	pin, pinWas         string // the PS group's node pin (sorted, joined)
	servers             []string
	keepPin             bool
}

// event names a resize: grow or shrink by the workers, else by the
// parameter servers, else (only the parameter servers' nodes change)
// resize.
func (c twoRoleChange) event() string {
	switch {
	case c.workers > c.workersWas:
		return "grow"
	case c.workers < c.workersWas:
		return "shrink"
	case c.ps > c.psWas:
		return "grow"
	case c.ps < c.psWas:
		return "shrink"
	}
	return "resize"
}

// twoRoleResize reports how a plan changes a kept two-role job (ok false
// when the assignment is not one, or changes nothing): its workers (from
// the GPUs it holds), its parameter servers' count in force or their
// nodes.
func (b *Backend) twoRoleResize(a engine.Assignment) (twoRoleChange, bool) {
	if a.Action != engine.Keep || len(a.Jobs) != 1 {
		return twoRoleChange{}, false
	}
	st := b.jobs[a.Jobs[0]]
	if st == nil || !st.elastic.TwoRole() {
		return twoRoleChange{}, false
	}
	step := max(st.elastic.StepGPUs, 1)
	c := twoRoleChange{workers: len(a.GPUs) / step, workersWas: len(st.gpus) / step,
		psWas: groupCount(st.job, st.psGroup), pinWas: nodePin(groupOf(st.job, st.psGroup))}
	c.ps, c.servers, c.keepPin = b.psTarget(st, a)
	c.pin = c.pinWas
	if !c.keepPin {
		c.pin = strings.Join(distinct(c.servers), ",")
	}
	if c.workers == c.workersWas && c.ps == c.psWas && c.pin == c.pinWas {
		return c, false
	}
	return c, true
}

// checkpointScaling: the job is resized by a suspension and a restart at
// the new counts (rondo.scaling = "checkpoint"), not in place.
func (st *jobState) checkpointScaling() bool {
	return st.policy.ScalingMode() == hcl.ScalingCheckpoint
}

// setRoles records the counts in force of a two-role job after Rondo set
// them in Nomad (what its tasks' leases answer).
func (b *Backend) setRoles(id string, workers, ps int) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if r, ok := b.roles[id]; ok {
		r.workers, r.ps = workers, ps
		b.roles[id] = r
	}
}

// observeRoles replaces the two-role jobs' roles with what Observe read
// from their specs (the counts in force).
func (b *Backend) observeRoles(m map[string]roleInfo) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	b.roles = m
}

// Roles answers the lease API for a task of a two-role elastic job
// (agent.RoleTeller): its role by its allocation's group, the counts in
// force and, for a worker, its share of the batch by its allocation index
// (lease.BatchShare). nil, nil for any other job or group. The allocation's
// group and index are asked of Nomad once (an allocation never changes
// them) and cached. It does not wait for a round's enforcement.
func (b *Backend) Roles(ctx context.Context, namespace, job, alloc string) (*lease.Roles, error) {
	key := namespace + "\x00" + alloc
	b.rmu.Lock()
	ri, ok := b.roles[job]
	slot, cached := b.slots[key]
	b.rmu.Unlock()
	if !ok || alloc == "" {
		return nil, nil
	}
	if !cached {
		q := (&api.QueryOptions{Namespace: namespace}).WithContext(ctx)
		a, _, err := b.cfg.Client.Allocations().Info(alloc, q)
		if err != nil {
			return nil, fmt.Errorf("nomad: allocation %s: %w", alloc, err)
		}
		slot = allocSlot{job: b.Key(a.Namespace, a.JobID), group: a.TaskGroup, index: allocIndex(a.Name)}
		if a.Namespace != namespace {
			slot.job = ""
		}
		b.rmu.Lock()
		if len(b.slots) >= maxSlots {
			clear(b.slots)
		}
		b.slots[key] = slot
		b.rmu.Unlock()
	}
	if slot.job != job {
		return nil, nil
	}
	r := &lease.Roles{Workers: ri.workers, PS: ri.ps, TotalBatch: ri.batch}
	switch slot.group {
	case ri.workerGroup:
		r.Role = lease.RoleWorker
		r.Batch = lease.BatchShare(ri.batch, ri.workers, slot.index)
	case ri.psGroup:
		r.Role = lease.RolePS
	default:
		return nil, nil
	}
	return r, nil
}

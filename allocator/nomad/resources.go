package nomad

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// CPU and memory (Synergy, issue #14): the placement stage
// (allocator/placement) gives each job of a plan cores and memory on the
// nodes its GPUs are on; the backend observes what each node offers and
// enforces the grants as the GPU tasks' resources.
//
// A node's cores are its CPU compute as Nomad accounts it (total minus the
// client's reserved cpu) divided by its per-core MHz (the fingerprinted
// cpu.frequency), so a client configured with cpu_total_compute counts as
// that many cores. A GPU task gets resources.cores (whole reserved cores)
// only where Nomad's core ids are the machine's real cores and the task's
// share is a whole number of them that the node still has free; otherwise
// resources.cpu = share × per-core MHz (cpuFor).

// Env the backend gives a GPU task that runs under a placement grant: its
// share of the job's cores (a decimal, "4", "2.5") and its memory in MB.
const (
	EnvCores = "RONDO_CORES"
	EnvMemMB = "RONDO_MEM_MB"
)

// Meta recording a grant on the job, written only when Rondo (re)starts it
// (a start replaces its allocations anyway; NOMAD-NOTES: meta changes do):
// MetaCores and MetaMemGB are the grant in force (the stage's, whole job,
// exact), read back into Snapshot.Running's Resources; MetaOwnResources
// the GPU tasks' own resources before Rondo first rewrote them (restored
// when a start carries no grant).
const (
	MetaCores        = "rondo.cores"
	MetaMemGB        = "rondo.mem_gb"
	MetaOwnResources = "rondo.own_resources"
)

// minMemoryMB is the smallest memory Nomad accepts for a task.
const minMemoryMB = 10

// nodeCap is one GPU node's CPU and memory as Nomad accounts them.
type nodeCap struct {
	// CoreMHz is one core's compute (cpu.frequency).
	CoreMHz float64
	// CPUMHz and MemMB are what the node offers tasks: its compute and
	// memory minus the client's reservations.
	CPUMHz, MemMB int64
	// Reservable is how many core ids tasks may reserve (resources.cores).
	Reservable int
	// RealCores: Nomad's cores are the compute it advertises (no
	// cpu_total_compute modelling a larger machine), so reserving whole
	// cores means what it says.
	RealCores bool
}

// Cores is the node's compute in cores (what engine.Node.Cores holds).
func (c nodeCap) Cores() float64 { return float64(c.CPUMHz) / c.CoreMHz }

// MemGB is the node's memory in GB (MB / 1024).
func (c nodeCap) MemGB() float64 { return float64(c.MemMB) / 1024 }

// nodeCapOf reads a node's capacity; ok is false when Nomad reports no
// compute, memory or core speed (the placement stage then skips it).
func nodeCapOf(n *api.Node) (nodeCap, bool) {
	if n == nil || n.NodeResources == nil {
		return nodeCap{}, false
	}
	cpu := n.NodeResources.Cpu
	var c nodeCap
	for _, k := range []string{"cpu.frequency", "cpu.frequency.performance"} {
		if v, err := strconv.ParseFloat(n.Attributes[k], 64); err == nil && v > 0 {
			c.CoreMHz = v
			break
		}
	}
	if c.CoreMHz == 0 && cpu.TotalCpuCores > 0 {
		c.CoreMHz = float64(cpu.CpuShares) / float64(cpu.TotalCpuCores)
	}
	c.CPUMHz, c.MemMB = cpu.CpuShares, n.NodeResources.Memory.MemoryMB
	if r := n.ReservedResources; r != nil {
		c.CPUMHz -= int64(r.Cpu.CpuShares)
		c.MemMB -= int64(r.Memory.MemoryMB)
	}
	c.Reservable = len(cpu.ReservableCpuCores)
	c.RealCores = c.CoreMHz > 0 && math.Abs(float64(cpu.TotalCpuCores)*c.CoreMHz-float64(cpu.CpuShares)) < c.CoreMHz/2
	if !(c.CoreMHz > 0) || c.CPUMHz <= 0 || c.MemMB <= 0 {
		return nodeCap{}, false
	}
	return c, true
}

// grantOf reads the grant in force recorded on a job (nil: none).
func grantOf(job *api.Job) *engine.Resources {
	c, err1 := strconv.ParseFloat(job.Meta[MetaCores], 64)
	m, err2 := strconv.ParseFloat(job.Meta[MetaMemGB], 64)
	if err1 != nil || err2 != nil || !(c > 0) || !(m > 0) {
		return nil
	}
	return &engine.Resources{Cores: c, MemGB: m}
}

// TaskResources are what each GPU task of a job gets from a grant.
type TaskResources struct {
	// Grant is the stage's grant (the whole job, all its servers): recorded
	// on the job as the grant in force.
	Grant engine.Resources
	// Cores is each GPU task's share of the cores (RONDO_CORES).
	Cores float64
	// ReservedCores > 0: resources.cores (whole cores); else CPU MHz.
	ReservedCores int
	CPU           int
	MemoryMB      int
	// Shrunk: less than the grant, to fit what Nomad accounts free.
	Shrunk bool
}

// ownResources is a task's resources as its submitter wrote them.
type ownResources struct {
	CPU       *int `json:"cpu,omitempty"`
	Cores     *int `json:"cores,omitempty"`
	MemoryMB  *int `json:"memory,omitempty"`
	MemoryMax *int `json:"memory_max,omitempty"`
}

// SetResources gives the GPU tasks of job's group r (see TaskResources),
// with RONDO_CORES and RONDO_MEM_MB, and records r.Grant on the job; the
// tasks' own resources are recorded first (once). r nil restores the own
// resources and drops the env and the record. Other tasks are left alone.
// Like Pin, it is called only when Rondo (re)starts the job.
func SetResources(job *api.Job, group string, r *TaskResources) error {
	tg := groupOf(job, group)
	if tg == nil {
		return fmt.Errorf("no group %q", group)
	}
	own := map[string]ownResources{}
	if v := job.Meta[MetaOwnResources]; v != "" {
		if err := json.Unmarshal([]byte(v), &own); err != nil {
			return fmt.Errorf("meta %s: %w", MetaOwnResources, err)
		}
	}
	if r == nil {
		for _, t := range tg.Tasks {
			if o, ok := own[t.Name]; ok && gpuTask(t) {
				t.Resources.CPU, t.Resources.Cores = o.CPU, o.Cores
				t.Resources.MemoryMB, t.Resources.MemoryMaxMB = o.MemoryMB, o.MemoryMax
			}
			delete(t.Env, EnvCores)
			delete(t.Env, EnvMemMB)
		}
		delete(job.Meta, MetaCores)
		delete(job.Meta, MetaMemGB)
		return nil
	}
	recorded := len(own) > 0
	for _, t := range tg.Tasks {
		if !gpuTask(t) {
			continue
		}
		res := t.Resources
		if _, ok := own[t.Name]; !ok && !recorded {
			own[t.Name] = ownResources{CPU: res.CPU, Cores: res.Cores, MemoryMB: res.MemoryMB, MemoryMax: res.MemoryMaxMB}
		}
		if r.ReservedCores > 0 {
			n, zero := r.ReservedCores, 0
			res.Cores, res.CPU = &n, &zero
		} else {
			n := r.CPU
			res.CPU, res.Cores = &n, nil
		}
		mem := r.MemoryMB
		res.MemoryMB = &mem
		if mx := res.MemoryMaxMB; mx != nil && *mx > 0 && *mx < mem {
			res.MemoryMaxMB = &mem
		}
		setEnv(t, EnvCores, strconv.FormatFloat(r.Cores, 'f', -1, 64))
		setEnv(t, EnvMemMB, strconv.Itoa(mem))
	}
	if job.Meta == nil {
		job.Meta = map[string]string{}
	}
	if !recorded {
		b, err := json.Marshal(own)
		if err != nil {
			return err
		}
		job.Meta[MetaOwnResources] = string(b)
	}
	job.Meta[MetaCores] = strconv.FormatFloat(r.Grant.Cores, 'g', -1, 64)
	job.Meta[MetaMemGB] = strconv.FormatFloat(r.Grant.MemGB, 'g', -1, 64)
	return nil
}

// usage is CPU (MHz), memory (MB) and reserved cores.
type usage struct {
	cpu, mem int64
	cores    int
}

func (u usage) times(n int) usage {
	return usage{u.cpu * int64(n), u.mem * int64(n), u.cores * n}
}

func (u usage) plus(o usage) usage { return usage{u.cpu + o.cpu, u.mem + o.mem, u.cores + o.cores} }

// within: u fits in free (cores only when u reserves some).
func (u usage) within(free usage) bool {
	return u.cpu <= free.cpu && u.mem <= free.mem && (u.cores == 0 || u.cores <= free.cores)
}

// taskUsage is what Nomad charges a task of the spec: cpu MHz (cores ×
// per-core MHz for reserved cores), memory and cores; own resources
// (restored by SetResources(nil)) when the job records them.
func taskUsage(t *api.Task, own map[string]ownResources, coreMHz float64) usage {
	if t.Resources == nil {
		return usage{}
	}
	cpu, cores, mem := t.Resources.CPU, t.Resources.Cores, t.Resources.MemoryMB
	if o, ok := own[t.Name]; ok && gpuTask(t) {
		cpu, cores, mem = o.CPU, o.Cores, o.MemoryMB
	}
	u := usage{mem: int64(deref(mem))}
	if n := deref(cores); n > 0 {
		u.cores = n
		u.cpu = int64(math.Round(float64(n) * coreMHz))
	} else {
		u.cpu = int64(deref(cpu))
	}
	return u
}

func ownOf(job *api.Job) map[string]ownResources {
	own := map[string]ownResources{}
	if v := job.Meta[MetaOwnResources]; v != "" {
		_ = json.Unmarshal([]byte(v), &own)
	}
	return own
}

// layout is how Pin (or PinShared) lays a job out: its allocation count
// and how many allocations land on each server.
func layout(a engine.Assignment, shared bool, serverOf func(string) string) (count int, per map[string]int) {
	gpus := map[string]int{}
	for _, g := range a.GPUs {
		gpus[serverOf(g)]++
	}
	if !shared && len(a.Servers) > 0 {
		devices := len(a.GPUs) / len(a.Servers)
		even := true
		for _, n := range gpus {
			even = even && n == devices
		}
		if even {
			per = map[string]int{}
			for _, s := range a.Servers {
				per[s] = 1
			}
			return len(a.Servers), per
		}
	}
	return len(a.GPUs), gpus
}

// fitNodes is the free CPU, memory and cores of nodes by Nomad's
// accounting: capacity minus reservations minus every live allocation on
// the node (Rondo's or not) except those of the jobs in skip, which this
// enforcement restarts.
func (b *Backend) fitNodes(nodes []string, skip map[string]bool) map[string]*usage {
	free := map[string]*usage{}
	for _, id := range nodes {
		c, ok := b.caps[id]
		if !ok {
			continue
		}
		allocs, _, err := b.cfg.Client.Nodes().Allocations(id, nil)
		if err != nil {
			b.log.Warn("placement: cannot read the node's allocations; its grants are not checked", "node", b.nodeNames([]string{id}), "error", err)
			continue
		}
		u := usage{cpu: c.CPUMHz, mem: c.MemMB, cores: c.Reservable}
		for _, al := range allocs {
			if al.ClientTerminalStatus() || skip[b.Key(al.Namespace, al.JobID)] || al.AllocatedResources == nil {
				continue
			}
			for name, tr := range al.AllocatedResources.Tasks {
				if tr == nil {
					continue
				}
				u.cpu -= tr.Cpu.CpuShares
				u.mem -= tr.Memory.MemoryMB
				u.cores -= specCores(al.Job, al.TaskGroup, name)
			}
		}
		free[id] = &u
	}
	return free
}

// specCores is the resources.cores of a task of a job spec (0 if none).
func specCores(job *api.Job, group, task string) int {
	if job == nil {
		return 0
	}
	tg := groupOf(job, group)
	if tg == nil {
		return 0
	}
	for _, t := range tg.Tasks {
		if t.Name == task && t.Resources != nil {
			return deref(t.Resources.Cores)
		}
	}
	return 0
}

// planResources decides the CPU and memory of the plan's pinned starts:
// TaskResources for each job whose assignment carries a grant (nil entry
// or none: the job's own resources). Each grant is checked against what
// Nomad accounts free on the job's nodes, in plan order after the starts
// without a grant (which keep their own resources): a grant that does not
// fit is shrunk to what is free (cpu and memory, never below the smaller
// of the grant and the task's own request), or else the job runs with
// its own resources; both are logged. A node whose allocations cannot be
// read is not checked.
func (b *Backend) planResources(starts []engine.Assignment) map[string]*TaskResources {
	type item struct {
		id    string
		a     engine.Assignment
		grant *engine.Resources
	}
	var items []item
	var nodes []string
	skip := map[string]bool{}
	granted := false
	for _, a := range starts {
		for k, id := range a.Jobs {
			skip[id] = true
			it := item{id: id, a: a}
			if k < len(a.Resources) && a.Resources[k].Cores > 0 && a.Resources[k].MemGB > 0 {
				g := a.Resources[k]
				it.grant = &g
				granted = true
			}
			items = append(items, it)
			for _, s := range a.Servers {
				if !slices.Contains(nodes, s) {
					nodes = append(nodes, s)
				}
			}
		}
	}
	if !granted {
		return nil
	}
	free := b.fitNodes(nodes, skip)
	out := map[string]*TaskResources{}
	// Starts without a grant first: they hold their own resources.
	for _, it := range items {
		if it.grant != nil {
			continue
		}
		if st := b.jobs[it.id]; st != nil && st.job != nil {
			need := b.needs(st.job, st.group, it.a, nil)
			for s, u := range need {
				if f := free[s]; f != nil {
					*f = usage{f.cpu - u.cpu, f.mem - u.mem, f.cores - u.cores}
				}
			}
		}
	}
	for _, it := range items {
		st := b.jobs[it.id]
		if it.grant == nil || st == nil || st.job == nil {
			continue
		}
		r := b.fitGrant(it.id, st, it.a, *it.grant, free)
		out[it.id] = r
	}
	return out
}

// fitGrant turns one job's grant into TaskResources that fit free (and
// charges them), or nil (own resources).
func (b *Backend) fitGrant(id string, st *jobState, a engine.Assignment, g engine.Resources, free map[string]*usage) *TaskResources {
	tg := groupOf(st.job, st.group)
	if tg == nil {
		return nil
	}
	var gpuTasks []*api.Task
	for _, t := range tg.Tasks {
		if gpuTask(t) {
			gpuTasks = append(gpuTasks, t)
		}
	}
	coreMHz := math.Inf(1)
	realCores := true
	for _, s := range a.Servers {
		c, ok := b.caps[s]
		if !ok {
			return nil // a node of unknown capacity: the stage granted nothing there
		}
		coreMHz = math.Min(coreMHz, c.CoreMHz)
		realCores = realCores && c.RealCores
	}
	if len(gpuTasks) == 0 || math.IsInf(coreMHz, 1) {
		return nil
	}
	count, _ := layout(a, len(a.Jobs) == 2, b.serverOf)
	n := float64(count * len(gpuTasks))
	share := g.Cores / n
	r := &TaskResources{Grant: g, Cores: share, MemoryMB: max(int(math.Floor(g.MemGB*1024/n)), minMemoryMB),
		CPU: max(int(math.Round(share*coreMHz)), 1)}
	if whole := math.Round(share); realCores && whole >= 1 && math.Abs(share-whole) < 1e-6 {
		rc := *r
		rc.ReservedCores, rc.CPU = int(whole), 0
		if b.charge(st, a, &rc, free, false) {
			return &rc
		}
	}
	if b.charge(st, a, r, free, false) {
		return r
	}
	// Shrink to what is free on the tightest node.
	own := ownOf(st.job)
	var ownCPU, ownMem int64 = math.MaxInt64, math.MaxInt64
	for _, t := range gpuTasks {
		u := taskUsage(t, own, coreMHz)
		ownCPU, ownMem = min(ownCPU, u.cpu), min(ownMem, u.mem)
	}
	fitCPU, fitMem := int64(r.CPU), int64(r.MemoryMB)
	_, per := layout(a, len(a.Jobs) == 2, b.serverOf)
	fixed := b.fixedUsage(st.job, tg, coreMHz)
	for s, allocs := range per {
		f := free[s]
		if f == nil {
			continue
		}
		k := int64(allocs * len(gpuTasks))
		fitCPU = min(fitCPU, (f.cpu-fixed.cpu*int64(allocs))/k)
		fitMem = min(fitMem, (f.mem-fixed.mem*int64(allocs))/k)
	}
	floorCPU, floorMem := max(min(int64(r.CPU), ownCPU), 1), max(min(int64(r.MemoryMB), ownMem), minMemoryMB)
	if fitCPU >= floorCPU && fitMem >= floorMem {
		s := *r
		s.CPU, s.MemoryMB, s.Shrunk = int(fitCPU), int(fitMem), true
		s.Cores = float64(s.CPU) / coreMHz
		b.charge(st, a, &s, free, true)
		b.log.Warn("placement: the grant does not fit what Nomad accounts free on the job's nodes; shrunk to fit",
			"job", id, "cores", g.Cores, "mem_gb", g.MemGB, "task_cpu_mhz", s.CPU, "task_memory_mb", s.MemoryMB,
			"planned_cpu_mhz", r.CPU, "planned_memory_mb", r.MemoryMB, "nodes", b.nodeNames(a.Servers))
		return &s
	}
	b.charge(st, a, nil, free, true)
	b.log.Warn("placement: the grant does not fit what Nomad accounts free on the job's nodes, nor does a smaller one above the job's own request; the job runs with its own resources",
		"job", id, "cores", g.Cores, "mem_gb", g.MemGB, "nodes", b.nodeNames(a.Servers))
	return nil
}

// fixedUsage is what one allocation's tasks other than the GPU tasks hold.
func (b *Backend) fixedUsage(job *api.Job, tg *api.TaskGroup, coreMHz float64) usage {
	var u usage
	own := ownOf(job)
	for _, t := range tg.Tasks {
		if !gpuTask(t) {
			u = u.plus(taskUsage(t, own, coreMHz))
		}
	}
	return u
}

// needs is what a start takes on each of its servers: r for every GPU
// task (nil: their own resources) plus the other tasks' own.
func (b *Backend) needs(job *api.Job, group string, a engine.Assignment, r *TaskResources) map[string]usage {
	tg := groupOf(job, group)
	if tg == nil {
		return nil
	}
	_, per := layout(a, len(a.Jobs) == 2, b.serverOf)
	own := ownOf(job)
	out := map[string]usage{}
	for s, allocs := range per {
		coreMHz := b.caps[s].CoreMHz
		var u usage
		for _, t := range tg.Tasks {
			switch {
			case r != nil && gpuTask(t) && r.ReservedCores > 0:
				u = u.plus(usage{cpu: int64(math.Round(float64(r.ReservedCores) * coreMHz)), mem: int64(r.MemoryMB), cores: r.ReservedCores})
			case r != nil && gpuTask(t):
				u = u.plus(usage{cpu: int64(r.CPU), mem: int64(r.MemoryMB)})
			default:
				u = u.plus(taskUsage(t, own, coreMHz))
			}
		}
		out[s] = u.times(allocs)
	}
	return out
}

// charge takes r's needs from free when they fit on every node (or always
// when force); it reports whether they fitted.
func (b *Backend) charge(st *jobState, a engine.Assignment, r *TaskResources, free map[string]*usage, force bool) bool {
	need := b.needs(st.job, st.group, a, r)
	if !force {
		for s, u := range need {
			if f := free[s]; f != nil && !u.within(*f) {
				return false
			}
		}
	}
	for s, u := range need {
		if f := free[s]; f != nil {
			*f = usage{f.cpu - u.cpu, f.mem - u.mem, f.cores - u.cores}
		}
	}
	return true
}

// describe is a grant's log form.
func (r *TaskResources) describe() string {
	if r == nil {
		return "own"
	}
	cpu := fmt.Sprintf("cpu=%dMHz", r.CPU)
	if r.ReservedCores > 0 {
		cpu = fmt.Sprintf("cores=%d", r.ReservedCores)
	}
	s := fmt.Sprintf("%s memory=%dMB per GPU task (job: %.4g cores, %.4g GB)", cpu, r.MemoryMB, r.Grant.Cores, r.Grant.MemGB)
	if r.Shrunk {
		s += ", shrunk to fit"
	}
	return s
}

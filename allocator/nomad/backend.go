// Package nomad is Rondo's Nomad backend: it observes GPU nodes, their
// devices and the jobs that opted in (meta rondo.vc), and enforces the
// engine's plans by re-registering jobs with node and GPU pins.
//
// Admission gate: GPU clients live in node pool "rondo". Opted-in jobs are
// submitted to another pool (plain `nomad job run` uses "default"), where no
// node has GPUs, so Nomad cannot place them and they stay pending. Rondo
// admits a job by re-registering it in pool "rondo" with pins on the node
// (${node.unique.id}) and the GPUs (${device.ids} set_contains_any).
// Suspension scales the group to 0; a kept job is left untouched.
package nomad

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/ledger"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/hcl"
)

// DefaultPool is the node pool of Rondo's GPU clients.
const DefaultPool = "rondo"

// MetaGPUs records a job's scale factor (GPUs in all), written once at
// admission, before the job first runs, because suspension scales the group
// to 0 and migrations rewrite the device count.
const MetaGPUs = "rondo.gpus"

// Priorities of admitted jobs: Nomad preempts only jobs at least 10 points
// lower, so guaranteed work may evict opportunistic work.
const (
	GuaranteedPriority    = 70
	OpportunisticPriority = 40
)

// UnknownSteps stands for a job that names no rondo.steps.
const UnknownSteps = 1e12

// Config configures a Backend.
type Config struct {
	Client *api.Client
	// Pool is the GPU node pool (default "rondo").
	Pool string
	// Throughputs defaults to the embedded Gavel table.
	Throughputs *throughputs.Table
	// TypeNames maps device model names to GPU types (the config's
	// gpu_type blocks); other models get DefaultGPUType (DeviceType).
	TypeNames map[string]string
	// Progress defaults to CheckpointProgress.
	Progress ProgressFunc
	// Epochs is a two-role job's progress in epochs (the lease API's
	// epochs_done), for the jobs that declare rondo.epochs; it defaults to
	// CheckpointEpochs.
	Epochs ProgressFunc
	Logger hclog.Logger
	// AckTimeout bounds the wait for allocations to reflect a plan (60s).
	AckTimeout time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Done, when closed, cuts Enforce's waits short (agent shutdown).
	Done <-chan struct{}
	// OnEvent, if set, is called after each enforcement action took effect
	// in Nomad: event is admit, resume, migrate, suspend, preempt, withdraw
	// or gate. The agent marks the decision's intents applied with it and
	// counts decisions.
	OnEvent func(job, event string)
	// NoElastic runs elastic jobs (meta rondo.elastic) at their minimum
	// size, pinned by GPU id like any other job: the agent sets it when
	// cells decide (the cell layer does not resize jobs yet).
	NoElastic bool
	// CheckProfile, when set, vets a job's rondo.profile (the placement
	// stage's profiles): a job naming an unknown one is ignored with a
	// warning, as for any bad rondo meta.
	CheckProfile func(name string) error
	// CheckpointRoot and LeaseAddr are added to the GPU tasks of every job
	// Rondo starts, where the task does not set them (AddTaskEnv): the
	// config's tasks block.
	CheckpointRoot, LeaseAddr string
	// Pools are further GPU node pools (cells selected by node_pool): their
	// nodes' GPUs are observed like Pool's, and a job placed there is
	// admitted into that pool.
	Pools []string
	// Checkpoints, when set, is what a job reported of its checkpoints and
	// restarts through the lease API, and its measured start latency (the
	// agent's Checkpoint): Observe puts them on the snapshot for
	// preemption that respects the work (respect.go). nil: nothing known.
	Checkpoints func(job string) (state.Checkpoint, bool)
	// Namespace is the home namespace (the agent's nomad { namespace };
	// "" or "*": "default"): its jobs are keyed by their bare id (JobKey).
	Namespace string
	// Namespaces are further namespaces to watch (the VCs' namespaces);
	// "*" among them: every namespace the token can read (namespaces.go).
	Namespaces []string
	// Watch keeps the job, allocation and node lists in memory from
	// Nomad's event stream, so that Observe re-lists none of them while
	// the stream is in step with the server (watch.go); off: every Observe
	// re-lists all three. The agent sets it.
	Watch bool
	// WatchWait bounds Observe's wait for the stream to catch up with the
	// server's indexes before it re-lists (DefaultWatchWait); WatchResync
	// is the longest time between full re-lists (DefaultWatchResync).
	WatchWait, WatchResync time.Duration
	// StreamClient reads the event stream (default Client). The stream is
	// one request that lives for hours, so its client must not bound a
	// request's whole time, as the agent's Client does (-nomad-timeout):
	// the watcher instead drops a stream that sends nothing, not even
	// Nomad's heartbeat, for WatchIdle (DefaultWatchIdle).
	StreamClient *api.Client
	WatchIdle    time.Duration
	// ShareGroup, when set, offers the round colocated pairs (space
	// sharing, sharing.go): two jobs may share GPUs when it puts both in
	// the same group (ok true): a VC, or the opportunistic jobs. nil: no
	// pairs (no policy packs).
	ShareGroup func(vc string, opportunistic bool) (group string, ok bool)
}

// jobState is what the backend remembers about a job between rounds.
type jobState struct {
	arrivalS  float64
	lastS     float64
	received  map[string]float64
	tput      map[string]float64
	src       map[string]string // tput's sources (engine.Source*)
	job       *api.Job
	policy    hcl.JobPolicy
	group     string
	sf        int
	gpus      []string // live placement
	allocs    []string // the live allocations holding gpus
	servers   []string
	admitted  bool
	inPool    bool
	live      int // live allocations, Rondo's or not
	done      float64
	total     float64
	lastState string
	// shared: gpus are the GPUs of the MPS shares the job holds; sinceS is
	// the time since the previous look, credited once pairs are known.
	shared bool
	sinceS float64
	// elastic: the job's range in GPUs (nil: fixed size); gpus is then in
	// worker (allocation index) order, each worker StepGPUs GPUs.
	elastic *engine.Elastic
	// res is the placement grant its running allocations were started
	// with (meta rondo.cores, rondo.mem_gb; resources.go), nil for none.
	res *engine.Resources
	// A two-role job (tworole.go): its parameter-server group ("" for any
	// other job), that group's live allocations, and the nodes of those
	// (in allocation-index order) while the job is admitted.
	psGroup   string
	psLive    int
	psServers []string
	// runSinceS is when the job's current run began: the creation of the
	// oldest live allocation holding its GPUs (0: not running).
	runSinceS float64
}

// Backend implements loop.Backend on a Nomad cluster. Its bookkeeping
// (arrival and received time) is in memory; the agent keeps it in the
// durable state (Restore, CreditMarks, RestoreCredit), so that a restarted
// backend carries on, crediting the jobs that ran through the downtime.
type Backend struct {
	cfg   Config
	log   hclog.Logger
	epoch time.Time

	mu    sync.Mutex
	hist  History              // restored history, consumed as jobs are first seen
	jobs  map[string]*jobState // by key (JobKey)
	refs  map[string]jobRef    // every listed opted-in job's namespace and id, by key
	specs map[string]*api.Job  // their specs as last read, by key (readJobs)
	// nodeInfo: the GPU nodes as last read (Nodes().Info), by id; read
	// again only when the node list shows the node's ModifyIndex moved.
	nodeInfo map[string]*api.Node
	gpus     []engine.GPU
	gpuTyp   map[string]string  // GPU id -> type
	nodes    map[string]string  // node id -> name
	pools    map[string]string  // node id -> pool (observed GPU nodes)
	listed   []engine.Node      // every node of the last Observe (Ready: ready, eligible, in a GPU pool)
	caps     map[string]nodeCap // CPU and memory of the observed GPU nodes (resources.go)
	warned   map[string]bool
	// rejects are the opted-in jobs this Observe will not schedule as
	// submitted (reject): the snapshot's Rejected.
	rejects []engine.Rejection
	// finished: jobs whose "finished" line was logged, while Nomad lists them
	// (their state is dropped, so without it the line repeats every round).
	finished map[string]bool
	// intents of the plan being enforced, by job (the round's, enforce.go)
	intents map[string]engine.Intent
	// led is the jobs' received time (jobState.received are its accounts)
	led *ledger.Ledger
	// shares: each GPU's healthy MPS share ids, in instance order
	// (sharing.go); pairKeys the pair accounts opened in the ledger, by
	// unit key.
	shares   map[string][]string
	pairKeys map[string][2]string
	// rmu guards what the lease API reads of two-role jobs (tworole.go),
	// apart from mu, which Enforce holds through its waits: roles by job,
	// allocation slots by namespace and id.
	rmu   sync.Mutex
	roles map[string]roleInfo
	slots map[string]allocSlot
	// w follows Nomad's event stream (Config.Watch; watch.go).
	w *watcher
}

// New makes a backend; call Setup once before the first round.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, errors.New("nomad backend: no client")
	}
	if cfg.Pool == "" {
		cfg.Pool = DefaultPool
	}
	if cfg.Throughputs == nil {
		cfg.Throughputs = throughputs.Default()
	}
	if cfg.Progress == nil {
		cfg.Progress = CheckpointProgress
	}
	if cfg.Epochs == nil {
		cfg.Epochs = CheckpointEpochs
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WatchWait <= 0 {
		cfg.WatchWait = DefaultWatchWait
	}
	if cfg.WatchResync <= 0 {
		cfg.WatchResync = DefaultWatchResync
	}
	if cfg.StreamClient == nil {
		cfg.StreamClient = cfg.Client
	}
	if cfg.WatchIdle <= 0 {
		cfg.WatchIdle = DefaultWatchIdle
	}
	return &Backend{cfg: cfg, log: cfg.Logger, epoch: cfg.Now(), jobs: map[string]*jobState{}, led: ledger.New(),
		gpuTyp: map[string]string{}, nodes: map[string]string{}, caps: map[string]nodeCap{}, warned: map[string]bool{}, finished: map[string]bool{},
		shares: map[string][]string{}, pairKeys: map[string][2]string{}, roles: map[string]roleInfo{}, slots: map[string]allocSlot{},
		refs: map[string]jobRef{}, specs: map[string]*api.Job{}, nodeInfo: map[string]*api.Node{}}, nil
}

// ErrPreemptionForbidden is returned (wrapped) by Setup when the token may
// not read or set the scheduler configuration (no operator read/write). The
// agent runs on; guaranteed jobs then cannot evict opportunistic ones
// unless an operator enables preemption.
var ErrPreemptionForbidden = errors.New("the allocator's token may not set the scheduler configuration (403): " +
	"guaranteed jobs cannot preempt opportunistic ones until an operator runs `" +
	EnablePreemption + "` " +
	"(or grant the token operator write)")

// Forbidden reports whether err is Nomad refusing the token (403).
func Forbidden(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 403
	}
	return strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "Permission denied")
}

// Setup enables preemption for batch and service jobs, so that guaranteed
// jobs can take GPUs from opportunistic ones. Without operator write it
// returns ErrPreemptionForbidden when preemption is off (and nil when an
// operator already enabled it).
func (b *Backend) Setup() error {
	op := b.cfg.Client.Operator()
	cur, _, err := op.SchedulerGetConfiguration(nil)
	if err != nil {
		if Forbidden(err) {
			return fmt.Errorf("%w: %v", ErrPreemptionForbidden, err)
		}
		return fmt.Errorf("nomad: scheduler configuration: %w", err)
	}
	conf := cur.SchedulerConfig
	if conf == nil {
		conf = &api.SchedulerConfiguration{}
	}
	if len(PreemptionOff(conf)) == 0 {
		return nil
	}
	conf.PreemptionConfig.BatchSchedulerEnabled = true
	conf.PreemptionConfig.ServiceSchedulerEnabled = true
	if _, _, err := op.SchedulerSetConfiguration(conf, nil); err != nil {
		if Forbidden(err) {
			return fmt.Errorf("%w: %v", ErrPreemptionForbidden, err)
		}
		return fmt.Errorf("nomad: enable preemption: %w", err)
	}
	return nil
}

// PreemptionOff lists the schedulers ("batch", "service") of the job types
// Rondo schedules whose preemption conf leaves off (nil: all off). Setup
// turns them on; `rondo config validate -nomad` reports them.
func PreemptionOff(conf *api.SchedulerConfiguration) []string {
	var off []string
	if conf == nil || !conf.PreemptionConfig.BatchSchedulerEnabled {
		off = append(off, "batch")
	}
	if conf == nil || !conf.PreemptionConfig.ServiceSchedulerEnabled {
		off = append(off, "service")
	}
	return off
}

// EnablePreemption is the command an operator runs to turn preemption on
// for the schedulers Rondo needs.
const EnablePreemption = "nomad operator scheduler set-config -preempt-batch-scheduler=true -preempt-service-scheduler=true"

func (b *Backend) nowS() float64 { return b.cfg.Now().Sub(b.epoch).Seconds() }

// observeGPUs lists the GPUs of ready, eligible nodes in the pool.
func (b *Backend) observeGPUs(stubs []*api.NodeListStub) ([]engine.GPU, error) {
	stubs = slices.Clone(stubs)
	sort.SliceStable(stubs, func(i, j int) bool { return stubs[i].Name < stubs[j].Name })
	var gpus []engine.GPU
	b.nodes = map[string]string{}
	b.pools = map[string]string{}
	b.gpuTyp = map[string]string{}
	b.shares = map[string][]string{}
	b.caps = map[string]nodeCap{}
	b.listed = b.listed[:0]
	infos := make(map[string]*api.Node, len(b.nodeInfo))
	defer func() { b.nodeInfo = infos }() // the cache keeps the ready GPU nodes listed
	for _, s := range stubs {
		ready := s.Status == "ready" && s.SchedulingEligibility == "eligible" && b.gpuPool(s.NodePool)
		b.listed = append(b.listed, engine.Node{ID: s.ID, Name: s.Name, Pool: s.NodePool, Class: s.NodeClass, Ready: ready})
		if !ready {
			continue
		}
		b.pools[s.ID] = s.NodePool
		n, err := b.nodeOf(s)
		if err != nil {
			return nil, err
		}
		infos[s.ID] = n
		b.nodes[n.ID] = n.Name
		if c, ok := nodeCapOf(n); ok {
			// What the node offers tasks, for the placement stage.
			b.caps[n.ID] = c
			b.listed[len(b.listed)-1].Cores, b.listed[len(b.listed)-1].MemGB = c.Cores(), c.MemGB()
		}
		if n.NodeResources == nil {
			continue
		}
		for _, d := range n.NodeResources.Devices {
			if d.Vendor == "nvidia" && d.Type == shareType {
				b.observeShares(d)
			}
			if d.Vendor != "nvidia" || d.Type != "gpu" {
				continue
			}
			typ := DeviceType(d, b.cfg.TypeNames)
			for _, in := range d.Instances {
				g := engine.GPU{ID: in.ID, Type: typ, Server: n.ID, Failed: !in.Healthy}
				// The plugin's topology (device-plugin/README.md), for cells
				// derived from it (cells_from_topology).
				if a := d.Attributes[in.ID+".cell"]; a != nil && a.StringVal != nil {
					g.Cell = *a.StringVal
				}
				if a := d.Attributes[in.ID+".index"]; a != nil && a.IntVal != nil {
					g.Index = int(*a.IntVal)
				}
				gpus = append(gpus, g)
				b.gpuTyp[in.ID] = typ
			}
		}
	}
	return gpus, nil
}

// nodeOf is the listed node's full record: the cached one while the
// listing shows the ModifyIndex it was read at (every change to a node,
// its devices' health included, moves that index), else read again.
func (b *Backend) nodeOf(s *api.NodeListStub) (*api.Node, error) {
	if n := b.nodeInfo[s.ID]; n != nil && s.ModifyIndex != 0 && n.ModifyIndex == s.ModifyIndex {
		return n, nil
	}
	n, _, err := b.cfg.Client.Nodes().Info(s.ID, nil)
	if err != nil {
		return nil, fmt.Errorf("nomad: node %s: %w", s.Name, err)
	}
	return n, nil
}

// gpuGroup finds the task group requesting nvidia GPUs and its GPU count
// per allocation.
func gpuGroup(job *api.Job) (*api.TaskGroup, *api.RequestedDevice) {
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			if t.Resources == nil {
				continue
			}
			for _, d := range t.Resources.Devices {
				if isGPURequest(d.Name) {
					return tg, d
				}
			}
		}
	}
	return nil, nil
}

func hasNodePin(tg *api.TaskGroup) bool {
	for _, c := range tg.Constraints {
		if c.LTarget == nodeTarget {
			return true
		}
	}
	return false
}

// isGPURequest: a request for GPUs, exclusive or shares (a job Rondo
// placed on shares requests nvidia/gpu-share).
func isGPURequest(name string) bool {
	return name == "gpu" || name == "nvidia/gpu" || strings.HasPrefix(name, "nvidia/gpu/") || isShareRequest(name)
}

func isShareRequest(name string) bool {
	return name == shareRequest || strings.HasPrefix(name, shareRequest+"/")
}

func scaleFactor(job *api.Job) int {
	if v, err := strconv.Atoi(job.Meta[MetaGPUs]); err == nil && v > 0 {
		return v
	}
	tg, d := gpuGroup(job)
	if tg == nil {
		return 0
	}
	return max(deref(tg.Count), 1) * int(max(deref(d.Count), 1))
}

// allAllocs lists every allocation of the watched namespaces with its
// allocated resources (the job allocations endpoint leaves them out) once
// and groups them by job key: one request per round or poll instead of one
// per job.
func (b *Backend) allAllocs() (map[string][]*api.AllocationListStub, error) {
	q := b.listOpts()
	q.Params = map[string]string{"resources": "true"}
	allocs, _, err := b.cfg.Client.Allocations().List(q)
	if err != nil {
		return nil, err
	}
	return b.byJob(allocs), nil
}

// byJob groups allocations by job key, in the listing's order.
func (b *Backend) byJob(allocs []*api.AllocationListStub) map[string][]*api.AllocationListStub {
	by := map[string][]*api.AllocationListStub{}
	for _, a := range allocs {
		k := b.Key(a.Namespace, a.JobID)
		by[k] = append(by[k], a)
	}
	return by
}

func live(a *api.AllocationListStub) bool {
	return a.DesiredStatus == "run" && (a.ClientStatus == "pending" || a.ClientStatus == "running")
}

// Observe reports the GPUs and the active opted-in jobs with their running
// placement, and credits running jobs with the time since the last Observe.
func (b *Backend) Observe() (*engine.Snapshot, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.nowS()
	l, err := b.observeLists()
	if err != nil {
		return nil, err
	}
	gpus, err := b.observeGPUs(l.nodes)
	if err != nil {
		return nil, err
	}
	b.gpus = gpus
	types := map[string]bool{}
	for _, g := range gpus {
		types[g.Type] = true
	}
	stubs := slices.DeleteFunc(slices.Clone(l.jobs), func(s *api.JobListStub) bool { return !b.watched(s.Namespace) })
	sort.SliceStable(stubs, func(i, j int) bool { return stubs[i].CreateIndex < stubs[j].CreateIndex })
	allocs := b.byJob(l.allocs)
	b.rejects = nil
	// Read the opted-in jobs' specs a few at a time.
	var keys []string
	b.refs = map[string]jobRef{}
	modified := map[string]uint64{}
	for _, s := range stubs {
		if !schedulable(s) {
			continue
		}
		k := b.Key(s.Namespace, s.ID)
		if r, dup := b.refs[k]; dup {
			// A home job whose id looks like "ns/id" (a slash is allowed in
			// ids) and ns's job id: the first listed keeps the key.
			b.reject(k, &api.Job{Namespace: &s.Namespace, Meta: s.Meta}, "job key taken",
				"error", fmt.Errorf("job %q of namespace %q has the same key as job %q of namespace %q; rename one", s.ID, s.Namespace, r.id, r.ns))
			continue
		}
		b.refs[k] = jobRef{s.Namespace, s.ID}
		keys = append(keys, k)
		modified[k] = s.ModifyIndex
	}
	specs := b.readJobs(keys, modified)
	snap := &engine.Snapshot{TimeS: now, GPUs: gpus, Nodes: slices.Clone(b.listed)}
	seen := map[string]bool{}
	roles := map[string]roleInfo{}
	var shared []string // jobs on MPS shares, in snapshot order
	for _, k := range keys {
		st, ok := b.observeJob(k, specs[k], now, types, allocs[k])
		if !ok {
			continue
		}
		seen[k] = true
		snap.Jobs = append(snap.Jobs, st.engineJob(k))
		if st.psGroup != "" {
			// The counts in force, as the lease API tells the tasks.
			roles[k] = roleInfo{workerGroup: st.group, psGroup: st.psGroup, workers: groupCount(st.job, st.group),
				ps: groupCount(st.job, st.psGroup), batch: st.policy.BatchSize}
		}
		if st.shared {
			shared = append(shared, k)
		} else if len(st.gpus) > 0 {
			a := engine.Assignment{Jobs: []string{k}, Type: b.gpuTyp[st.gpus[0]],
				GPUs: st.gpus, Servers: st.servers, Action: engine.Keep}
			if st.res != nil {
				a.Resources = []engine.Resources{*st.res}
			}
			if st.elastic.TwoRole() {
				a.PS, a.PSServers = st.psLive, slices.Clone(st.psServers)
			}
			snap.Running = append(snap.Running, a)
		}
	}
	snap.Rejected = b.rejects
	b.observeRoles(roles)
	b.fillWork(snap.Jobs)
	for id := range b.jobs {
		if !seen[id] {
			delete(b.jobs, id)
			b.led.Forget(id)
			b.forgetPairs(id)
		}
	}
	snap.Running = append(snap.Running, b.runningPairs(shared)...)
	snap.Pairs = b.pairs(snap, b.shareableTypes(gpus))
	if len(b.finished) > 0 {
		listed := make(map[string]bool, len(stubs))
		for _, s := range stubs {
			listed[b.Key(s.Namespace, s.ID)] = true
		}
		for id := range b.finished {
			if !listed[id] {
				delete(b.finished, id)
			}
		}
	}
	return snap, nil
}

// schedulable: an opted-in job Rondo schedules. Parameterized and periodic
// parents never run themselves (their dispatched and periodic children,
// which inherit the meta, are scheduled), nor do system jobs.
func schedulable(s *api.JobListStub) bool {
	return s.Meta[hcl.MetaVC] != "" && !s.Stop && s.Type != "system" && s.Type != "sysbatch" &&
		!s.ParameterizedJob && !s.Periodic
}

// reject lists an opted-in job Rondo will not schedule as submitted in
// this round's snapshot (Snapshot.Rejected: the agent shows it as
// rejected, with the reason) and warns once, "job ignored: " + what, with
// the key-value pairs kv (an "error" pair's value ends the reason).
func (b *Backend) reject(id string, job *api.Job, what string, kv ...any) {
	if !b.warned[id] {
		b.warned[id] = true
		b.log.Warn("job ignored: "+what, append([]any{"job", id}, kv...)...)
	}
	reason := what
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "error" {
			reason = fmt.Sprintf("%s: %v", what, kv[i+1])
		}
	}
	b.rejects = append(b.rejects, engine.Rejection{Job: id, Namespace: deref(job.Namespace), VC: job.Meta[hcl.MetaVC],
		User: job.Meta[hcl.MetaUser], Reason: reason})
}

// observeJob refreshes one job; ok is false when it is not active (finished,
// unreadable policy, no GPU request: the last ones rejected, reject).
func (b *Backend) observeJob(id string, job *api.Job, now float64, types map[string]bool, allocs []*api.AllocationListStub) (*jobState, bool) {
	if job == nil {
		return nil, false // unreadable (logged by readJobs)
	}
	if job.Dispatched {
		// Rondo admits a job by re-registering it, which Nomad refuses for
		// a dispatched child: the HTTP API does not carry Dispatched, and
		// a register without it reads as turning the child into a
		// parameterized job ("cannot update non-parameterized job to being
		// parameterized"); Dispatched itself is read-only.
		b.reject(id, job, "a dispatched job cannot be re-registered through Nomad's API, so Rondo cannot admit it; "+
			"submit each run as its own job (or use a periodic job)", "parent", deref(job.ParentID))
		return nil, false
	}
	pol, err := hcl.PolicyFromMeta(job.Meta)
	if err != nil {
		b.reject(id, job, "bad rondo meta", "error", err)
		return nil, false
	}
	if pol.Profile != "" && b.cfg.CheckProfile != nil {
		if err := b.cfg.CheckProfile(pol.Profile); err != nil {
			b.reject(id, job, "bad rondo meta", "error", hcl.MetaProfile+": "+err.Error())
			return nil, false
		}
	}
	tg, dev := gpuGroup(job)
	// The GPU group's scaling { min max } block: elastic bounds when the
	// meta gives none (ScalingBounds; the meta wins).
	pol, warns := ScalingBounds(id, pol, tg)
	if len(warns) > 0 && !b.warned["scaling:"+id] {
		b.warned["scaling:"+id] = true
		for _, w := range warns {
			b.log.Warn("scaling block", "job", id, "warning", w)
		}
	}
	sf := scaleFactor(job)
	var el *engine.Elastic
	var psg *api.TaskGroup // a two-role job's parameter servers
	if tg != nil && pol.Elastic() && b.cfg.NoElastic {
		// Fixed at the minimum: the scale factor is written to meta at
		// the first start and read from there afterwards.
		if job.Meta[MetaGPUs] == "" {
			sf = pol.ElasticMin * int(max(deref(dev.Count), 1))
		}
	} else if tg != nil && pol.Elastic() {
		// An elastic job's size is its workers (group count) × the group's
		// GPUs: the minimum is what the engine allocates. Rondo never
		// rewrites an elastic job's device count or meta.
		step := int(max(deref(dev.Count), 1))
		sf = pol.ElasticMin * step
		el = &engine.Elastic{StepGPUs: step, MaxGPUs: pol.ElasticMax * step}
	}
	if tg != nil && pol.TwoRole() {
		// Workers and parameter servers (DL2): the worker group is the GPU
		// group, the parameter servers the group rondo.ps_group names.
		// Under NoElastic the job runs at its minimum like any elastic
		// job, its parameter servers at theirs.
		var err error
		if psg, err = b.twoRole(job, tg, pol, el); err != nil {
			b.reject(id, job, "bad two-role job", "error", err)
			return nil, false
		}
	}
	if tg == nil || sf == 0 {
		b.reject(id, job, "no nvidia/gpu device request")
		return nil, false
	}
	// Admitted: in the GPU pool and pinned by Rondo. A job submitted
	// straight to the pool (bypassing the gate) is unpinned: it is treated
	// as waiting, and Enforce re-pins or withdraws it.
	inPool := b.gpuPool(deref(job.NodePool))
	admitted := inPool && hasNodePin(tg)
	var gpus, servers []string
	var held []heldAlloc
	finished, shared := false, false
	liveN, psLive := 0, 0
	var psServers []string
	if el != nil || psg != nil {
		allocs = byAllocIndex(allocs)
	}
	for _, a := range allocs {
		if psg != nil && a.TaskGroup == deref(psg.Name) {
			if live(a) {
				psLive++
				if admitted {
					psServers = append(psServers, a.NodeID)
				}
			}
			continue
		}
		if a.TaskGroup != deref(tg.Name) {
			continue
		}
		if a.ClientStatus == "complete" && a.DesiredStatus == "run" {
			finished = true // the task exited 0 on its own: trained out
		}
		if !live(a) {
			continue
		}
		liveN++
		if !admitted {
			continue
		}
		servers = appendNew(servers, a.NodeID)
		if a.AllocatedResources == nil {
			continue
		}
		n := len(gpus)
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				if d.Vendor != "nvidia" || (d.Type != "gpu" && d.Type != shareType) {
					continue
				}
				for _, id := range d.DeviceIDs {
					gpus = append(gpus, gpuOf(id))
					shared = shared || d.Type == shareType
				}
			}
		}
		if len(gpus) > n {
			held = append(held, heldAlloc{id: a.ID, createS: time.Unix(0, a.CreateTime).Sub(b.epoch).Seconds()})
		}
	}
	total := float64(pol.Steps)
	if total == 0 {
		total = UnknownSteps
	}
	var done float64
	if t, d, ok := b.twoRoleProgress(job, pol); ok && psg != nil {
		// A two-role job's progress is in epochs (rondo.epochs).
		total, done = t, d
	} else {
		done, _ = b.cfg.Progress(job)
	}
	st := b.jobs[id]
	if st == nil {
		st = &jobState{arrivalS: now, lastS: now, received: b.led.Job(id)}
		if a, ok := b.hist.Arrival[id]; ok {
			st.arrivalS = a
		}
		if m, ok := b.hist.Received[id]; ok {
			b.led.Restore(id, m)
		}
		// After a restart: the time from the last credit recorded in the
		// state to now, if the job held its GPUs all along.
		if mark, ok := b.hist.Credit[id]; ok && len(gpus) > 0 {
			if c := downtimeCredit(mark, held, now); c > 0 {
				typ := b.gpuTyp[gpus[0]]
				b.led.Credit(id, typ, c)
				b.log.Info("credited the allocator's downtime", "job", id, "type", typ, "seconds", c,
					"since_s", mark.AtS, "allocs", len(held))
			}
		}
		b.jobs[id] = st
	}
	if finished && liveN == 0 || done >= total {
		if st.lastState != "finished" && !b.finished[id] {
			b.finished[id] = true
			b.log.Info("finished", "job", id, "steps", done)
		}
		st.lastState = "finished"
		return nil, false
	}
	// Credit the time since the last look to a job that holds GPUs now:
	// the last round started or kept it there (a job suspended at that
	// round's start no longer holds any). Its start latency counts, as the
	// simulator counts a micro-task from the round's start. (Crediting only
	// jobs that held GPUs at both looks missed the first round of every
	// stint: a job run for one round at a time was credited nothing.)
	// A job on shares is credited with its partner, once the pairs are
	// known (runningPairs).
	if len(gpus) > 0 && !shared {
		b.led.Credit(id, b.gpuTyp[gpus[0]], now-st.lastS)
	}
	st.shared, st.sinceS = shared, now-st.lastS
	if el == nil {
		sort.Strings(gpus)
	}
	st.elastic = el
	st.lastS, st.job, st.policy, st.group, st.sf = now, job, pol, deref(tg.Name), sf
	st.gpus, st.servers, st.admitted, st.done, st.total = gpus, servers, admitted, done, total
	st.allocs = st.allocs[:0]
	st.runSinceS = 0
	for i, h := range held {
		st.allocs = append(st.allocs, h.id)
		if i == 0 || h.createS < st.runSinceS {
			st.runSinceS = h.createS
		}
	}
	st.inPool, st.live = inPool, liveN+psLive
	st.psGroup, st.psLive, st.psServers = "", psLive, psServers
	if psg != nil {
		st.psGroup = deref(psg.Name)
	}
	st.res = nil
	if el == nil && len(gpus) > 0 {
		st.res = grantOf(job)
	}
	st.tput, st.src = map[string]float64{}, map[string]string{}
	for t := range types {
		st.tput[t], st.src[t] = b.throughput(pol.Model, sf, t)
	}
	return st, true
}

// readJobs reads the specs of the jobs ids, a few at a time, except those
// whose cached spec (specs) has the ModifyIndex the listing gave
// (modified): every change to a job, its spec or its status, moves that
// index, so a steady round reads no spec. A job that cannot be read is
// logged and left out (nil). The cache keeps only the jobs listed.
func (b *Backend) readJobs(ids []string, modified map[string]uint64) map[string]*api.Job {
	m := make(map[string]*api.Job, len(ids))
	var stale []string
	for _, id := range ids {
		if j := b.specs[id]; j != nil && deref(j.ModifyIndex) == modified[id] && modified[id] != 0 {
			m[id] = j
		} else {
			stale = append(stale, id)
		}
	}
	out := make([]*api.Job, len(stale))
	var wg sync.WaitGroup
	sem := make(chan struct{}, startParallelism)
	for i, id := range stale {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			job, _, err := b.cfg.Client.Jobs().Info(b.refs[id].id, &api.QueryOptions{Namespace: b.refs[id].ns})
			if err != nil {
				b.log.Warn("read job", "job", id, "error", err)
				return
			}
			out[i] = job
		}()
	}
	wg.Wait()
	for i, id := range stale {
		m[id] = out[i]
	}
	specs := make(map[string]*api.Job, len(ids))
	for _, id := range ids {
		if m[id] != nil {
			specs[id] = m[id]
		}
	}
	b.specs = specs
	return m
}

// throughput is a job's table throughput on typ and its source
// (engine.SourceTable, or engine.SourceDefaulted for the 1 given where the
// table says nothing: the round's estimating stage estimates those from
// what is measured, allocator/estimator.CompleteTypes).
func (b *Backend) throughput(model string, sf int, typ string) (float64, string) {
	if model == "" {
		return 1, engine.SourceDefaulted // unknown model: every type alike
	}
	if v, ok := b.cfg.Throughputs.Lookup(model, sf, typ); ok {
		return v, engine.SourceTable
	}
	if len(b.cfg.Throughputs.Keys(typ)) == 0 || b.cfg.Throughputs.Added(typ) || !b.knownModel(model, sf) {
		// A type the table does not know (or only the operator's file
		// does, listing what was profiled there), or a model it never
		// measured at this size: estimated by the round (completeTypes).
		return 1, engine.SourceDefaulted
	}
	return 0, engine.SourceTable // measured elsewhere, not on typ: it cannot run there
}

// knownModel reports whether the table measured model at scale factor sf
// on some GPU type.
func (b *Backend) knownModel(model string, sf int) bool {
	for _, t := range b.cfg.Throughputs.Types() {
		if _, ok := b.cfg.Throughputs.Lookup(model, sf, t); ok {
			return true
		}
	}
	return false
}

func (st *jobState) engineJob(id string) engine.Job {
	j := engine.Job{ID: id, ScaleFactor: st.sf, Throughput: st.tput, ThroughputSource: st.src, Weight: st.policy.Weight,
		ArrivalS: st.arrivalS, TotalSteps: st.total, RemainingSteps: max(st.total-st.done, 0),
		ReceivedS: map[string]float64{}, Model: st.policy.Model, VC: st.policy.VC, User: st.policy.User, Entity: st.policy.Entity,
		Started: st.admitted, Profile: st.policy.Profile, RunSinceS: st.runSinceS}
	if st.job != nil {
		j.Namespace = deref(st.job.Namespace)
	}
	if j.User == "" && st.job != nil {
		// No rondo.user: the job's namespace is its user (Gandiva-fair's
		// fair-share unit).
		j.User = deref(st.job.Namespace)
	}
	if st.policy.Class == hcl.Opportunistic {
		j.Class = engine.Opportunistic
	}
	for t, v := range st.received {
		j.ReceivedS[t] = v
	}
	if st.policy.SLO > 0 {
		j.DeadlineS = st.arrivalS + st.policy.SLO.Seconds()
	}
	if st.elastic != nil && (st.elastic.MaxGPUs > st.sf || st.elastic.TwoRole()) {
		e := *st.elastic
		if e.PS != nil {
			ps := *e.PS
			e.PS = &ps
		}
		j.Elastic = &e
	}
	return j
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// byAllocIndex orders allocations by the index in their name
// ("job.group[3]"): Nomad stops the highest indexes when a count shrinks,
// so an elastic job's GPUs listed in this order shrink from the end, as the
// engine expects.
func byAllocIndex(allocs []*api.AllocationListStub) []*api.AllocationListStub {
	out := append([]*api.AllocationListStub(nil), allocs...)
	sort.SliceStable(out, func(i, j int) bool { return allocIndex(out[i].Name) < allocIndex(out[j].Name) })
	return out
}

func allocIndex(name string) int {
	i := strings.LastIndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return 0
	}
	n, _ := strconv.Atoi(name[i+1 : len(name)-1])
	return n
}

// SetNoElastic switches Config.NoElastic (config reload); it applies from
// the next Observe.
func (b *Backend) SetNoElastic(v bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.NoElastic = v
}

// gpuPool reports whether pool is one of the GPU node pools.
func (b *Backend) gpuPool(pool string) bool {
	return pool == b.cfg.Pool || slices.Contains(b.cfg.Pools, pool)
}

// poolOf is the node pool a job placed on servers is admitted into: the
// servers' pool (the GPU pool when unknown or when they differ).
func (b *Backend) poolOf(servers []string) string {
	pool := ""
	for _, id := range servers {
		p := b.pools[id]
		if p == "" || (pool != "" && p != pool) {
			return b.cfg.Pool
		}
		pool = p
	}
	if pool == "" {
		return b.cfg.Pool
	}
	return pool
}

// SetTaskEnv replaces Config.CheckpointRoot and Config.LeaseAddr (start,
// config reload); they apply to the next starts.
func (b *Backend) SetTaskEnv(root, leaseAddr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.CheckpointRoot, b.cfg.LeaseAddr = root, leaseAddr
}

// SetTypes replaces Config.TypeNames and Config.Throughputs (config
// reload; nil tb: the embedded table); they apply from the next Observe.
func (b *Backend) SetTypes(names map[string]string, tb *throughputs.Table) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tb == nil {
		tb = throughputs.Default()
	}
	b.cfg.TypeNames, b.cfg.Throughputs = names, tb
}

// SetPools replaces Config.Pools (config reload).
func (b *Backend) SetPools(pools []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.Pools = pools
}

// SetShareGroup replaces Config.ShareGroup (config reload).
func (b *Backend) SetShareGroup(f func(vc string, opportunistic bool) (string, bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.ShareGroup = f
}

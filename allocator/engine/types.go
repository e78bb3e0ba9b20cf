// Package engine is Rondo's round-based mechanism (Gavel §3.2, Algorithm 1),
// independent of any backend. Each round a backend observes the cluster
// (a Snapshot), the engine decides (a Plan) and the backend enforces it:
//
//	Backend.Observe ─► Snapshot ─► Engine.Round ─► Plan ─► Backend.Enforce
//
// The engine recomputes the policy's allocation X on reset events (job
// arrival or completion, GPU failure or recovery), turns X into per-type
// priorities X / (fraction of time received since the last recompute),
// greedily picks jobs (or colocated pairs) per GPU type in priority order,
// and places them, keeping a job's GPUs when it stays on the same type.
// Policies are called only through policies.Solve.
package engine

import (
	"github.com/rondo-sched/rondo/policies"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// GPU is one accelerator as the backend sees it.
type GPU struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Server string `json:"server"`
	// Failed GPUs are neither counted nor placed on.
	Failed bool `json:"failed,omitempty"`
	// Cell and Index are the GPU's topology path and NVML index as the
	// device plugin publishes them ("" and 0 when unknown): cells derived
	// from topology (round.TopoCells) read them.
	Cell  string `json:"cell,omitempty"`
	Index int    `json:"index,omitempty"`
}

// Job is one active (arrived, unfinished) job.
type Job struct {
	ID          string `json:"id"`
	ScaleFactor int    `json:"scale_factor"`
	// Throughput is the whole job's steps/s at its scale factor per GPU type;
	// 0 or absent: cannot run there.
	Throughput     map[string]float64 `json:"throughput"`
	Weight         float64            `json:"weight"`
	ArrivalS       float64            `json:"arrival_s"`
	TotalSteps     float64            `json:"total_steps"`
	RemainingSteps float64            `json:"remaining_steps"`
	// DeadlineS is the SLO deadline (absolute time), 0 for none.
	DeadlineS float64 `json:"deadline_s,omitempty"`
	// ReceivedS is the cumulative time the job has been credited running
	// alone, per GPU type. Cumulative values make Observe idempotent.
	ReceivedS map[string]float64 `json:"received_s,omitempty"`
	// Elastic, when set, lets the job grow past ScaleFactor (its minimum
	// size, what the policy allocates) into GPUs left free (elastic.go).
	Elastic *Elastic `json:"elastic,omitempty"`

	// What the round needs beyond the mechanism, carried by the snapshot so
	// that no decider calls back into a backend.

	// Model is the job's model as the throughput table names it ("": none
	// named). The estimating stage matches it to the pre-profiled
	// reference jobs to estimate pairs nobody measured.
	Model string `json:"model,omitempty"`
	// VC is the job's virtual cluster ("" : the only one).
	VC string `json:"vc,omitempty"`
	// Namespace is the job's tenant (a Nomad namespace; "" : the backend
	// has none, as the simulator's traces): a VC that lists namespaces
	// admits only its namespaces' jobs (the agent's admission rule).
	Namespace string `json:"namespace,omitempty"`
	// User is who submitted it (Gandiva-fair's fair-share unit, reports).
	User string `json:"user,omitempty"`
	// Entity is the hierarchical policies' group inside the VC.
	Entity string `json:"entity,omitempty"`
	// Class says whether the job runs in its VC's quota (guaranteed, the
	// default) or opportunistically on what the VCs leave.
	Class Class `json:"class,omitempty"`
	// Started is true once the job has been started (admitted) before: a
	// start is then a resume or a migration, not an admission.
	Started bool `json:"started,omitempty"`
	// Measured is the job's isolated steps/s per GPU type as the backend
	// measured it since the previous snapshot (the mean of the progress
	// reports received meanwhile; the simulator's noisy measurement of
	// the round it ran); absent where nothing new was measured. The
	// estimating stage (allocator/round.Estimating) learns from it and
	// puts its estimate in Throughput; the engine itself never reads it.
	Measured map[string]float64 `json:"measured,omitempty"`
	// ThroughputSource says where each Throughput value comes from
	// (provenance.go: SourceMeasured, SourceEstimated, SourceTable,
	// SourceDefaulted); absent types are the table's. The engine never
	// reads it: `rondo status` shows it.
	ThroughputSource map[string]string `json:"throughput_source,omitempty"`
	// Profile names the job's CPU and memory sensitivity profile (meta
	// rondo.profile, a Synergy trace's model); "" : insensitive. Only the
	// placement stage (allocator/placement) reads it.
	Profile string `json:"profile,omitempty"`

	// What preemption that respects the work reads (preempt.go, #21);
	// all 0 when the backend does not know.

	// RunSinceS is when the job's current run began: the time it was
	// (re)started on the GPUs it holds (0: not running, or unknown). The
	// minimum runtime counts from it.
	RunSinceS float64 `json:"run_since_s,omitempty"`
	// CheckpointAtS is when the job last wrote a checkpoint (absolute
	// time; 0: unknown, taken as RunSinceS: a run starts from one). A stop
	// without notice loses the work done since.
	CheckpointAtS float64 `json:"checkpoint_at_s,omitempty"`
	// CheckpointS is how long writing a checkpoint takes the job (what a
	// notice costs it), RestoreS how long a (re)start takes until it
	// trains again (start latency and loading its checkpoint): measured
	// or reported per job, else per job type (Model).
	CheckpointS float64 `json:"checkpoint_s,omitempty"`
	RestoreS    float64 `json:"restore_s,omitempty"`
}

// Class is a job's standing towards the quotas (HiveD): guaranteed work
// runs in its VC's share; opportunistic work uses what the VCs leave and
// is preempted first. It is not Gavel's priority (the mechanism's X over
// received time) nor Nomad's job priority.
type Class string

const (
	Guaranteed    Class = ""
	Opportunistic Class = "opportunistic"
)

// Node is one machine as the backend sees it: the cell layer maps cells to
// nodes by name, pool or class.
type Node struct {
	// ID is what GPU.Server holds.
	ID    string `json:"id"`
	Name  string `json:"name"`
	Pool  string `json:"pool,omitempty"`
	Class string `json:"class,omitempty"`
	Ready bool   `json:"ready"`
	// Cores and MemGB are what the node offers tasks (after the client's
	// reservations): the placement stage hands them out; 0 when unknown.
	Cores float64 `json:"cores,omitempty"`
	MemGB float64 `json:"mem_gb,omitempty"`
}

// Elastic is a job's elastic range: it runs with ScaleFactor + k·StepGPUs
// GPUs (k ≥ 0 workers beyond its minimum), at most MaxGPUs. Throughput
// stays the minimum size's: the engine only decides, backends credit.
type Elastic struct {
	// StepGPUs is one worker's GPUs (the group's GPU count), all on one server.
	StepGPUs int `json:"step_gpus"`
	// MaxGPUs is the largest size (max workers × StepGPUs).
	MaxGPUs int `json:"max_gpus"`
	// PS, when set, makes the job a two-role elastic job (DL2's workers
	// and parameter servers): a sizing mechanism (allocator/sizer) decides
	// both counts each round; the engine's elastic step leaves it alone
	// (it runs at its ScaleFactor under the engine).
	PS *PSGroup `json:"ps,omitempty"`
	// WorkerCores are one worker's CPU cores (0: one), read by the sizer.
	WorkerCores float64 `json:"worker_cores,omitempty"`
	// Batch is the job's total batch size, split over its workers (0:
	// unknown), read by the sizer.
	Batch int `json:"batch,omitempty"`
}

// PSGroup is a two-role elastic job's parameter servers: between Min and
// Max of them, each a CPU task of Cores cores (0: one) on any server.
type PSGroup struct {
	Min   int     `json:"min"`
	Max   int     `json:"max"`
	Cores float64 `json:"cores,omitempty"`
}

// TwoRole reports whether the elastic range has parameter servers (a
// sizing mechanism's job, not the engine's elastic step's).
func (e *Elastic) TwoRole() bool { return e != nil && e.PS != nil }

// Pair is a colocation of two active jobs of equal scale factor the
// policy may plan: Throughput holds both jobs' steps/s when they share one
// GPU (per GPU of the unit) of a type, [0, 0] where they cannot.
type Pair struct {
	Jobs       [2]string             `json:"jobs"`
	Throughput map[string][2]float64 `json:"throughput"`
	// Unknown lists the shareable types on which nobody measured the
	// pair: the estimating stage (allocator/round.EstimatePairs) fills
	// them from what the pair reported, by matrix completion, or with a
	// profiling run; what it cannot fill is left out. The engine never
	// reads it.
	Unknown []string `json:"unknown,omitempty"`
	// Measured is both jobs' steps/s as they reported them while running
	// together since the previous snapshot, per type (as Job.Measured).
	Measured map[string][2]float64 `json:"measured,omitempty"`
	// ReceivedS is the cumulative time the pair has run together, per
	// type: nil until it first runs. The engine re-reads it only when the
	// snapshot's pair list changes or the pair is in Running (the only
	// pairs whose time can have grown).
	ReceivedS map[string]float64 `json:"received_s,omitempty"`
}

// Action says what a backend does with an assignment.
type Action string

const (
	// Keep: the unit keeps the GPUs it held last round (lease renewal).
	Keep Action = "keep"
	// Start: the unit (re)starts on these GPUs (new, resumed or moved).
	Start Action = "start"
)

// Assignment is one unit (a job, or two jobs sharing GPUs) on a set of GPUs
// of one type.
type Assignment struct {
	Jobs     []string `json:"jobs"`
	Type     string   `json:"type"`
	GPUs     []string `json:"gpus"`
	Servers  []string `json:"servers"`
	Action   Action   `json:"action,omitempty"`
	Priority float64  `json:"priority"`
	// PS is a two-role elastic job's parameter servers this round and
	// PSServers the server of each (Elastic.PS; 0 and nil otherwise).
	PS        int      `json:"ps,omitempty"`
	PSServers []string `json:"ps_servers,omitempty"`
	// Resources are the CPU cores and memory of each of Jobs (same order),
	// when a placement stage gave them (allocator/placement); nil otherwise.
	// A job on several servers holds them in proportion to its GPUs there.
	Resources []Resources `json:"resources,omitempty"`
	// Checkpoint and Why are what the engine's preemption rules
	// (preempt.go) decided for the unit: checkpoint now, it stops next
	// round (JobIntent.Checkpoint), and the reason its intents give instead
	// of the usual one (Pinned, Noticed, Backfills; nil: the usual).
	// Annotate reads them, so the reasons survive the VC deciders' merge.
	Checkpoint bool    `json:"checkpoint,omitempty"`
	Why        *Reason `json:"-"`
}

// Resources are a job's CPU cores and memory, over all its servers.
type Resources struct {
	Cores float64 `json:"cores"`
	MemGB float64 `json:"mem_gb"`
}

// Snapshot is what a backend observed at the start of a round.
type Snapshot struct {
	TimeS float64 `json:"time_s"`
	GPUs  []GPU   `json:"gpus"`
	// Jobs in arrival order.
	Jobs []Job `json:"jobs"`
	// Pairs are only read by packing policies.
	Pairs []Pair `json:"pairs,omitempty"`
	// Running is the placement in force (last round's assignments).
	Running []Assignment `json:"running,omitempty"`
	// Nodes are the machines the GPUs' servers name, when the backend has
	// nodes (the simulator's servers need none).
	Nodes []Node `json:"nodes,omitempty"`
	// Rejected are jobs the backend will not hand to the round (bad rondo
	// meta, a VC the config does not declare): status only, the round
	// never reads them.
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Rejection is a job Rondo will not schedule as submitted, and why: the
// bad key and value, the unknown VC.
type Rejection struct {
	Job       string `json:"job"`
	Namespace string `json:"namespace,omitempty"`
	VC        string `json:"vc,omitempty"`
	User      string `json:"user,omitempty"`
	Reason    string `json:"reason"`
}

// Waiting is why an active job the plan does not run waits (waiting.go):
// the round's own reason, the job's place in its VC's queue (1: the next to
// run) and its round priority (the best over the GPU types it can use).
type Waiting struct {
	Job      string  `json:"job"`
	VC       string  `json:"vc,omitempty"`
	Reason   Reason  `json:"reason"`
	Position int     `json:"position"`
	Priority float64 `json:"priority"`
}

// Plan is the engine's decision for one round.
type Plan struct {
	TimeS       float64      `json:"time_s"`
	Assignments []Assignment `json:"assignments"`
	// Suspend lists active jobs that were running and are not in this round.
	Suspend []string `json:"suspend,omitempty"`
	// Intents say, per job the plan touches or keeps, what happens to it
	// and why (intents.go): backends carry them out, never guess them.
	Intents []JobIntent `json:"intents,omitempty"`
	// Recomputed is true when the allocation was recomputed this round.
	Recomputed bool                 `json:"recomputed"`
	SolveMS    float64              `json:"solve_ms,omitempty"`
	Allocation *policies.Allocation `json:"-"`
	// Users is what user-level mechanisms (Gandiva-fair, allocator/fair)
	// planned per VC: shares, trades, refused jobs. Status only: backends
	// ignore it.
	Users []UserShares `json:"users,omitempty"`
	// Reservations are the GPUs held for waiting gangs (Config.ReserveAfterS,
	// preempt.go): status, and what the backends leave idle or backfill.
	Reservations []Reservation `json:"reservations,omitempty"`
	// Waiting says, for each active job the plan neither runs nor stops,
	// why it waits (Explain, waiting.go). Status only: backends ignore it.
	Waiting []Waiting `json:"waiting,omitempty"`
}

// Reservation is a set of GPUs held for one waiting job: it starts on them
// at StartS (once the jobs inside their minimum runtime there may be
// stopped); until then only jobs that finish, or may be stopped, by then
// backfill them.
type Reservation struct {
	Job    string   `json:"job"`
	VC     string   `json:"vc,omitempty"`
	Type   string   `json:"type"`
	GPUs   []string `json:"gpus"`
	StartS float64  `json:"start_s"`
	// SinceS is when the reservation was made.
	SinceS float64 `json:"since_s"`
}

// UserShares is one Gandiva-fair VC's users as its mechanism planned them.
type UserShares struct {
	// VC is set by the VC deciders ("" : the only one).
	VC    string      `json:"vc,omitempty"`
	Users []UserShare `json:"users"`
	// Trades are the exchanges of share between GPU generations in force.
	Trades []fairshare.Trade `json:"trades,omitempty"`
	// Refused are jobs the mechanism never schedules, with the reason.
	Refused map[string]string `json:"refused,omitempty"`
	// Migrations counts the jobs moved for load balance so far.
	Migrations int `json:"migrations,omitempty"`
}

// UserShare is one user's tickets and shares, in GPUs per type.
type UserShare struct {
	User    string `json:"user"`
	Tickets int    `json:"tickets"`
	// FairShare is before trading, Share after.
	FairShare map[string]float64 `json:"fair_share"`
	Share     map[string]float64 `json:"share"`
	// ReceivedGPUS is the GPU time its active jobs received, GPU-seconds
	// per type.
	ReceivedGPUS map[string]float64 `json:"received_gpu_s,omitempty"`
}

// Package sim is the simulator backend: it drives the engine with virtual
// time over a trace, using measured throughputs as the ground truth, and
// reports JCT, makespan, utilization and the other metrics of Gavel's
// evaluation.
//
// A round runs each placed unit for min(⌊T·round⌋, remaining) steps; the
// round ends at the latest finish among its micro-tasks; arrivals join at
// round boundaries; when nothing runs the clock jumps to the next arrival
// (or fault event: faults.go).
// JCT is the finish of a job's last step minus its exact arrival time.
package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/faults"
	"github.com/rondo-sched/rondo/allocator/ledger"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// Cluster is the simulated cluster: GPUs per type and GPUs per server.
type Cluster struct {
	Types          map[string]int
	GPUsPerServer  int
	PricePerHourUS map[string]float64
}

// ParseCluster reads "v100=36,p100=36,k80=36".
func ParseCluster(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(k) == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("cluster %q: want type=count[,type=count...]", s)
		}
		out[strings.TrimSpace(k)] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %q: no GPU types", s)
	}
	return out, nil
}

// DefaultPrices are per-GPU on-demand dollars per hour used for the cost
// metric (AWS p3/p2-era list prices; Gavel's cost experiments use
// comparable figures).
var DefaultPrices = map[string]float64{"v100": 3.06, "p100": 1.46, "k80": 0.90}

// Source yields jobs in arrival order; ok is false when the trace ends.
type Source interface {
	Next() (trace.Job, bool, error)
}

// SliceSource replays a fixed list of jobs (sorted by arrival).
type SliceSource struct {
	Jobs []trace.Job
	i    int
}

func (s *SliceSource) Next() (trace.Job, bool, error) {
	if s.i >= len(s.Jobs) {
		return trace.Job{}, false, nil
	}
	s.i++
	return s.Jobs[s.i-1], true, nil
}

// Generator draws a synthetic trace one job at a time (trace.Generator,
// Gavel's; trace.SynergyGenerator, Synergy's).
type Generator interface {
	Next() (trace.Job, error)
}

// GeneratorSource draws an endless synthetic trace (or Limit jobs, if set).
type GeneratorSource struct {
	G     Generator
	Limit int
	n     int
}

func (s *GeneratorSource) Next() (trace.Job, bool, error) {
	if s.Limit > 0 && s.n >= s.Limit {
		return trace.Job{}, false, nil
	}
	s.n++
	j, err := s.G.Next()
	return j, err == nil, err
}

// Options configure one simulation.
type Options struct {
	Cluster     Cluster
	Engine      engine.Config
	Throughputs *throughputs.Table
	// Window is the half-open range of job ids measured; the run ends when
	// all of them finished. Zero: every job in the trace.
	WindowStart, WindowEnd int
	// Ideal realizes the allocation fluidly (X·Δt·T steps until the next
	// arrival) instead of running the round-based mechanism.
	Ideal bool
	// PreemptionCostS is lost from the round of a job that (re)starts after
	// having run before (checkpoint + restore), default 0.
	PreemptionCostS float64
	// StartCostS is lost from the round of every job started on GPUs it
	// did not hold last round, its first start included: a real cluster's
	// latency from the round's start to the task running (stopping the
	// suspended jobs first, scheduling, starting the process). Default 0.
	// The larger of the two costs applies to a restart.
	StartCostS float64
	// Costs, when set, are the restart costs per job type (costs.go,
	// `--preemption-cost realistic|FILE`) instead of PreemptionCostS
	// (which must then be 0): a first start loses the job's StartS, a
	// resume, migration or retune its RestoreS (StartCostS a floor of
	// both); a stop without notice loses the work since the job's last
	// checkpoint; a keep with a notice (JobIntent.Checkpoint) checkpoints
	// at the round's end. The snapshot reports each job's run, last
	// checkpoint and costs. Not with Ideal nor DL2.
	Costs *Costs
	// MaxTimeS stops a run that does not finish (0: no limit).
	MaxTimeS float64
	// MaxActive stops a run once more jobs than this are active at once, a
	// sign the input rate exceeds what the policy sustains (0: no limit).
	MaxActive int
	// Progress, if set, is called after every round.
	Progress func(now float64, rounds, active, done int)
	// Faults, if set, fails and recovers GPUs at the schedule's times
	// (faults.go); its targets name GPUs and servers per type as the
	// cluster is laid out. Not with Ideal.
	Faults *faults.Schedule
	// Nodes, when set, lay the cluster out by node instead of
	// Cluster.Types (vc.go): the snapshot lists them and fault targets
	// name them (faults.ByNode: node:<name>, gpu:<name>:<i>).
	Nodes []Node
	// Decider, when set, decides every round instead of one engine of
	// Engine.Policy (VC mode, vc.go: round.Quota or round.Cells, built
	// as the agent builds them); Engine.RoundS is still the round length
	// and Engine.Policy only names the run. Each job's VC and class come
	// from the trace (trace.Job.VC, Opportunistic). Not with Ideal.
	Decider loop.Decider
	// Pairs offers the Decider colocated pairs (space sharing: every two
	// active jobs of equal scale factor the table measured together); the
	// per-VC deciders give each VC's engine its jobs' pairs when its
	// policy packs. A single engine gets them when its policy packs.
	Pairs bool
	// HiddenPairs, when set, is the policy's view of pair throughputs: a
	// hidden pair's estimate (estimator.HidePairs) instead of the table's;
	// pairs still run at the table's.
	HiddenPairs *estimator.Hidden
	// MeasureNoise, when > 0, makes jobs report measured throughputs with
	// lognormal noise of this sigma, learned by the estimating stage
	// (measure.go); 0 decides on the true throughputs. Not with Ideal.
	MeasureNoise float64
	// RoundGrid puts rounds on the grid k × Engine.RoundS: every round
	// lasts the full round length even when all its micro-tasks finish
	// early, and an idle cluster waits for the next grid point after an
	// arrival (busy.go). The VC comparison uses it so that a VC's rounds
	// fall at the same times on the shared cluster and on its private one.
	RoundGrid bool
	// GridOriginS shifts the grid to GridOriginS + k × Engine.RoundS
	// (Synergy's reference replays a static trace from t = 1 s).
	GridOriginS float64
	// FinishAtRoundEnd: a job that completes during a round finishes at
	// the round's end, holding its GPUs until then (Synergy's reference:
	// leases end with the round). Needs RoundGrid.
	FinishAtRoundEnd bool
	// BusyWindowS, when positive, also measures busy GPU time per class
	// (guaranteed, opportunistic) over the run and over [0, BusyWindowS]
	// (Result.ClassBusy, busy.go).
	BusyWindowS float64
	// Placement, when set, gives jobs cores and memory each round
	// (placement.go); their profiles set how fast they run.
	Placement *Placement
	// DL2, when set, runs two-role elastic jobs (trace.Job.PSMax > 0) in
	// DL2's time model (dl2.go); rounds are then on the grid (RoundGrid).
	// A trace with such jobs needs it.
	DL2 *DL2
	// Explain tells why the jobs each plan does not run wait
	// (loop.Round.Explain, engine.ExplainQuotas) and counts them by reason
	// (Result.WaitingReasons). Off by default: it costs a few percent of a
	// round's time (allocator/sim/README.md).
	Explain bool
	// observe, if set (tests), sees the simulator at the start of every
	// step: s.running is the round in progress.
	observe func(*simulator)
}

type jobState struct {
	tj trace.Job
	// compatSpeed is the speed the policy orders the job by in
	// --synergy-compat TUNE/GREEDY runs (placement.go); 0: its profile's.
	compatSpeed float64
	id          string
	tput        map[string]float64
	remaining   float64
	received    ledger.Account // the ledger's account of the job
	started     float64
	ran         bool
	finish      float64
	done        bool
	isoTime     float64
	isoN        int       // isoTput's last n (0: none yet)
	isoV        float64   // isoTput(js, isoN): a job's rates and the cluster are fixed
	isoRates    []float64 // its rates in s.types' order (isoTputOf's)
	lastGPUs    string
	cost        float64
	partners    []*pairState // pairs with later active jobs, in arrival order
	// measured is what the job reported in the last round (MeasureNoise),
	// for the next snapshot.
	measured map[string]float64
	// dl2Done is a two-role job's epochs trained (Options.DL2, dl2.go).
	dl2Done float64
	// heldS is the time the job held GPUs (its micro-tasks' spans).
	heldS float64
	// Restart costs (Options.Costs, costs.go): the job's row; holding: it
	// runs on GPUs (last round's micro-task, not cut); runSince: the
	// begin of the round it (re)started on them; ckptAt: its last
	// checkpoint; since*: its training since then (seconds, steps, GPU
	// seconds, isolated seconds), what a stop without notice loses.
	jc                                       JobCosts
	holding                                  bool
	runSince, ckptAt                         float64
	sinceS, sinceSteps, sinceGPUS, sinceIsoS float64
}

type micro struct {
	begin   float64
	iso     []float64
	jobs    []*jobState
	typ     string
	gpus    []string
	steps   []float64
	finish  float64
	pairKey string
	cost    float64    // seconds lost to start/preemption cost
	tput    [2]float64 // per job, steps/s
	// dl2: a two-role job's run in DL2's time model (dl2.go); dl2End: it
	// finishes in it.
	dl2, dl2End bool
	// ckpt, per job: seconds of checkpoint written at the end on notice
	// (Options.Costs; 0: none); cut: a GPU failure cut the micro-task.
	ckpt [2]float64
	cut  bool
}

// JobResult is one job's outcome.
type JobResult struct {
	ID          int     `json:"id"`
	Model       string  `json:"model"`
	ScaleFactor int     `json:"scale_factor"`
	Priority    float64 `json:"priority"`
	ArrivalS    float64 `json:"arrival_s"`
	StartS      float64 `json:"start_s"`
	FinishS     float64 `json:"finish_s"`
	JCTS        float64 `json:"jct_s"`
	TotalSteps  float64 `json:"total_steps"`
	Rho         float64 `json:"rho"`
	CostUSD     float64 `json:"cost_usd"`
	InWindow    bool    `json:"in_window"`
	Done        bool    `json:"done"`
}

// Result holds the run's metrics; JSON names are the CLI's contract.
type Result struct {
	Policy       string  `json:"policy"`
	AvgJCTS      float64 `json:"avg_jct_s"`
	P50JCTS      float64 `json:"p50_jct_s"`
	P99JCTS      float64 `json:"p99_jct_s"`
	MakespanS    float64 `json:"makespan_s"`
	Utilization  float64 `json:"utilization"`
	JobsInWindow int     `json:"jobs_in_window"`
	JobsDone     int     `json:"jobs_done"`
	Rounds       int     `json:"rounds"`
	Recomputes   int     `json:"recomputes"`
	Preemptions  int     `json:"preemptions"`
	// Retunes are restarts of running jobs with other cores or memory
	// (placement; counted in Preemptions too, except in Synergy-compat runs).
	Retunes       int     `json:"retunes,omitempty"`
	SolveMSP50    float64 `json:"solve_ms_p50"`
	SolveMSMax    float64 `json:"solve_ms_max"`
	WallS         float64 `json:"wall_s"`
	FTFRhoAvg     float64 `json:"ftf_rho_avg"`
	FTFRhoMax     float64 `json:"ftf_rho_max"`
	FTFRhoFracGt1 float64 `json:"ftf_rho_frac_gt_1"`
	CostUSD       float64 `json:"cost_usd"`
	SLOViolations *int    `json:"slo_violations,omitempty"`
	// GPUFailures counts GPUs that went from healthy to failed and
	// FaultInterruptions the micro-tasks cut by a failure (--faults only).
	GPUFailures        int     `json:"gpu_failures,omitempty"`
	FaultInterruptions int     `json:"fault_interruptions,omitempty"`
	EndS               float64 `json:"end_s"`
	// PeakActive is the most jobs active at once (arrived, unfinished).
	PeakActive int `json:"peak_active"`
	// EstimateErrorMean is the mean relative error of the estimated
	// throughputs the decider used, over every round, job and measured
	// type (--measure-noise only).
	EstimateErrorMean float64 `json:"estimate_error_mean,omitempty"`
	// HiddenPairs is how many unordered pairs Options.HiddenPairs hid
	// (over all GPU types) and HiddenPairMRE the mean relative error of
	// their estimates (normalized throughputs).
	HiddenPairs   int     `json:"hidden_pairs,omitempty"`
	HiddenPairMRE float64 `json:"hidden_pair_mre,omitempty"`
	Finished      bool    `json:"finished"`
	// WaitingReasons counts, per waiting reason (engine.Reason.WaitKey:
	// reserved, unschedulable, over_quota, gang, priority), the job-rounds
	// that waited for it (Options.Explain only).
	WaitingReasons map[string]int `json:"waiting_reasons,omitempty"`
	// VCs are the per-VC metrics of guaranteed jobs and Opportunistic those
	// of opportunistic jobs (VC mode only, vc.go).
	VCs           []VCResult `json:"vcs,omitempty"`
	Opportunistic *VCResult  `json:"opportunistic,omitempty"`
	// Users are per-user metrics, when the trace names users (trace.Job.User).
	Users []UserResult `json:"users,omitempty"`
	// ClassBusy is busy GPU time per class (Options.BusyWindowS only).
	ClassBusy *ClassBusy `json:"class_busy,omitempty"`
	// Preemption that respects the work (#21), only with Options.Costs or
	// the engine's preemption options (costs.go, preemptionResult):
	// LostGPUS is GPU-seconds lost to restarts (work rolled back by stops
	// without notice, restore time of resumes, migrations and retunes,
	// checkpoints on notice; each × the job's GPUs); Restarts the
	// resumes, migrations and retunes, Migrations the migrations alone
	// (moves to other GPUs: also in Preemptions); LargeGangWait* the waiting time
	// (JCT − time holding GPUs) of measured jobs of scale factor ≥ 4;
	// Noticed the checkpoints written on notice; Reserved the jobs the
	// plans reserved GPUs for.
	LostGPUS          float64     `json:"lost_gpu_s,omitempty"`
	Restarts          int         `json:"restarts,omitempty"`
	Migrations        int         `json:"migrations,omitempty"`
	LargeGangWaitP99S float64     `json:"large_gang_wait_p99_s,omitempty"`
	LargeGangWaitAvgS float64     `json:"large_gang_wait_avg_s,omitempty"`
	Noticed           int         `json:"noticed,omitempty"`
	Reserved          int         `json:"reserved,omitempty"`
	Jobs              []JobResult `json:"-"`
}

// Percentile is numpy's default (linear interpolation) percentile.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

func sortedCopy(v []float64) []float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c
}

func (m micro) start() float64 { return m.begin }

// Package trace makes and reads job traces for the simulator: Gavel's
// continuous and static synthetic traces (bit-for-bit the reference's, through
// a port of CPython's random.Random), Gavel's physical-cluster trace files,
// and Rondo's own JSON-lines format.
package trace

import (
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/pyrand"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// Job is one trace entry. IDs are 0, 1, 2, ... in arrival order.
type Job struct {
	ID          int     `json:"id"`
	Model       string  `json:"model"`
	ScaleFactor int     `json:"scale_factor"`
	TotalSteps  float64 `json:"total_steps"`
	// DurationS is the generated run time on an isolated V100 (0 when the
	// trace does not say).
	DurationS float64 `json:"duration_s,omitempty"`
	// Priority is the job's weight (1 by default, 5 for Gavel's
	// high-priority jobs).
	Priority float64 `json:"priority"`
	// SLOFactor is Gavel's SLO as a multiple of DurationS (0: none); the
	// deadline is ArrivalS + SLOFactor*DurationS.
	SLOFactor float64 `json:"slo_factor,omitempty"`
	ArrivalS  float64 `json:"arrival_s"`
	// ElasticMaxGPUs > ScaleFactor makes the job elastic: it may grow, one
	// worker of ElasticStepGPUs GPUs (default 1) at a time, into GPUs left
	// free, up to this many (JSON-lines traces only).
	ElasticMaxGPUs  int `json:"elastic_max_gpus,omitempty"`
	ElasticStepGPUs int `json:"elastic_step_gpus,omitempty"`
	// PSMin..PSMax > 0 make the job a two-role elastic job (DL2's: workers
	// of ElasticStepGPUs GPUs and WorkerCores cores, ScaleFactor /
	// ElasticStepGPUs to ElasticMaxGPUs / ElasticStepGPUs of them, and
	// parameter servers of PSCores cores), sized by allocator/sizer;
	// TotalSteps are then epochs and Batch its total batch size
	// (sim.DL2Jobs makes them from a DL2 trace).
	PSMin       int     `json:"ps_min,omitempty"`
	PSMax       int     `json:"ps_max,omitempty"`
	PSCores     float64 `json:"ps_cores,omitempty"`
	WorkerCores float64 `json:"worker_cores,omitempty"`
	Batch       int     `json:"batch,omitempty"`
	// VC is the job's virtual cluster and Opportunistic its class (runs on
	// what the VCs leave, preempted first) under `rondo simulate
	// --vc-config` (JSON-lines traces only; otherwise drawn by the CLI).
	VC            string `json:"vc,omitempty"`
	Opportunistic bool   `json:"opportunistic,omitempty"`
	// User is who submitted the job (Gandiva-fair's fair-share unit;
	// JSON-lines traces only): the simulator's per-user metrics group by
	// it, and a gandiva_fair VC shares its GPUs between users.
	User string `json:"user,omitempty"`
	// Profile names the job's CPU/memory sensitivity profile
	// (allocator/synergy; a Synergy trace's model), "" for none.
	Profile string `json:"profile,omitempty"`
	// StepsPerS, when set, is the job's isolated steps/s per GPU type,
	// instead of the throughput table's for Model (Synergy traces: one
	// iteration per iter_time_s at the proportional share, on v100).
	StepsPerS map[string]float64 `json:"steps_per_s,omitempty"`

	// Physical-cluster trace fields, carried through unchanged.
	Command      string `json:"command,omitempty"`
	WorkDir      string `json:"work_dir,omitempty"`
	NumStepsArg  string `json:"num_steps_arg,omitempty"`
	NeedsDataDir bool   `json:"needs_data_dir,omitempty"`
}

// Key is the job's throughput-table key.
func (j Job) Key() throughputs.Key {
	return throughputs.Key{Model: j.Model, ScaleFactor: j.ScaleFactor}
}

// Options configure Gavel's synthetic trace.
type Options struct {
	Seed int64
	// Rate is λ in jobs per hour; 0 makes a static trace (every job arrives
	// at t=0, as Gavel's lam=0).
	Rate          float64
	MultiGPU      bool
	MultiPriority bool
	// SLOs draws an SLO factor per job from a generator seeded Seed+6.
	SLOs bool
	// Throughputs is the table steps are computed from (default: embedded).
	Throughputs *throughputs.Table
	// ReferenceType is the GPU type durations refer to (default "v100").
	ReferenceType string
}

// Generator yields Gavel's synthetic jobs one at a time, in arrival order.
//
// Randomness, as the reference draws it: per job, from one generator seeded
// Seed+2: the scale-factor uniform(0,1) (drawn even when MultiGPU is off),
// random() for long vs short duration, uniform for the log10-duration
// exponent, choice over Templates until one supports the scale factor, and
// uniform(0,1) for the priority only when MultiPriority is on. Arrivals: the
// first job at t=0, each later gap −ln(1−U)/(1/lam) with lam = 3600/Rate and U
// from a generator seeded Seed+3, drawn as each job is added.
type Generator struct {
	o       Options
	jobRNG  *pyrand.Random
	arrRNG  *pyrand.Random
	sloRNG  *pyrand.Random
	next    int
	arrival float64
}

// NewGenerator checks the options and starts a trace.
func NewGenerator(o Options) (*Generator, error) {
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return nil, fmt.Errorf("trace: rate must be a non-negative number of jobs per hour, got %v", o.Rate)
	}
	if o.Throughputs == nil {
		o.Throughputs = throughputs.Default()
	}
	if o.ReferenceType == "" {
		o.ReferenceType = "v100"
	}
	g := &Generator{o: o, jobRNG: pyrand.New(o.Seed + 2), arrRNG: pyrand.New(o.Seed + 3)}
	if o.SLOs {
		g.sloRNG = pyrand.New(o.Seed + 6)
	}
	return g, nil
}

// ScaleFactorFromUniform maps the reference's uniform(0,1) draw to a scale
// factor: [0.7, 0.8] → 2, (0.8, 0.95] → 4, (0.95, 1) → 8, else 1 (the
// reference's chain of inclusive comparisons; the boundaries have
// probability zero anyway). Probabilities 0.70/0.10/0.15/0.05.
func ScaleFactorFromUniform(r float64) int {
	switch {
	case 0.7 <= r && r <= 0.8:
		return 2
	case 0.8 <= r && r <= 0.95:
		return 4
	case 0.95 <= r:
		return 8
	}
	return 1
}

// Next returns the next job.
func (g *Generator) Next() (Job, error) {
	rng := g.jobRNG
	sf := ScaleFactorFromUniform(rng.Uniform(0, 1))
	// Duration in seconds: with probability 0.8 (random() < 0.8) 10^U(1.5,3)
	// minutes, else 10^U(3,4) minutes.
	var minutes float64
	if rng.Random() >= 0.8 {
		minutes = pow10(rng.Uniform(3, 4))
	} else {
		minutes = pow10(rng.Uniform(1.5, 3))
	}
	duration := 60 * minutes
	if !g.o.MultiGPU {
		sf = 1
	}
	var tpl Template
	for {
		tpl = Templates[rng.Choice(len(Templates))]
		if sf == 1 || tpl.Distributed {
			break
		}
	}
	key := throughputs.Key{Model: tpl.Model, ScaleFactor: sf}
	iso, ok := g.o.Throughputs.Isolated(key, g.o.ReferenceType)
	if !ok || iso <= 0 {
		return Job{}, fmt.Errorf("trace: no %s throughput for %v", g.o.ReferenceType, key)
	}
	j := Job{ID: g.next, Model: tpl.Model, ScaleFactor: sf, DurationS: duration,
		TotalSteps: duration * iso, Priority: 1, ArrivalS: g.arrival}
	if g.o.MultiPriority {
		if r := rng.Uniform(0, 1); 0 <= r && r <= 0.2 {
			j.Priority = 5
		}
	}
	if g.sloRNG != nil {
		switch r := g.sloRNG.Uniform(0, 1); {
		case r < 0.33:
			j.SLOFactor = 1.2
		case r < 0.67:
			j.SLOFactor = 2
		default:
			j.SLOFactor = 10
		}
	}
	g.next++
	if g.o.Rate > 0 {
		lam := 3600.0 / g.o.Rate
		g.arrival += -math.Log(1.0-g.arrRNG.Random()) / (1.0 / lam)
	}
	return j, nil
}

// Generate returns the first n jobs of a synthetic trace.
func Generate(o Options, n int) ([]Job, error) {
	g, err := NewGenerator(o)
	if err != nil {
		return nil, err
	}
	return take(g, n)
}

// take returns the next n jobs of a generator (Generator,
// SynergyGenerator), stopping at its first error.
func take(g interface{ Next() (Job, error) }, n int) ([]Job, error) {
	out := make([]Job, 0, n)
	for range n {
		j, err := g.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

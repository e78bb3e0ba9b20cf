package round

import (
	"maps"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// Estimating is the round's first stage, "estimate throughputs": it feeds
// each job's measurements (engine.Job.Measured, one sample per type per
// snapshot) to the online estimator and puts the estimate in place of the
// job's profiled Throughput for that type before Next decides. The
// estimator weighs the n-th sample of a (job, type) by max(1/n, alpha): the
// mean of the first measurements, then an exponentially weighted mean. A
// type the job was never measured on keeps its profiled value (or the
// estimator's prior, when it has one), unless the backend defaulted it (no
// table knows the job there): then it is estimated from the job's known
// types and other jobs' ratios between types (completeTypes). The engine
// stays pure: it decides on the Throughput it is given.
//
// The snapshot is amended in place (its maps cloned first, as a backend may
// share them), so that what records the round sees what was decided on.
// Estimating passes the history (agent.HistoryKeeper) and reset
// (agent.Resetter) of Next through, and keeps Online across deciders: a new
// decider wrapped with the same estimator carries on from what it learned.
//
// With Pairs set it then tells the policy what is known of the colocated
// pairs the backend offers (PairEstimates: learned from the pairs' reports,
// completed, or profiled), asking Next to recompute when a profiling run
// changed what is known.
type Estimating struct {
	Next   loop.Decider
	Online *estimator.Online
	Pairs  *PairEstimates
	// Table, when set, is the throughput table the backend read: its
	// profiled configurations join the completion of the types a job's
	// table entry lacks (completeTypes) with their ratios between types.
	Table  *throughputs.Table
	rows   map[string]map[string]float64 // tableRows(rowsOf)
	rowsOf *throughputs.Table
	// Before, when set, amends the snapshot's measurements first: the
	// placement stage (placement.Stage.Normalize) takes out the speed-up a
	// job's cores and memory gave it, so throughputs stay per GPU type.
	Before func(*engine.Snapshot)
}

// Round estimates the snapshot's throughputs, then lets Next decide.
func (e *Estimating) Round(s *engine.Snapshot) (*engine.Plan, error) {
	if e.Before != nil {
		e.Before(s)
	}
	if e.Table != e.rowsOf {
		e.rows, e.rowsOf = nil, e.Table
		if e.Table != nil {
			e.rows = tableRows(e.Table)
		}
	}
	estimate(e.Online, s, e.rows)
	if e.Pairs != nil && e.Pairs.Estimate(s, e.Online) {
		e.RequestReset()
	}
	return e.Next.Round(s)
}

// Estimate feeds s's measurements to o, replaces the jobs' throughputs by
// o's estimates where o has one, and completes those the backend
// defaulted (completeTypes), marking each value's source.
func Estimate(o *estimator.Online, s *engine.Snapshot) { estimate(o, s, nil) }

// estimate is Estimate with a table's rows in the completion.
func estimate(o *estimator.Online, s *engine.Snapshot, table map[string]map[string]float64) {
	defer completeTypes(o, s, table)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		for typ, v := range j.Measured {
			o.Observe(j.ID, typ, v)
		}
		copied := false
		set := func(typ string) {
			v, ok := o.Isolated(j.ID, typ)
			if !ok || v <= 0 || v == j.Throughput[typ] {
				return
			}
			if !copied { // the backend may share the map
				j.Throughput, copied = maps.Clone(j.Throughput), true
				if j.Throughput == nil {
					j.Throughput = map[string]float64{}
				}
			}
			j.Throughput[typ] = v
		}
		for typ := range j.Throughput {
			set(typ)
		}
		// Types the backend's table lacks but the job was measured on
		// (now or in an earlier round).
		for _, typ := range o.Types(j.ID) {
			if _, ok := j.Throughput[typ]; !ok {
				set(typ)
			}
		}
	}
}

// RestoreMeasured gives the estimator a measurement kept from before a
// restart (the agent's state; agent.MeasurementRestorer) as one sample,
// unless it already learned that job's throughput on that type.
func (e *Estimating) RestoreMeasured(job, gpuType string, stepsPerSec float64) {
	if stepsPerSec > 0 && e.Online.Samples(job, gpuType) == 0 {
		e.Online.Observe(job, gpuType, stepsPerSec)
	}
}

// MarshalHistory, UnmarshalHistory and RequestReset pass through to Next
// (agent.HistoryKeeper, agent.Resetter), where it implements them.
func (e *Estimating) MarshalHistory() ([]byte, error) { return loop.MarshalHistory(e.Next) }

func (e *Estimating) UnmarshalHistory(h []byte) error { return loop.UnmarshalHistory(e.Next, h) }

func (e *Estimating) RequestReset() { loop.RequestReset(e.Next) }

// Quotas are Next's VC quotas (loop.QuotasOf).
func (e *Estimating) Quotas() engine.Quotas { return loop.QuotasOf(e.Next) }

package engine

// Where a job's throughput on a GPU type comes from (Job.ThroughputSource).
const (
	// SourceMeasured: the job reported it (the lease API), learned by the
	// round's estimating stage.
	SourceMeasured = "measured"
	// SourceEstimated: completed from the job's known throughputs on
	// other types and other jobs' ratios between types
	// (allocator/estimator.CompleteTypes).
	SourceEstimated = "estimated"
	// SourceTable: the throughput table (Gavel's, or the operator's file
	// over it) for the job's model.
	SourceTable = "table"
	// SourceDefaulted: nothing is known; a stated default (1 for a job
	// with nothing known, else CompleteTypes' fallback).
	SourceDefaulted = "defaulted"
)

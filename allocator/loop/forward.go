package loop

import "github.com/rondo-sched/rondo/allocator/engine"

// A stage that wraps a decider (round.Estimating, placement.Stage) passes
// the decider's optional interfaces through: its history
// (agent.HistoryKeeper), resets (agent.Resetter) and VC quotas (Explain). These do it for any
// Next, a no-op where Next does not implement them.

// MarshalHistory is next's history, nil when it keeps none.
func MarshalHistory(next Decider) ([]byte, error) {
	if hk, ok := next.(interface{ MarshalHistory() ([]byte, error) }); ok {
		return hk.MarshalHistory()
	}
	return nil, nil
}

// UnmarshalHistory restores next's history, when it keeps one.
func UnmarshalHistory(next Decider, h []byte) error {
	if hk, ok := next.(interface{ UnmarshalHistory([]byte) error }); ok {
		return hk.UnmarshalHistory(h)
	}
	return nil
}

// RequestReset passes a reset on to next, when it takes one.
func RequestReset(next Decider) {
	if r, ok := next.(interface{ RequestReset() }); ok {
		r.RequestReset()
	}
}

// QuotasOf is next's VCs' quotas (engine.Quotas: round.Quota's shares,
// round.Cells' cells), nil when it has no VCs or does not tell them.
func QuotasOf(next Decider) engine.Quotas {
	if q, ok := next.(interface{ Quotas() engine.Quotas }); ok {
		return q.Quotas()
	}
	return nil
}

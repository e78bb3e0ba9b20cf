package loop

// A stage that wraps a decider (round.Estimating, placement.Stage) passes
// the decider's optional interfaces through: its history
// (agent.HistoryKeeper) and resets (agent.Resetter). These do it for any
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

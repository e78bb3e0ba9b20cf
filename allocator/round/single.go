package round

import "github.com/rondo-sched/rondo/allocator/engine"

// Single runs one mechanism other than the engine (Gandiva-fair's) on the
// whole cluster, as the engine runs alone when the config declares no
// shares or cells: its plan gets the intents the engine gives its own.
// History and reset pass through.
type Single struct {
	Mechanism Mechanism
}

// Round decides one round.
func (d *Single) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p, err := d.Mechanism.Round(s)
	if err != nil {
		return nil, err
	}
	engine.Annotate(s, p, nil)
	return p, nil
}

// RequestReset passes the reset on.
func (d *Single) RequestReset() { d.Mechanism.RequestReset() }

// MarshalHistory is the mechanism's history (none: nil).
func (d *Single) MarshalHistory() ([]byte, error) {
	if h, ok := d.Mechanism.(historyKeeper); ok {
		return h.MarshalHistory()
	}
	return nil, nil
}

// UnmarshalHistory restores it.
func (d *Single) UnmarshalHistory(b []byte) error {
	if h, ok := d.Mechanism.(historyKeeper); ok {
		return h.UnmarshalHistory(b)
	}
	return nil
}

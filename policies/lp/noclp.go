//go:build noclp

package lp

// The solver's entry points in a build without Clp and Cbc (-tags noclp):
// every solve returns ErrNoClp.

const available = false

// Solve returns ErrNoClp.
func (m *Model) Solve() (*Solution, error) { return nil, ErrNoClp }

// SolveMIP returns ErrNoClp.
func (m *Model) SolveMIP(MIPOptions) (*Solution, error) { return nil, ErrNoClp }

// Live is a loaded model; without Clp none can be made.
type Live struct{ nc int }

// Load returns ErrNoClp.
func (m *Model) Load() (*Live, error) { return nil, ErrNoClp }

// NumVars is the number of variables.
func (l *Live) NumVars() int { return l.nc }

// Close does nothing.
func (l *Live) Close() {}

// AddColumns returns ErrNoClp.
func (l *Live) AddColumns([]Column) error { return ErrNoClp }

// Solve returns ErrNoClp.
func (l *Live) Solve() (*Solution, error) { return nil, ErrNoClp }

// Basis returns an empty basis.
func (l *Live) Basis() Basis { return Basis{} }

// SetBasis returns ErrNoClp.
func (l *Live) SetBasis(Basis) error { return ErrNoClp }

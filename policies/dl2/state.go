package dl2

import "math"

// The policy network's input (DL2 §4.1): per job, up to a window of J jobs
// in arrival order (zero-padded), its type one-hot, slots run, remaining
// epochs, dominant share so far this slot, workers and PSs this slot.
// Jobs are job-major: job i's features are x[i*F : (i+1)*F].
//
// Counts are squashed to [0, 1) so that no feature dominates the first
// layer whatever the trace's scale: slots run s → s/(s+20), remaining
// epochs r → log1p(r)/log1p(1000) (capped at 1), workers and PSs n → n/8
// (capped at 2), the dominant share is multiplied by 4 (one task of 26
// GPUs is 0.04).
const (
	featSlots = iota // after the one-hot
	featRemaining
	featShare
	featWorkers
	featPS
	numFeat
)

// Layout fixes the network's dimensions.
type Layout struct {
	Window int // J: jobs per decision window
	Types  int // one-hot width (Table 1's 8 and spare slots for new types)
}

// Features per job.
func (l Layout) Features() int { return l.Types + numFeat }

// Inputs is the policy and value networks' input width.
func (l Layout) Inputs() int { return l.Window * l.Features() }

// Actions is the policy's output width: three per job, then stop.
func (l Layout) Actions() int { return 3*l.Window + 1 }

// StopAction is the index of the void action.
func (l Layout) StopAction() int { return 3 * l.Window }

// Action is the index of kind k for the job at window position i.
func (l Layout) Action(i int, k Kind) int { return 3*i + int(k) }

func squashSlots(s int) float64 { return float64(s) / float64(s+20) }
func squashRemaining(r float64) float64 {
	return min(math.Log1p(max(r, 0))/math.Log1p(1000), 1)
}
func squashCount(n int) float64     { return min(float64(n)/8, 2) }
func squashShare(d float64) float64 { return 4 * d }

// Encode writes the state of window [off, off+J) of s into x (len Inputs);
// typeOf maps a job to its one-hot index (-1: none).
func (l Layout) Encode(s *Slot, off int, typeOf func(*Job) int, x []float64) {
	clear(x)
	F := l.Features()
	for i := 0; i < l.Window && off+i < len(s.Jobs); i++ {
		j := off + i
		if !s.Running(j) && !s.Waiting(j) {
			continue // nothing to decide for it: zeros
		}
		row := x[i*F : (i+1)*F]
		if t := typeOf(&s.Jobs[j]); t >= 0 && t < l.Types {
			row[t] = 1
		}
		row[l.Types+featSlots] = squashSlots(s.Jobs[j].SlotsRun)
		row[l.Types+featRemaining] = squashRemaining(s.Jobs[j].Remaining())
		l.encodeAlloc(s, j, row)
	}
}

func (l Layout) encodeAlloc(s *Slot, j int, row []float64) {
	row[l.Types+featShare] = squashShare(s.DomShare(j))
	row[l.Types+featWorkers] = squashCount(s.Alloc[j].Workers)
	row[l.Types+featPS] = squashCount(s.Alloc[j].PS)
}

// Mask writes which actions of window [off, off+J) are feasible; stop is
// feasible when any other action is. It returns the number feasible
// (stop excluded).
func (l Layout) Mask(s *Slot, off int, mask []bool) int {
	clear(mask)
	n := 0
	for i := 0; i < l.Window && off+i < len(s.Jobs); i++ {
		for k := Kind(0); k < numKinds; k++ {
			if s.Feasible(off+i, k) {
				mask[l.Action(i, k)] = true
				n++
			}
		}
	}
	mask[l.StopAction()] = n > 0
	return n
}

// Package dl2 is DL2's sizing policy (Peng et al., arXiv 1909.06040) as
// pure functions: each time slot it decides how many workers (GPU tasks)
// and parameter servers (CPU tasks) every elastic job gets. A slot starts
// with every job at its minimum (one worker and one PS by default, in
// arrival order while they fit); a sizer then adds one task at a time
// (+worker, +PS, +both for a job) until it stops, nothing fits or every
// job is at its maximum. The sizers are the learned policy (policy.go) and
// the baselines it is compared with and bootstrapped from (baselines.go).
// Nothing here knows about rounds, Nomad or Rondo's engine.
package dl2

import "fmt"

// Kind is what one action adds to a job.
type Kind int

const (
	AddWorker Kind = iota
	AddPS
	AddBoth
	numKinds
)

func (k Kind) String() string {
	return [...]string{"+worker", "+ps", "+both"}[k]
}

// Bounds are a job's worker and PS ranges (inclusive).
type Bounds struct {
	MinWorkers, MaxWorkers int
	MinPS, MaxPS           int
}

// Demand is what one task of a job takes on one server.
type Demand struct {
	WorkerGPUs, WorkerCPUs int // one worker (on one server)
	PSCPUs                 int // one parameter server
}

// Job is one job as a sizer sees it at the start of a slot.
type Job struct {
	ID       string
	Model    string  // the job's type (Table 1's names, or an operator's)
	ArrivalS float64 // arrival time, seconds
	Epochs   float64 // total epochs to train (> 0)
	Done     float64 // epochs trained so far
	SlotsRun int     // slots in which it ran
	Batch    int     // total batch size, split over the workers
	Bounds   Bounds
	Demand   Demand
}

// Remaining is the epochs left to train.
func (j *Job) Remaining() float64 { return max(j.Epochs-j.Done, 0) }

// Server is one server's capacity (or what is free on it).
type Server struct{ GPUs, CPUs int }

// Alloc is one job's tasks this slot, with the servers they run on.
type Alloc struct {
	Workers, PS    int
	WorkerOn, PSOn []int // server index of each worker / PS, in order added
}

// SpeedFunc is a job's expected training speed in epochs per second with
// ps parameter servers and w workers (0 when either is 0).
type SpeedFunc func(job *Job, ps, w int) float64

// Slot is one slot's decision in progress.
type Slot struct {
	Jobs  []Job   // arrival order
	Alloc []Alloc // per job
	Free  []Server
	Total Server // the cluster's capacity (dominant shares)
	// Speed is the sizers' speed model (Optimus, Tetris and SRTF estimate
	// remaining times with it); nil: none known.
	Speed SpeedFunc
	// OnAction, when set, is called before each action is applied
	// (a = ActionIndex(j, k, J) or Stop): training records the state
	// and the decision there.
	OnAction func(s *Slot, job int, k Kind, stop bool)
	// Actions counts the actions applied (the minimums excluded).
	Actions int
	// Admitting is true when the minimums did not all fit: who runs is
	// then decided by the sizer (+both on a waiting job admits it).
	Admitting bool
	scratch   []Server
}

// NewSlot gives every job its minimum (one worker and one PS by
// default) when all the minimums fit: the slot then starts with every job
// running and the sizer adds. When they do not all fit, who runs is part
// of the decision (DL2's network allocates a job's first worker too): no
// job starts with its minimum and +both on a waiting job admits it at its
// minimum (Admitting). PSs go where most CPUs are free (load balance,
// DL2's default placement); workers best-fit on GPUs so that 2-GPU
// workers find whole servers.
func NewSlot(servers []Server, jobs []Job, speed SpeedFunc) *Slot {
	s := &Slot{Jobs: jobs, Alloc: make([]Alloc, len(jobs)), Free: append([]Server(nil), servers...), Speed: speed}
	for _, v := range servers {
		s.Total.GPUs += v.GPUs
		s.Total.CPUs += v.CPUs
	}
	for j := range jobs {
		if !s.placeMin(j) {
			copy(s.Free, servers)
			clear(s.Alloc)
			s.Admitting = true
			break
		}
	}
	return s
}

// placeMin places job j's minimum whole, or nothing (false).
func (s *Slot) placeMin(j int) bool {
	b := s.Jobs[j].Bounds
	save := append([]Server(nil), s.Free...)
	ok := b.MinWorkers > 0 || b.MinPS > 0
	for i := 0; i < b.MinWorkers && ok; i++ {
		ok = s.place(j, AddWorker)
	}
	for i := 0; i < b.MinPS && ok; i++ {
		ok = s.place(j, AddPS)
	}
	if !ok {
		copy(s.Free, save)
		s.Alloc[j] = Alloc{}
	}
	return ok
}

// Waiting reports whether job j could be admitted this slot (+both
// admits it): the minimums did not all fit and it has none yet.
func (s *Slot) Waiting(j int) bool { return s.Admitting && !s.Running(j) }

// Running reports whether job j got its minimum this slot.
func (s *Slot) Running(j int) bool { return s.Alloc[j].Workers > 0 || s.Alloc[j].PS > 0 }

// fits returns the server a task of kind k (AddWorker or AddPS) of job j
// would go to, or -1: for a worker the fitting server with fewest free
// GPUs, for a PS the one with most free CPUs.
func (s *Slot) fits(j int, k Kind) int {
	d := s.Jobs[j].Demand
	best := -1
	for i, f := range s.Free {
		switch k {
		case AddWorker:
			if f.GPUs < d.WorkerGPUs || f.CPUs < d.WorkerCPUs {
				continue
			}
			// Best fit on GPUs: 1-GPU workers fill partly used servers
			// and leave whole ones to 2-GPU workers (load balancing
			// them, as for PSs, strands 2-GPU workers).
			if best < 0 || f.GPUs < s.Free[best].GPUs || (f.GPUs == s.Free[best].GPUs && f.CPUs > s.Free[best].CPUs) {
				best = i
			}
		case AddPS:
			if f.CPUs < d.PSCPUs {
				continue
			}
			if best < 0 || f.CPUs > s.Free[best].CPUs || (f.CPUs == s.Free[best].CPUs && f.GPUs < s.Free[best].GPUs) {
				best = i
			}
		}
	}
	return best
}

func (s *Slot) place(j int, k Kind) bool {
	i := s.fits(j, k)
	if i < 0 {
		return false
	}
	d := s.Jobs[j].Demand
	a := &s.Alloc[j]
	if k == AddWorker {
		s.Free[i].GPUs -= d.WorkerGPUs
		s.Free[i].CPUs -= d.WorkerCPUs
		a.Workers++
		a.WorkerOn = append(a.WorkerOn, i)
	} else {
		s.Free[i].CPUs -= d.PSCPUs
		a.PS++
		a.PSOn = append(a.PSOn, i)
	}
	return true
}

// Feasible reports whether action k for job j fits the bounds and the
// free capacity now. A waiting job (Waiting) takes only +both, which
// admits it at its minimum; a job neither running nor waiting takes
// nothing.
func (s *Slot) Feasible(j int, k Kind) bool {
	if j < 0 || j >= len(s.Jobs) {
		return false
	}
	if !s.Running(j) {
		if k != AddBoth || !s.Admitting {
			return false
		}
		free := append(s.scratch[:0], s.Free...)
		ok := s.placeMin(j)
		copy(s.Free, free)
		s.Alloc[j] = Alloc{}
		s.scratch = free
		return ok
	}
	b, a := s.Jobs[j].Bounds, s.Alloc[j]
	switch k {
	case AddWorker:
		return a.Workers < b.MaxWorkers && s.fits(j, AddWorker) >= 0
	case AddPS:
		return a.PS < b.MaxPS && s.fits(j, AddPS) >= 0
	case AddBoth:
		if a.Workers >= b.MaxWorkers || a.PS >= b.MaxPS {
			return false
		}
		w := s.fits(j, AddWorker)
		if w < 0 {
			return false
		}
		// The PS must fit after the worker took its CPUs.
		d := s.Jobs[j].Demand
		s.Free[w].CPUs -= d.WorkerCPUs
		ok := s.fits(j, AddPS) >= 0
		s.Free[w].CPUs += d.WorkerCPUs
		return ok
	}
	return false
}

// AnyFeasible reports whether some action is feasible for some job.
func (s *Slot) AnyFeasible() bool {
	for j := range s.Jobs {
		if s.Feasible(j, AddWorker) || s.Feasible(j, AddPS) || s.Feasible(j, AddBoth) {
			return true
		}
	}
	return false
}

// Apply adds action k to job j. It refuses (an error, nothing changed) an
// infeasible action: a sizer can never over-commit a server or a bound.
func (s *Slot) Apply(j int, k Kind) error {
	if !s.Feasible(j, k) {
		return fmt.Errorf("dl2: %s for job %d infeasible", k, j)
	}
	if s.OnAction != nil {
		s.OnAction(s, j, k, false)
	}
	switch {
	case !s.Running(j):
		s.placeMin(j)
	case k == AddBoth:
		s.place(j, AddWorker)
		s.place(j, AddPS)
	default:
		s.place(j, k)
	}
	s.Actions++
	return nil
}

// Stop ends the sizer's decision; it is recorded (OnAction) only when
// some action was still feasible (otherwise the slot ends on its own).
func (s *Slot) Stop() {
	if s.OnAction != nil && s.AnyFeasible() {
		s.OnAction(s, -1, 0, true)
	}
}

// DomShare is job j's dominant share of the cluster this slot.
func (s *Slot) DomShare(j int) float64 {
	a, d := s.Alloc[j], s.Jobs[j].Demand
	g := float64(a.Workers * d.WorkerGPUs)
	c := float64(a.Workers*d.WorkerCPUs + a.PS*d.PSCPUs)
	var sg, sc float64
	if s.Total.GPUs > 0 {
		sg = g / float64(s.Total.GPUs)
	}
	if s.Total.CPUs > 0 {
		sc = c / float64(s.Total.CPUs)
	}
	return max(sg, sc)
}

// SpeedOf is job j's expected speed (epochs/s) at (ps, w); 0 without a model.
func (s *Slot) SpeedOf(j, ps, w int) float64 {
	if s.Speed == nil || ps <= 0 || w <= 0 {
		return 0
	}
	return s.Speed(&s.Jobs[j], ps, w)
}

// Sizer decides one slot: it applies actions to s (NewSlot has placed the
// minimums) and calls s.Stop when it stops early.
type Sizer interface {
	Name() string
	Decide(s *Slot)
}

// Check verifies a finished slot: every job within its bounds (or
// nothing), no server over its capacity. Tests and the fallback use it.
func Check(servers []Server, s *Slot) error {
	used := make([]Server, len(servers))
	for j, a := range s.Alloc {
		b, d := s.Jobs[j].Bounds, s.Jobs[j].Demand
		if a.Workers == 0 && a.PS == 0 {
			continue
		}
		if a.Workers < b.MinWorkers || a.Workers > b.MaxWorkers || a.PS < b.MinPS || a.PS > b.MaxPS {
			return fmt.Errorf("dl2: job %s has %d workers, %d PS outside its bounds %+v", s.Jobs[j].ID, a.Workers, a.PS, b)
		}
		if len(a.WorkerOn) != a.Workers || len(a.PSOn) != a.PS {
			return fmt.Errorf("dl2: job %s placement does not match its counts", s.Jobs[j].ID)
		}
		for _, i := range a.WorkerOn {
			used[i].GPUs += d.WorkerGPUs
			used[i].CPUs += d.WorkerCPUs
		}
		for _, i := range a.PSOn {
			used[i].CPUs += d.PSCPUs
		}
	}
	for i, u := range used {
		if u.GPUs > servers[i].GPUs || u.CPUs > servers[i].CPUs {
			return fmt.Errorf("dl2: server %d over capacity: %+v of %+v", i, u, servers[i])
		}
	}
	return nil
}

package sim

import "math"

// ClassBusy is busy GPU time, in GPU-seconds, per class of job
// (guaranteed, opportunistic), over the whole run and over the window
// [0, Options.BusyWindowS] (the VC comparison's arrival window). A
// micro-task is busy from its start to its finish, start cost included,
// as the run's utilization counts it.
type ClassBusy struct {
	WindowS             float64 `json:"window_s"`
	Guaranteed          float64 `json:"guaranteed_gpu_s"`
	Opportunistic       float64 `json:"opportunistic_gpu_s"`
	GuaranteedWindow    float64 `json:"guaranteed_window_gpu_s"`
	OpportunisticWindow float64 `json:"opportunistic_window_gpu_s"`
	// Evicted counts opportunistic jobs the plans preempted for guaranteed
	// work (VCResult.Preemptions also counts those a policy suspends).
	Evicted int `json:"opportunistic_evicted"`
}

// countBusy adds the round that just ended (its micro-tasks, cut by any
// failure) to the per-class busy time; Observe calls it before crediting.
func (s *simulator) countBusy() {
	if s.o.BusyWindowS <= 0 {
		return
	}
	if s.classBusy == nil {
		s.classBusy = &ClassBusy{WindowS: s.o.BusyWindowS}
	}
	b := s.classBusy
	for _, m := range s.running {
		g := float64(len(m.gpus))
		all := g * (m.finish - m.begin)
		in := g * math.Max(0, math.Min(m.finish, b.WindowS)-m.begin)
		if len(m.jobs) > 0 && m.jobs[0].tj.Opportunistic {
			b.Opportunistic += all
			b.OpportunisticWindow += in
		} else {
			b.Guaranteed += all
			b.GuaranteedWindow += in
		}
	}
}

func (s *simulator) busyResult(r *Result) {
	if s.o.BusyWindowS > 0 {
		if s.classBusy == nil {
			s.classBusy = &ClassBusy{WindowS: s.o.BusyWindowS}
		}
		s.classBusy.Evicted = s.oppEvict
		r.ClassBusy = s.classBusy
	}
}

// roundS is the round length (the engine's default when unset).
func (s *simulator) roundS() float64 {
	if s.o.Engine.RoundS > 0 {
		return s.o.Engine.RoundS
	}
	return 360
}

// gridEnd is the end of the round that began at s.now and whose last
// micro-task finishes at end: end itself, or with Options.RoundGrid the
// full round.
func (s *simulator) gridEnd(end float64) float64 {
	if s.dl2 != nil {
		// DL2's slots: a job finishing just past the slot's end (within
		// dl2.Env's tolerance) does not move the grid.
		return s.now + s.roundS()
	}
	if !s.o.RoundGrid {
		return end
	}
	return math.Max(end, s.now+s.roundS())
}

// gridNext is when an idle cluster next decides, for an arrival at t: t,
// or with Options.RoundGrid the first grid point at or after t.
func (s *simulator) gridNext(t float64) float64 {
	if !s.o.RoundGrid {
		return t
	}
	r, o := s.roundS(), s.o.GridOriginS
	return o + math.Max(math.Ceil((t-o)/r), 0)*r
}

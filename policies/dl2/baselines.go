package dl2

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The baselines of DL2's evaluation (§6.2) as Sizers. Each applies only
// feasible actions and calls s.Stop when it is done. DRF is the teacher
// of DL2's supervised stage by default.

// DRF gives one worker and one PS at a time to the running job with the
// smallest dominant share (ties: arrival order) among those a +both
// still fits, until it fits none.
type DRF struct{}

func (DRF) Name() string { return "drf" }

func (DRF) Decide(s *Slot) {
	for {
		best, share := -1, 0.0
		for j := range s.Jobs {
			if !s.Feasible(j, AddBoth) {
				continue
			}
			if d := s.DomShare(j); best < 0 || d < share {
				best, share = j, d
			}
		}
		if best < 0 {
			break
		}
		s.Apply(best, AddBoth)
	}
	s.Stop()
}

// FIFO fills the jobs in arrival order: each takes +both until it is at
// its maximum or nothing more fits, then the next.
type FIFO struct{}

func (FIFO) Name() string { return "fifo" }

func (FIFO) Decide(s *Slot) {
	order := arrival(s)
	admit(s, order)
	fill(s, order)
	s.Stop()
}

// arrival is the jobs' indexes in arrival order.
func arrival(s *Slot) []int {
	order := make([]int, len(s.Jobs))
	for j := range order {
		order[j] = j
	}
	return order
}

// admit gives the waiting jobs of order their minimum while it fits
// (the baselines other than DRF admit first, then size; DRF admits by
// its own rule: a waiting job's dominant share is 0).
func admit(s *Slot, order []int) {
	for _, j := range order {
		if s.Waiting(j) && s.Feasible(j, AddBoth) {
			s.Apply(j, AddBoth)
		}
	}
}

// fill gives each job of order +both until it is infeasible.
func fill(s *Slot, order []int) {
	for _, j := range order {
		for s.Feasible(j, AddBoth) {
			s.Apply(j, AddBoth)
		}
	}
}

// remainingS is job j's estimated remaining time at its current counts
// (+Inf without a speed).
func remainingS(s *Slot, j, ps, w int) float64 {
	v := s.SpeedOf(j, ps, w)
	if !(v > 0) {
		return math.Inf(1)
	}
	return s.Jobs[j].Remaining() / v
}

// SRTF admits and then fills the jobs shortest estimated remaining time
// first (Remaining / speed at the current counts, a waiting job's at its
// minimum; ties: arrival order), each
// with +both to its maximum or until nothing more fits.
type SRTF struct{}

func (SRTF) Name() string { return "srtf" }

func (SRTF) Decide(s *Slot) {
	var order []int
	rt := make([]float64, len(s.Jobs))
	for j := range s.Jobs {
		b := s.Jobs[j].Bounds
		switch {
		case s.Running(j):
			rt[j] = remainingS(s, j, s.Alloc[j].PS, s.Alloc[j].Workers)
		case s.Waiting(j):
			rt[j] = remainingS(s, j, max(b.MinPS, 1), max(b.MinWorkers, 1))
		default:
			continue
		}
		order = append(order, j)
	}
	sort.SliceStable(order, func(a, b int) bool { return rt[order[a]] < rt[order[b]] })
	admit(s, order)
	fill(s, order)
	s.Stop()
}

// Tetris (Grandl et al., SIGCOMM'14) as DL2 ran it: among the running
// jobs a +both fits, score each by packing alignment — the dot product
// of the +both's demand (GPUs, CPUs) and the cluster's free resources,
// both divided by the cluster's totals — plus a remaining-time term
// favouring shorter jobs (estimated at its current counts); each term is
// scaled to [0, 1] over the candidates (min-max; 0 when all are equal)
// and the two are added with equal weight. The best job (ties: arrival
// order) gets +both until it reaches its maximum (the user's threshold)
// or nothing more fits; repeat.
type Tetris struct{}

func (Tetris) Name() string { return "tetris" }

func (Tetris) Decide(s *Slot) {
	admit(s, arrival(s))
	g, c := float64(max(s.Total.GPUs, 1)), float64(max(s.Total.CPUs, 1))
	for {
		var free Server
		for _, f := range s.Free {
			free.GPUs += f.GPUs
			free.CPUs += f.CPUs
		}
		var cand []int
		var align, rt []float64
		for j := range s.Jobs {
			if !s.Feasible(j, AddBoth) {
				continue
			}
			d := s.Jobs[j].Demand
			cand = append(cand, j)
			align = append(align, float64(d.WorkerGPUs)/g*float64(free.GPUs)/g+
				float64(d.WorkerCPUs+d.PSCPUs)/c*float64(free.CPUs)/c)
			rt = append(rt, remainingS(s, j, s.Alloc[j].PS, s.Alloc[j].Workers))
		}
		if len(cand) == 0 {
			break
		}
		an, rn := unitScale(align, false), unitScale(rt, true)
		best := 0
		for i := range cand {
			if an[i]+rn[i] > an[best]+rn[best] {
				best = i
			}
		}
		fill(s, cand[best:best+1])
	}
	s.Stop()
}

// unitScale maps xs to [0, 1] by min-max over the finite values: the
// largest gets 1, or with shorter the smallest gets 1 (+Inf gets 0). All
// equal: 0 (1 with shorter), which leaves the other term to decide.
func unitScale(xs []float64, shorter bool) []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		if !math.IsInf(x, 0) {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		switch {
		case math.IsInf(x, 0):
			if !shorter {
				out[i] = 1
			}
		case !(hi > lo):
			if shorter {
				out[i] = 1
			}
		case shorter:
			out[i] = (hi - x) / (hi - lo)
		default:
			out[i] = (x - lo) / (hi - lo)
		}
	}
	return out
}

// Optimus (Peng et al., EuroSys'18) greedy: for every running job and
// kind (+worker, +PS) that is feasible, the gain is the estimated
// remaining time saved, Remaining/speed(ps, w) - Remaining/speed(ps', w'),
// divided by the dominant-resource fraction the added task takes of the
// cluster; the best positive gain is applied (ties: arrival order, then
// +worker), until none is positive.
type Optimus struct{}

func (Optimus) Name() string { return "optimus" }

func (Optimus) Decide(s *Slot) {
	admit(s, arrival(s))
	g, c := float64(max(s.Total.GPUs, 1)), float64(max(s.Total.CPUs, 1))
	for {
		bj, bk, bg := -1, AddWorker, 0.0
		for j := range s.Jobs {
			if !s.Running(j) {
				continue
			}
			a, d := s.Alloc[j], s.Jobs[j].Demand
			cur := remainingS(s, j, a.PS, a.Workers)
			for _, k := range [...]Kind{AddWorker, AddPS} {
				if !s.Feasible(j, k) {
					continue
				}
				var next, frac float64
				if k == AddWorker {
					next = remainingS(s, j, a.PS, a.Workers+1)
					frac = max(float64(d.WorkerGPUs)/g, float64(d.WorkerCPUs)/c)
				} else {
					next = remainingS(s, j, a.PS+1, a.Workers)
					frac = float64(d.PSCPUs) / c
				}
				if math.IsInf(cur, 1) || math.IsInf(next, 1) || !(frac > 0) {
					continue
				}
				if gain := (cur - next) / frac; gain > bg {
					bj, bk, bg = j, k, gain
				}
			}
		}
		if bj < 0 {
			break
		}
		s.Apply(bj, bk)
	}
	s.Stop()
}

// Baselines are the baseline sizers by name.
func Baselines() map[string]Sizer {
	return map[string]Sizer{"drf": DRF{}, "fifo": FIFO{}, "srtf": SRTF{}, "tetris": Tetris{}, "optimus": Optimus{}}
}

// Teacher is the baseline named name (the sizer DL2's supervised stage
// imitates); an unknown name is an error listing the known ones.
func Teacher(name string) (Sizer, error) {
	b := Baselines()
	if sz, ok := b[name]; ok {
		return sz, nil
	}
	names := make([]string, 0, len(b))
	for n := range b {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("dl2: unknown teacher %q (known: %s)", name, strings.Join(names, ", "))
}

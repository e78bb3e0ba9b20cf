package vcsim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/rondo-sched/rondo/allocator/cells"
)

// cellsPlacer places jobs through HiveD's cell allocator: guaranteed jobs
// inside their VC's cells, opportunistic ones on free GPUs anywhere.
type cellsPlacer struct {
	a   *cells.Allocator
	vcs []string
}

func (p *cellsPlacer) place(j *job) ([]int, bool, error) {
	class := cells.Guaranteed
	if j.Opportunistic {
		class = cells.Opportunistic
	}
	pl, err := p.a.Allocate(cells.Request{ID: strconv.Itoa(j.ID), VC: p.vcs[j.vc], Class: class, Members: j.members})
	if errors.Is(err, cells.ErrWait) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("vcsim: job %d: %w", j.ID, err)
	}
	victims := make([]int, len(pl.Preempted))
	for i, id := range pl.Preempted {
		if victims[i], err = strconv.Atoi(id); err != nil {
			return nil, false, fmt.Errorf("vcsim: preempted gang %q: %w", id, err)
		}
	}
	return victims, true, nil
}

func (p *cellsPlacer) release(id int) error { return p.a.Release(strconv.Itoa(id)) }

// quotaPlacer is the quota-only baseline: a VC may hold at most its quota
// in GPUs, counted over the whole cluster, and members go to machines by
// best fit (fewest free GPUs that hold the member) or first fit (lowest
// index). Opportunistic jobs use no quota, take free GPUs, and are
// preempted (whole, most recently started first, on the machine needing
// the fewest victims) when a guaranteed job within quota finds no room.
type quotaPlacer struct {
	free     []int // per machine
	quota    []int // per VC, GPUs
	used     []int // per VC, guaranteed GPUs held
	firstFit bool
	gangs    map[int]*qgang
	onMach   [][]int // per machine: opportunistic gang ids in start order
}

type qgang struct {
	vc      int
	opp     bool
	machine []int // per member
	size    []int
}

func newQuotaPlacer(machines, quota []int, firstFit bool) *quotaPlacer {
	return &quotaPlacer{free: slices.Clone(machines), quota: quota, used: make([]int, len(quota)),
		firstFit: firstFit, gangs: map[int]*qgang{}, onMach: make([][]int, len(machines))}
}

func (p *quotaPlacer) place(j *job) ([]int, bool, error) {
	if _, dup := p.gangs[j.ID]; dup {
		return nil, false, fmt.Errorf("vcsim: job %d placed twice", j.ID)
	}
	if !j.Opportunistic && p.used[j.vc]+j.GPUs > p.quota[j.vc] {
		return nil, false, nil
	}
	free := slices.Clone(p.free)
	evicted := map[int]bool{}
	var victims []int
	order := make([]int, len(j.members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return j.members[y] - j.members[x] })
	machine := make([]int, len(j.members))
	for _, m := range order {
		need := j.members[m]
		best := -1
		for k, f := range free {
			if f >= need && (best < 0 || (!p.firstFit && f < free[best])) {
				best = k
			}
		}
		if best < 0 && !j.Opportunistic {
			// Preempt: the machine where the fewest opportunistic gangs
			// (most recent first) make room, then fewest GPUs freed.
			bestN, bestG := 0, 0
			var bestV []int
			for k := range free {
				f, n, g := free[k], 0, 0
				var vs []int
				for i := len(p.onMach[k]) - 1; i >= 0 && f < need; i-- {
					id := p.onMach[k][i]
					if evicted[id] {
						continue
					}
					gs := p.gangs[id]
					for mm, mk := range gs.machine {
						if mk == k {
							f += gs.size[mm]
							g += gs.size[mm]
						}
					}
					n++
					vs = append(vs, id)
				}
				if f >= need && (best < 0 || n < bestN || (n == bestN && g < bestG)) {
					best, bestN, bestG, bestV = k, n, g, vs
				}
			}
			for _, id := range bestV {
				evicted[id] = true
				victims = append(victims, id)
				gs := p.gangs[id]
				for mm, mk := range gs.machine {
					free[mk] += gs.size[mm]
				}
			}
		}
		if best < 0 {
			return nil, false, nil
		}
		free[best] -= need
		machine[m] = best
	}
	for _, id := range victims {
		p.drop(id)
	}
	p.free = free
	g := &qgang{vc: j.vc, opp: j.Opportunistic, machine: machine, size: slices.Clone(j.members)}
	p.gangs[j.ID] = g
	if g.opp {
		for _, k := range machine {
			if !slices.Contains(p.onMach[k], j.ID) {
				p.onMach[k] = append(p.onMach[k], j.ID)
			}
		}
	} else {
		p.used[j.vc] += j.GPUs
	}
	return victims, true, nil
}

// drop forgets a gang without touching free (already accounted).
func (p *quotaPlacer) drop(id int) {
	g := p.gangs[id]
	delete(p.gangs, id)
	for _, k := range g.machine {
		p.onMach[k] = slices.DeleteFunc(p.onMach[k], func(x int) bool { return x == id })
	}
	if !g.opp {
		p.used[g.vc] -= sum(g.size)
	}
}

func (p *quotaPlacer) release(id int) error {
	g, ok := p.gangs[id]
	if !ok {
		return fmt.Errorf("vcsim: release of unplaced job %d", id)
	}
	for m, k := range g.machine {
		p.free[k] += g.size[m]
	}
	p.drop(id)
	return nil
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

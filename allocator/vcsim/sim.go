package vcsim

import (
	"container/heap"
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/philly"
)

// placer starts gangs on a cluster. place returns ok = false when the job
// must wait, and the ids of the opportunistic jobs it preempted.
type placer interface {
	place(j *job) (victims []int, ok bool, err error)
	release(id int) error
}

// job is a trace job during a run.
type job struct {
	philly.Job
	vc        int
	members   []int   // GPUs per member (one node each)
	remaining float64 // seconds of work left
	start     float64 // first start, -1 before
	runStart  float64 // start of the current run
	epoch     int     // bumped on preemption: stale completions are ignored
	finish    float64
	preempted int
}

// run is the outcome of one simulation.
type run struct {
	jobs        []*job // by trace index
	gpus        int
	windowS     float64    // last arrival: the measurement window is [0, windowS]
	busyWindow  [2]float64 // GPU-seconds in the window: guaranteed, opportunistic
	busy        [2]float64 // GPU-seconds over the whole run
	preemptions int
	endS        float64
}

type completion struct {
	t         float64
	id, epoch int
}

type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(i, k int) bool {
	if h[i].t != h[k].t {
		return h[i].t < h[k].t
	}
	return h[i].id < h[k].id
}
func (h completions) Swap(i, k int) { h[i], h[k] = h[k], h[i] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// members splits a job into gang members of at most nodeGPUs GPUs each.
func members(gpus, nodeGPUs int) []int {
	if gpus <= nodeGPUs {
		return []int{gpus}
	}
	var m []int
	for left := gpus; left > 0; left -= nodeGPUs {
		m = append(m, min(left, nodeGPUs))
	}
	return m
}

// simulate replays trace on p. Each VC has a FIFO queue of guaranteed jobs
// and one of opportunistic jobs; after every arrival or completion the
// queue heads are retried, guaranteed first, earliest arrival first, until
// nothing more starts (strict FIFO within a queue: a head that does not fit
// blocks its queue). Preempted opportunistic jobs keep their progress
// (checkpointed) and go back to their queue in arrival order. Events at the
// same time: completions first (by job id), then arrivals.
func simulate(trace []philly.Job, vcIdx map[string]int, nvc, gpus, nodeGPUs int, p placer) (*run, error) {
	r := &run{gpus: gpus}
	for i, tj := range trace {
		v, ok := vcIdx[tj.VC]
		if !ok {
			return nil, fmt.Errorf("vcsim: job %d: unknown vc %q", tj.ID, tj.VC)
		}
		if i > 0 && tj.ArrivalS < trace[i-1].ArrivalS {
			return nil, fmt.Errorf("vcsim: job %d arrives before job %d", tj.ID, trace[i-1].ID)
		}
		r.jobs = append(r.jobs, &job{Job: tj, vc: v, members: members(tj.GPUs, nodeGPUs), remaining: tj.DurationS, start: -1})
		r.windowS = tj.ArrivalS
	}
	queues := make([][2][]int, nvc) // per VC: guaranteed, opportunistic (trace indices)
	class := func(j *job) int {
		if j.Opportunistic {
			return 1
		}
		return 0
	}
	enqueue := func(i int) {
		j := r.jobs[i]
		q := &queues[j.vc][class(j)]
		k := len(*q)
		for k > 0 && (*q)[k-1] > i {
			k--
		}
		*q = append(*q, 0)
		copy((*q)[k+1:], (*q)[k:])
		(*q)[k] = i
	}
	byID := map[int]int{}
	for i, j := range r.jobs {
		if _, dup := byID[j.ID]; dup {
			return nil, fmt.Errorf("vcsim: duplicate job id %d", j.ID)
		}
		byID[j.ID] = i
	}
	var h completions
	account := func(j *job, from, to float64) {
		g := float64(j.GPUs)
		c := class(j)
		r.busy[c] += g * (to - from)
		if lo, hi := from, math.Min(to, r.windowS); hi > lo {
			r.busyWindow[c] += g * (hi - lo)
		}
	}
	schedule := func(now float64) error {
		for progress := true; progress; {
			progress = false
			for c := 0; c < 2; c++ {
				blocked := make([]bool, nvc)
				for {
					best := -1
					for v := range queues {
						if !blocked[v] && len(queues[v][c]) > 0 && (best < 0 || queues[v][c][0] < queues[best][c][0]) {
							best = v
						}
					}
					if best < 0 {
						break
					}
					i := queues[best][c][0]
					j := r.jobs[i]
					victims, ok, err := p.place(j)
					if err != nil {
						return err
					}
					if !ok {
						blocked[best] = true
						continue
					}
					progress = true
					queues[best][c] = queues[best][c][1:]
					for _, vid := range victims {
						vi, known := byID[vid]
						if !known {
							return fmt.Errorf("vcsim: preempted unknown job %d", vid)
						}
						vj := r.jobs[vi]
						account(vj, vj.runStart, now)
						vj.remaining -= now - vj.runStart
						vj.epoch++
						vj.preempted++
						r.preemptions++
						enqueue(vi)
					}
					if j.start < 0 {
						j.start = now
					}
					j.runStart = now
					heap.Push(&h, completion{t: now + j.remaining, id: i, epoch: j.epoch})
				}
			}
		}
		return nil
	}
	next := 0
	for next < len(r.jobs) || h.Len() > 0 {
		var now float64
		if h.Len() > 0 && (next >= len(r.jobs) || h[0].t <= r.jobs[next].ArrivalS) {
			c := heap.Pop(&h).(completion)
			j := r.jobs[c.id]
			if c.epoch != j.epoch {
				continue
			}
			now = c.t
			if err := p.release(j.ID); err != nil {
				return nil, err
			}
			account(j, j.runStart, now)
			j.remaining, j.finish = 0, now
		} else {
			now = r.jobs[next].ArrivalS
			enqueue(next)
			next++
		}
		if err := schedule(now); err != nil {
			return nil, err
		}
		r.endS = now
	}
	for _, j := range r.jobs {
		if j.start < 0 {
			return nil, fmt.Errorf("vcsim: job %d (%s, %d GPUs) never started: it does not fit the cluster", j.ID, j.VC, j.GPUs)
		}
	}
	return r, nil
}

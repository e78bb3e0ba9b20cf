package agent

import (
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// TimelineLen is how many rounds the timeline keeps: the last 720 (two
// hours of 10 s rounds).
const TimelineLen = 720

// timeline is the ring of the last TimelineLen rounds' Samples (GET
// /v1/timeline, the web page's plots) and what the mean JCT is made of.
// It lives in memory: a restarted agent starts a new one. Under Agent.mu.
type timeline struct {
	ring []Sample
	next int // where the next sample goes once the ring is full
	// arrival: the active jobs of the last round and their arrival on the
	// snapshots' clock; one gone from the next snapshot has finished.
	arrival map[string]float64
	// finished and jctSum: the jobs finished since the agent started and
	// the sum of their JCTs (finish − arrival).
	finished int
	jctSum   float64
}

// add appends a sample, dropping the oldest once TimelineLen are kept.
func (tl *timeline) add(s Sample) {
	if len(tl.ring) < TimelineLen {
		tl.ring = append(tl.ring, s)
		return
	}
	tl.ring[tl.next] = s
	tl.next = (tl.next + 1) % TimelineLen
}

// since returns the samples of rounds after round, oldest first (a fresh
// slice, never nil).
func (tl *timeline) since(round int) []Sample {
	out := make([]Sample, 0, len(tl.ring))
	for i := range tl.ring {
		s := tl.ring[(tl.next+i)%len(tl.ring)]
		if s.Round > round {
			out = append(out, s)
		}
	}
	return out
}

// sample appends the round to the timeline (record calls it, under mu,
// after the status is updated): GPUs in use (a.status.Types, shared GPUs
// once) and healthy per type, GPUs in use per VC (a shared GPU split
// between its jobs), jobs running and waiting (active, not in the plan),
// jobs finished since the agent started and their mean JCT. A job
// finishes when it leaves the snapshot: its JCT is this snapshot's time
// minus its arrival (the snapshots' clock), so it is late by at most a
// round; a job removed before it finished counts as finished too.
func (a *Agent) sample(s *engine.Snapshot, p *engine.Plan, round int, now time.Time) {
	tl := &a.timeline
	active := make(map[string]float64, len(s.Jobs))
	vcOf := make(map[string]string, len(s.Jobs))
	for _, j := range s.Jobs {
		active[j.ID] = j.ArrivalS
		vcOf[j.ID] = j.VC
	}
	for id, arrival := range tl.arrival {
		if _, ok := active[id]; !ok {
			tl.finished++
			tl.jctSum += max(s.TimeS-arrival, 0)
		}
	}
	tl.arrival = active
	smp := Sample{Round: round, Time: now, Used: map[string]int{}, Healthy: map[string]int{}, VCUsed: map[string]int{},
		Finished: tl.finished}
	used, healthy := 0, 0
	for typ, u := range a.status.Types {
		smp.Used[typ], smp.Healthy[typ] = u.Used, u.Total-u.Failed
		used += u.Used
		healthy += u.Total - u.Failed
	}
	if healthy > 0 {
		smp.Utilization = min(float64(used)/float64(healthy), 1)
	}
	running := map[string]bool{}
	for _, as := range p.Assignments {
		n := len(as.Jobs)
		for k, id := range as.Jobs {
			running[id] = true
			// Job k of n gets its part of the unit's GPUs (the first
			// the larger), the parts summing to the unit's GPUs.
			g := len(as.GPUs)
			if share := (g*(k+1)+n-1)/n - (g*k+n-1)/n; share > 0 && vcOf[id] != "" {
				smp.VCUsed[vcOf[id]] += share
			}
		}
	}
	for id := range active {
		if running[id] {
			smp.Running++
		} else {
			smp.Waiting++
		}
	}
	if tl.finished > 0 {
		smp.AvgJCTS = tl.jctSum / float64(tl.finished)
	}
	tl.add(smp)
}

// Timeline returns the samples of the rounds after since (0: all kept),
// oldest first.
func (a *Agent) Timeline(since int) []Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.timeline.since(since)
}

// Package placement is the round's CPU and memory stage (Synergy, OSDI '22):
// after the mechanism has picked jobs by GPUs, it gives each job cores and
// memory on the servers its GPUs are on, and may choose those servers.
//
// Admission stays the policy's (GPUs alone), so every mode but GREEDY runs
// the same jobs as proportional allocation:
//
//   - proportional: every job gets its server's cores and memory per GPU
//     times its GPUs there (half of it per GPU shared with another job).
//   - tune: Synergy-TUNE. Jobs in decreasing demand (GPUs, best-case cores,
//     best-case memory) ask for their best case, capped at the server; a job
//     that does not fit asks for its proportional share; one that still does
//     not fit takes it by shrinking co-located jobs that hold more than
//     proportional back to proportional (always enough: proportional shares
//     sum to the server). Then Rondo's own step: cores and memory left over
//     go, one grid step at a time, to the job whose profile gains the most
//     per resource (the paper's simulator credits only two speeds).
//   - greedy: first fit in policy order at the best case; a job that does
//     not fit is skipped (the paper's strawman: it shows the fairness loss).
//   - opt: the best throughput subject to capacity with no job below its
//     proportional throughput, an integer program over the profiles' grid
//     (opt.go).
//
// The package is pure: Place maps servers and jobs to grants. The decider
// wrapper (stage.go) builds its input from a snapshot and a plan.
package placement

import (
	"fmt"
	"math"
	"sort"

	"github.com/rondo-sched/rondo/allocator/synergy"
)

// Mode is a VC's placement (HCL `placement`).
type Mode string

const (
	Proportional Mode = "proportional"
	Tune         Mode = "tune"
	Greedy       Mode = "greedy"
	Opt          Mode = "opt"
)

// Modes are the placement names, in the order docs list them.
var Modes = []Mode{Proportional, Tune, Greedy, Opt}

// ParseMode reads a placement name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("placement %q: want proportional, tune, greedy or opt", s)
}

// Server is one machine: its GPU count is the basis of the proportional
// share (cores and memory per GPU).
type Server struct {
	ID    string
	GPUs  int
	Cores float64
	MemGB float64
}

// shareCores is the server's proportional cores per GPU.
func (s *Server) shareCores() float64 { return s.Cores / float64(s.GPUs) }
func (s *Server) shareMem() float64   { return s.MemGB / float64(s.GPUs) }

// Job is one job of the round's plan.
type Job struct {
	ID string
	// GPUs per server where it runs (one entry for a single-server job).
	GPUs map[string]int
	// Shared jobs run on GPUs another job shares (space sharing): they get
	// half the proportional share per GPU and are not tuned.
	Shared bool
	// Profile is the job's sensitivity (nil: insensitive, synergy.Flat).
	Profile *synergy.Profile
	// Held is what the job holds where it keeps running (nil: it starts
	// this round). TUNE leaves a kept job's cores and memory as they are
	// unless a starting job needs them back (a restart for the job).
	Held *Grant
	// RemainingS is the time a kept job has left at its proportional
	// share (0: unknown), for Options.Regrow.
	RemainingS float64
}

// Grant is a job's cores and memory over all its servers.
type Grant struct {
	Cores, MemGB float64
}

// Options tune Place.
type Options struct {
	// Leftover hands what TUNE leaves to the jobs with the largest marginal
	// gain (Rondo's step beyond the paper). Off in --synergy-compat runs.
	Leftover bool
	// Fresh ignores Held: every job is placed from scratch (the reference
	// simulator re-places all jobs every round, at no cost).
	Fresh bool
	// FirstFit also re-chooses every job's GPUs, as the reference
	// simulator does (firstfit.go; --synergy-compat with one engine).
	FirstFit bool
	// Choose lets the stage re-pick the GPUs of jobs starting this round
	// (TUNE, GREEDY and OPT VCs) by Synergy-TUNE's best fit for their
	// demand (choose.go): set where one engine decides the whole cluster,
	// whose GPU choice is its own packing; not with VCs, whose quota
	// partitions or cells own the GPUs.
	Choose bool
	// Regrow grows a kept job below its best case to its best case where
	// its server has the room after this round's starting jobs, when the
	// time it saves over the rest of its run (RemainingS; unknown: any)
	// exceeds RetuneCostS (a retune is a checkpointed restart). TUNE only.
	Regrow      bool
	RetuneCostS float64
}

// DefaultRetuneCostS is the agent's RetuneCostS: a checkpointed restart's
// order of magnitude (stopping, rescheduling and restoring a task).
const DefaultRetuneCostS = 60

// Result is the stage's decision.
type Result struct {
	Grants map[string]Grant
	// Skipped are jobs GREEDY left out (they do not run this round).
	Skipped []string
}

// job is Place's working view of one Job.
type job struct {
	*Job
	order    int // policy order: index in Place's input
	gpus     int
	server   *srv // nil for a multi-server job
	prof     *synergy.Profile
	bestC    float64 // best-case cores and memory (whole job, capped)
	bestM    float64
	propC    float64 // proportional cores and memory (whole job)
	propM    float64
	c, m     float64 // granted
	starting bool    // may change at no cost (not kept)
}

type srv struct {
	*Server
	freeC, freeM float64
	jobs         []*job // single-server jobs on it
}

// Place gives every job of jobs (in policy order) cores and memory on
// servers under mode. Jobs on servers it does not know get nothing (no
// grant): the backend leaves their resources as they are.
func Place(mode Mode, servers []Server, jobs []Job, opts Options) (*Result, error) {
	srvs := make(map[string]*srv, len(servers))
	for i := range servers {
		s := &servers[i]
		if s.GPUs <= 0 || !(s.Cores > 0) || !(s.MemGB > 0) {
			return nil, fmt.Errorf("server %s: needs GPUs, cores and memory (gpus %d, cores %g, mem_gb %g)", s.ID, s.GPUs, s.Cores, s.MemGB)
		}
		srvs[s.ID] = &srv{Server: s, freeC: s.Cores, freeM: s.MemGB}
	}
	res := &Result{Grants: map[string]Grant{}}
	var js []*job
	for i := range jobs {
		j := &job{Job: &jobs[i], order: i, prof: jobs[i].Profile, starting: jobs[i].Held == nil || opts.Fresh}
		if j.prof == nil {
			j.prof = synergy.Flat()
		}
		known := true
		for id, n := range j.GPUs {
			s := srvs[id]
			if s == nil || n <= 0 {
				known = false
				break
			}
			j.gpus += n
			f := 1.0
			if j.Shared {
				f = 0.5
			}
			j.propC += f * float64(n) * s.shareCores()
			j.propM += f * float64(n) * s.shareMem()
			if len(j.GPUs) == 1 {
				j.server = s
			}
		}
		if !known || j.gpus == 0 {
			continue
		}
		j.bestC, j.bestM = j.propC, j.propM
		if j.server != nil && !j.Shared {
			j.bestC = math.Min(j.prof.CoresPerGPUBest*float64(j.gpus), j.server.Cores)
			j.bestM = math.Min(j.prof.MemGBPerGPUBest*float64(j.gpus), j.server.MemGB)
		}
		js = append(js, j)
	}
	switch mode {
	case Proportional:
		for _, j := range js {
			j.c, j.m = j.propC, j.propM
		}
	case Tune:
		tune(js, srvs)
		if opts.Leftover {
			leftover(js, srvs)
		}
		if opts.Regrow && !opts.Fresh {
			regrow(js, srvs, opts.RetuneCostS)
		}
	case Greedy:
		res.Skipped = greedy(js, srvs)
	case Opt:
		if err := opt(js, srvs); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("placement %q: unknown", mode)
	}
	skipped := map[string]bool{}
	for _, id := range res.Skipped {
		skipped[id] = true
	}
	for _, j := range js {
		if !skipped[j.ID] {
			res.Grants[j.ID] = Grant{Cores: j.c, MemGB: j.m}
		}
	}
	return res, nil
}

// take charges a grant to the job's servers: a single-server job its whole
// grant, a multi-server one in proportion to its GPUs on each.
func (j *job) take(srvs map[string]*srv, c, m float64) {
	j.c, j.m = c, m
	for id, n := range j.GPUs {
		f := float64(n) / float64(j.gpus)
		srvs[id].freeC -= f * c
		srvs[id].freeM -= f * m
	}
	if j.server != nil {
		j.server.jobs = append(j.server.jobs, j)
	}
}

// fits says whether the job's servers have c cores and m memory left
// (a small tolerance absorbs floating-point shares).
func (j *job) fits(srvs map[string]*srv, c, m float64) bool {
	for id, n := range j.GPUs {
		f := float64(n) / float64(j.gpus)
		s := srvs[id]
		if f*c > s.freeC+eps || f*m > s.freeM+eps {
			return false
		}
	}
	return true
}

const eps = 1e-9

// tune is Synergy-TUNE on fixed GPUs: kept jobs hold what they held; the
// others, in decreasing demand, get the best case, else proportional, else
// proportional after shrinking co-located jobs above proportional.
func tune(js []*job, srvs map[string]*srv) {
	var starting []*job
	for _, j := range js {
		if j.starting {
			starting = append(starting, j)
			continue
		}
		c, m := j.Held.Cores, j.Held.MemGB
		if !(c > 0) || !(m > 0) {
			c, m = j.propC, j.propM
		}
		j.take(srvs, c, m)
	}
	// A kept job's grant may no longer fit (a server shrank, shares
	// changed): shrink every job above proportional on overfull servers.
	for _, s := range srvs {
		if s.freeC < -eps || s.freeM < -eps {
			s.shrink(srvs, nil)
		}
	}
	sort.SliceStable(starting, func(a, b int) bool { return demandLess(starting[b], starting[a]) })
	for _, j := range starting {
		switch {
		case j.fits(srvs, j.bestC, j.bestM):
			j.take(srvs, j.bestC, j.bestM)
		case j.fits(srvs, j.propC, j.propM):
			j.take(srvs, j.propC, j.propM)
		default:
			for id := range j.GPUs {
				srvs[id].shrinkFor(srvs, j)
			}
			j.take(srvs, j.propC, j.propM)
		}
	}
}

// demandLess orders by GPUs, then best-case cores, then memory.
func demandLess(a, b *job) bool {
	if a.gpus != b.gpus {
		return a.gpus < b.gpus
	}
	if a.bestC != b.bestC {
		return a.bestC < b.bestC
	}
	return a.bestM < b.bestM
}

// shrinkFor returns jobs on s holding more than proportional to
// proportional, largest excess first, until j's proportional share fits.
func (s *srv) shrinkFor(srvs map[string]*srv, j *job) {
	f := float64(j.GPUs[s.ID]) / float64(j.gpus)
	needC, needM := f*j.propC, f*j.propM
	s.shrink(srvs, func() bool { return s.freeC+eps >= needC && s.freeM+eps >= needM })
}

// shrink brings jobs above proportional on s back to proportional, the
// largest excess first, until done() (nil: until s is within capacity).
func (s *srv) shrink(srvs map[string]*srv, done func() bool) {
	if done == nil {
		done = func() bool { return s.freeC >= -eps && s.freeM >= -eps }
	}
	over := make([]*job, 0, len(s.jobs))
	for _, o := range s.jobs {
		if o.c > o.propC+eps || o.m > o.propM+eps {
			over = append(over, o)
		}
	}
	sort.SliceStable(over, func(a, b int) bool {
		ea := (over[a].c-over[a].propC)/s.Cores + (over[a].m-over[a].propM)/s.MemGB
		eb := (over[b].c-over[b].propC)/s.Cores + (over[b].m-over[b].propM)/s.MemGB
		return ea > eb
	})
	for _, o := range over {
		if done() {
			return
		}
		s.freeC += o.c - o.propC
		s.freeM += o.m - o.propM
		o.c, o.m = o.propC, o.propM
	}
}

// greedy walks jobs in policy order and gives each its best case where it
// fits; a job whose best case does not fit is skipped. Kept jobs too: the
// strawman re-places everything.
func greedy(js []*job, srvs map[string]*srv) []string {
	var skipped []string
	for _, j := range js {
		if j.fits(srvs, j.bestC, j.bestM) {
			j.take(srvs, j.bestC, j.bestM)
			continue
		}
		skipped = append(skipped, j.ID)
	}
	return skipped
}

// rel is the job's throughput at c cores and m GB (whole job, on its
// server) relative to its proportional share; multi-server and shared jobs
// are not tuned (1).
func (j *job) rel(c, m float64) float64 {
	if j.server == nil || j.Shared {
		return 1
	}
	g := float64(j.gpus)
	base := j.prof.Throughput(j.propC/g, j.propM/g)
	if base <= 0 {
		return 1
	}
	return j.prof.Throughput(c/g, m/g) / base
}

// leftover hands each server's remaining cores and memory to its starting
// jobs: repeatedly, the move to a grid point at or above a job's grant on
// both axes (cores, memory per GPU) with the largest throughput gain per
// share of the server it takes (a profile may gain only when both grow, so
// single steps would stop short). Kept jobs are not grown: growing
// restarts them.
func leftover(js []*job, srvs map[string]*srv) {
	for _, s := range sortedServers(srvs) {
		var cand []*job
		for _, j := range s.jobs {
			if j.starting && !j.Shared {
				cand = append(cand, j)
			}
		}
		for len(cand) > 0 {
			var best *job
			var bestC, bestM, bestGain float64
			for _, j := range cand {
				g := float64(j.gpus)
				now := j.rel(j.c, j.m)
				for _, cpg := range j.prof.CoresAxis {
					for _, mpg := range j.prof.MemAxis {
						c, m := math.Max(cpg*g, j.c), math.Max(mpg*g, j.m)
						dc, dm := c-j.c, m-j.m
						if dc+dm <= eps || dc > s.freeC+eps || dm > s.freeM+eps {
							continue
						}
						gain := (j.rel(c, m) - now) / (dc/s.Cores + dm/s.MemGB)
						if gain > bestGain+eps {
							best, bestC, bestM, bestGain = j, c, m, gain
						}
					}
				}
			}
			if best == nil {
				break
			}
			s.freeC -= bestC - best.c
			s.freeM -= bestM - best.m
			best.c, best.m = bestC, bestM
		}
	}
}

func sortedServers(srvs map[string]*srv) []*srv {
	out := make([]*srv, 0, len(srvs))
	for _, s := range srvs {
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// regrow grows kept jobs below their best case to it where their server
// has the room left (Options.Regrow), the largest relative gain first,
// when the time saved over the rest of the run exceeds cost.
func regrow(js []*job, srvs map[string]*srv, cost float64) {
	type cand struct {
		j      *job
		c, m   float64
		gain   float64 // new speed / current
		savedS float64
	}
	var cs []cand
	for _, j := range js {
		if j.starting || j.server == nil || j.Shared {
			continue
		}
		c, m := math.Max(j.c, j.bestC), math.Max(j.m, j.bestM)
		if c-j.c+m-j.m <= eps {
			continue
		}
		now, next := j.rel(j.c, j.m), j.rel(c, m)
		if !(now > 0) || next <= now*(1+1e-6) {
			continue
		}
		saved := math.Inf(1)
		if j.RemainingS > 0 {
			saved = j.RemainingS/now - j.RemainingS/next
		}
		if saved <= cost {
			continue
		}
		cs = append(cs, cand{j, c, m, next / now, saved})
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].gain > cs[b].gain })
	for _, x := range cs {
		s := x.j.server
		dc, dm := x.c-x.j.c, x.m-x.j.m
		if dc > s.freeC+eps || dm > s.freeM+eps {
			continue
		}
		s.freeC -= dc
		s.freeM -= dm
		x.j.c, x.j.m = x.c, x.m
	}
}

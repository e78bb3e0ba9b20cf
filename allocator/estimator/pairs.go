package estimator

import (
	"fmt"
	"slices"
	"sync"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// PairOnline keeps the online estimates of colocated pairs: both jobs'
// steps/s while they share a GPU of a type, learned from what they report
// (the n-th sample weighs max(1/n, alpha), as Online). It is safe for
// concurrent use.
type PairOnline struct {
	alpha float64

	mu   sync.Mutex
	m    map[pairID]*pairStat
	jobs map[string]int // pairs measured per job
}

// pairID names a pair in a canonical order (a < b).
type pairID struct{ a, b, typ string }

type pairStat struct {
	v [2]float64
	n int
}

// NewPairOnline returns a pair estimator (alpha as NewOnline).
func NewPairOnline(alpha float64) *PairOnline {
	if alpha <= 0 || alpha > 1 {
		alpha = DefaultAlpha
	}
	return &PairOnline{alpha: alpha, m: map[pairID]*pairStat{}, jobs: map[string]int{}}
}

func canon(a, b, typ string, v [2]float64) (pairID, [2]float64) {
	if b < a {
		return pairID{b, a, typ}, [2]float64{v[1], v[0]}
	}
	return pairID{a, b, typ}, v
}

// Observe records that a and b, sharing a GPU of typ, ran at v (a's
// steps/s, then b's). Non-positive samples are ignored: a pair that cannot
// share is known from the table or from a failed run, not from a report.
func (p *PairOnline) Observe(a, b, typ string, v [2]float64) {
	if !(v[0] > 0) || !(v[1] > 0) || a == b {
		return
	}
	id, v := canon(a, b, typ, v)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[id]
	if s == nil {
		s = &pairStat{}
		p.m[id] = s
		p.jobs[id.a]++
		p.jobs[id.b]++
	}
	s.n++
	w := max(1/float64(s.n), p.alpha)
	for k := range v {
		s.v[k] += w * (v[k] - s.v[k])
	}
}

// Pair is the estimate of a and b on typ (a's, then b's steps/s) and the
// number of samples behind it (0: never measured).
func (p *PairOnline) Pair(a, b, typ string) ([2]float64, int) {
	id, _ := canon(a, b, typ, [2]float64{})
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[id]
	if s == nil {
		return [2]float64{}, 0
	}
	if id.a != a {
		return [2]float64{s.v[1], s.v[0]}, s.n
	}
	return s.v, s.n
}

// Has reports whether some pair of job was measured.
func (p *PairOnline) Has(job string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs[job] > 0
}

// Retain drops every pair with a job active does not keep (it left).
func (p *PairOnline) Retain(active func(job string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for job := range p.jobs {
		if active(job) {
			continue
		}
		delete(p.jobs, job)
		for id := range p.m {
			if id.a == job || id.b == job {
				delete(p.m, id)
				other := id.a
				if other == job {
					other = id.b
				}
				if p.jobs[other]--; p.jobs[other] <= 0 {
					delete(p.jobs, other)
				}
			}
		}
	}
}

// DefaultProfiles is how many reference jobs a new job is profiled against
// before its pairs are completed (Gavel profiles against a few).
const DefaultProfiles = 3

// Completer estimates the colocated throughputs of a job whose model the
// reference matrix lacks, from the pairs it was measured in with reference
// jobs (Reference.Estimate), per GPU type and scale factor. Completions are
// cached until the job's measurements change. Not safe for concurrent use.
type Completer struct {
	table *throughputs.Table
	opt   Options
	refs  map[refID]*Reference
	cache map[estID]cachedEstimate
}

type refID struct {
	typ string
	sf  int
}

type estID struct {
	job, typ string
}

type cachedEstimate struct {
	ms  []Measurement
	est *Estimate
}

// NewCompleter completes against t's pairs with opt.
func NewCompleter(t *throughputs.Table, opt Options) *Completer {
	return &Completer{table: t, opt: opt, refs: map[refID]*Reference{}, cache: map[estID]cachedEstimate{}}
}

// Reference is the reference matrix of typ's configurations of scale
// factor sf, nil when the table has fewer than two.
func (c *Completer) Reference(typ string, sf int) *Reference {
	id := refID{typ, sf}
	if r, ok := c.refs[id]; ok {
		return r
	}
	var keys []throughputs.Key
	for _, k := range c.table.Keys(typ) {
		if k.ScaleFactor == sf {
			keys = append(keys, k)
		}
	}
	var r *Reference
	if len(keys) >= 2 {
		r, _ = NewReferenceKeys(c.table, typ, keys)
	}
	c.refs[id] = r
	return r
}

// Estimate completes job's row and column on typ's reference r from ms
// (its profiles: one per reference job), or returns the cached completion
// when ms did not change.
func (c *Completer) Estimate(job, typ string, r *Reference, ms []Measurement) (*Estimate, error) {
	id := estID{job, typ}
	if ce, ok := c.cache[id]; ok && slices.Equal(ce.ms, ms) {
		return ce.est, nil
	}
	e, err := r.Estimate(ms, c.opt)
	if err != nil {
		return nil, fmt.Errorf("estimator: %s on %s: %w", job, typ, err)
	}
	c.cache[id] = cachedEstimate{ms: slices.Clone(ms), est: e}
	return e, nil
}

// Forget drops job's completions (it left).
func (c *Completer) Forget(job string) {
	for id := range c.cache {
		if id.job == job {
			delete(c.cache, id)
		}
	}
}

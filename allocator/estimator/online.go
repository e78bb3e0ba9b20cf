// Package estimator learns throughputs online and estimates the colocated
// throughputs of job pairs that were never measured (Gavel §3.3, §6).
//
// Isolated throughputs (Online) are exponentially weighted means of what
// running jobs report, per (job, GPU type), falling back to a prior such as
// the throughput table's value for the job's model.
//
// Colocated throughputs (Reference, Complete, LeaveOneOut) follow Gavel: the
// pre-profiled job types form a reference colocation matrix per GPU type
// (entry (i, j) = i's steps/s when sharing a GPU with j, over i's isolated
// steps/s). A new job is profiled against a few reference jobs; its missing
// row and column are filled by low-rank matrix completion (alternating least
// squares with row and column biases), and it is also matched to its most
// similar reference job.
package estimator

import (
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// PriorFunc gives a job's isolated steps/s on a GPU type before anything was
// measured; ok is false when there is no prior.
type PriorFunc func(job, gpuType string) (float64, bool)

// TablePrior is a PriorFunc reading t for the configuration model(job)
// returns (ok false: no prior).
func TablePrior(t *throughputs.Table, model func(job string) (throughputs.Key, bool)) PriorFunc {
	return func(job, gpuType string) (float64, bool) {
		k, ok := model(job)
		if !ok {
			return 0, false
		}
		return t.Isolated(k, gpuType)
	}
}

// DefaultAlpha is the weight of a new sample once more than 1/DefaultAlpha
// samples were seen.
const DefaultAlpha = 0.2

type stat struct {
	mean float64
	n    int
}

// Online keeps the online isolated-throughput estimates. It is safe for
// concurrent use.
type Online struct {
	alpha float64
	prior PriorFunc

	mu sync.Mutex
	m  map[string]map[string]*stat // job → GPU type
}

// NewOnline returns an estimator whose weight for the n-th sample is
// max(1/n, alpha): the plain mean of the first 1/alpha samples, then an
// exponentially weighted mean (alpha <= 0 or > 1 means DefaultAlpha). prior
// may be nil.
func NewOnline(alpha float64, prior PriorFunc) *Online {
	if alpha <= 0 || alpha > 1 {
		alpha = DefaultAlpha
	}
	return &Online{alpha: alpha, prior: prior, m: make(map[string]map[string]*stat)}
}

// Observe records one report of job's steps/s on gpuType. Negative, NaN and
// infinite reports are ignored.
func (o *Online) Observe(job, gpuType string, stepsPerSec float64) {
	if stepsPerSec < 0 || math.IsNaN(stepsPerSec) || math.IsInf(stepsPerSec, 0) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	js := o.m[job]
	if js == nil {
		js = map[string]*stat{}
		o.m[job] = js
	}
	s := js[gpuType]
	if s == nil {
		s = &stat{}
		js[gpuType] = s
	}
	s.n++
	w := math.Max(1/float64(s.n), o.alpha)
	s.mean += w * (stepsPerSec - s.mean)
}

// Isolated is the estimate of job's isolated steps/s on gpuType: the
// measured mean when there is one, else the prior; ok is false when neither
// exists.
func (o *Online) Isolated(job, gpuType string) (float64, bool) {
	o.mu.Lock()
	s := o.m[job][gpuType]
	var v float64
	if s != nil {
		v = s.mean
	}
	o.mu.Unlock()
	if s != nil {
		return v, true
	}
	if o.prior != nil {
		return o.prior(job, gpuType)
	}
	return 0, false
}

// Samples is the number of reports recorded for (job, gpuType).
func (o *Online) Samples(job, gpuType string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.m[job][gpuType]; s != nil {
		return s.n
	}
	return 0
}

// Types lists, sorted, the GPU types job was measured on.
func (o *Online) Types(job string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.m[job]))
}

// Forget drops a job's measurements (for example when it finishes).
func (o *Online) Forget(job string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, job)
}

// Means is every job's measured means per GPU type (a copy): the rows
// CompleteTypes learns other jobs' ratios between types from, finished
// jobs' included.
func (o *Online) Means() map[string]map[string]float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]map[string]float64, len(o.m))
	for j, ts := range o.m {
		m := make(map[string]float64, len(ts))
		for t, s := range ts {
			m[t] = s.mean
		}
		out[j] = m
	}
	return out
}

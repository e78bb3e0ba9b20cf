package philly

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// Tenant is a virtual cluster submitting jobs.
type Tenant struct {
	VC string
	// Share is the tenant's relative weight in the job stream (for
	// example its quota in GPUs).
	Share float64
	// GPUs, when set, restricts the tenant to rows with these GPU counts
	// (for example only 1-GPU jobs); otherwise it draws from every row.
	GPUs []int
}

// Options describe a multi-tenant trace.
type Options struct {
	Seed    uint64
	Jobs    int
	Tenants []Tenant
	// ClusterGPUs and Load set the arrival rate: jobs arrive as a Poisson
	// process (first at t = 0) offering Load × ClusterGPUs GPUs on average,
	// that is rate = Load × ClusterGPUs / E[GPUs × duration].
	ClusterGPUs int
	Load        float64
	// Opportunistic is the probability that a job is opportunistic.
	Opportunistic float64
	// MaxDurationS caps durations (0: no cap).
	MaxDurationS float64
	// WorkShares makes tenants' shares fractions of the offered GPU time
	// instead of fractions of the jobs (they differ when tenants draw
	// different GPU counts).
	WorkShares bool
}

// Job is one job of a trace. IDs follow arrival order.
type Job struct {
	ID            int
	VC            string
	ArrivalS      float64
	DurationS     float64
	GPUs          int
	Opportunistic bool
}

// Rate returns the arrival rate (jobs per second) that o offers on dist.
func Rate(dist []Pair, o Options) (float64, error) {
	_, rate, err := prepare(dist, o)
	return rate, err
}

// prepare resolves each tenant's rows and the arrival rate.
func prepare(dist []Pair, o Options) ([][]Pair, float64, error) {
	rows, _, rate, err := prepareWeights(dist, o)
	return rows, rate, err
}

// prepareWeights also returns each tenant's weight in the job stream.
func prepareWeights(dist []Pair, o Options) ([][]Pair, []float64, float64, error) {
	if len(dist) == 0 {
		return nil, nil, 0, errors.New("philly: empty distribution")
	}
	if len(o.Tenants) == 0 {
		return nil, nil, 0, errors.New("philly: no tenants")
	}
	if o.ClusterGPUs <= 0 || !(o.Load > 0) || math.IsInf(o.Load, 0) {
		return nil, nil, 0, fmt.Errorf("philly: cluster GPUs %d and load %g must be positive", o.ClusterGPUs, o.Load)
	}
	if !(o.Opportunistic >= 0 && o.Opportunistic <= 1) {
		return nil, nil, 0, fmt.Errorf("philly: opportunistic fraction %g outside [0, 1]", o.Opportunistic)
	}
	rows := make([][]Pair, len(o.Tenants))
	for i, t := range o.Tenants {
		if !(t.Share > 0) || math.IsInf(t.Share, 0) {
			return nil, nil, 0, fmt.Errorf("philly: tenant %q: share %g must be positive", t.VC, t.Share)
		}
		for _, p := range dist {
			if len(t.GPUs) == 0 || slices.Contains(t.GPUs, p.GPUs) {
				if o.MaxDurationS > 0 {
					p.DurationS = min(p.DurationS, o.MaxDurationS)
				}
				rows[i] = append(rows[i], p)
			}
		}
		if len(rows[i]) == 0 {
			return nil, nil, 0, fmt.Errorf("philly: tenant %q: no rows with GPU counts %v", t.VC, t.GPUs)
		}
	}
	mean := make([]float64, len(rows)) // E[GPUs × duration] per tenant
	for i := range rows {
		for _, p := range rows[i] {
			mean[i] += float64(p.GPUs) * p.DurationS
		}
		mean[i] /= float64(len(rows[i]))
	}
	weights := make([]float64, len(rows))
	wsum := 0.0
	for i, t := range o.Tenants {
		weights[i] = t.Share
		if o.WorkShares {
			weights[i] = t.Share / mean[i]
		}
		wsum += weights[i]
	}
	work := 0.0 // E[GPUs × duration] over the job mix
	for i := range weights {
		work += weights[i] / wsum * mean[i]
	}
	return rows, weights, o.Load * float64(o.ClusterGPUs) / work, nil
}

// Generate draws o.Jobs jobs. Per job it draws, in this order, from one
// PCG stream seeded with o.Seed: the gap since the previous arrival (not
// for the first job), the tenant (by share), the row (uniform among the
// tenant's rows) and whether it is opportunistic. Conversions from the
// stream's 64-bit words are done here, so traces do not depend on
// math/rand's helpers.
func Generate(dist []Pair, o Options) ([]Job, error) {
	rows, weights, rate, err := prepareWeights(dist, o)
	if err != nil {
		return nil, err
	}
	if o.Jobs < 0 {
		return nil, fmt.Errorf("philly: %d jobs", o.Jobs)
	}
	cum := make([]float64, len(weights))
	acc := 0.0
	for i, w := range weights {
		acc += w
		cum[i] = acc
	}
	src := rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15)
	unit := func() float64 { return float64(src.Uint64()>>11) / (1 << 53) } // [0, 1)
	index := func(n int) int {
		hi, _ := bits.Mul64(src.Uint64(), uint64(n)) // Lemire's range reduction
		return int(hi)
	}
	jobs := make([]Job, o.Jobs)
	now := 0.0
	for i := range jobs {
		if i > 0 {
			now += -math.Log1p(-unit()) / rate
		}
		u := unit() * acc
		t := 0
		for t < len(cum)-1 && u >= cum[t] {
			t++
		}
		p := rows[t][index(len(rows[t]))]
		jobs[i] = Job{ID: i, VC: o.Tenants[t].VC, ArrivalS: now, DurationS: p.DurationS, GPUs: p.GPUs,
			Opportunistic: unit() < o.Opportunistic}
	}
	return jobs, nil
}

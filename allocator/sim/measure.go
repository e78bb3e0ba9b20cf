package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/round"
)

// measureStream tells the measurement noise's generator apart from the
// other draws seeded by the same --seed.
const measureStream = 0x6d656173757265 // "measure"

// measurer makes the simulated jobs report noisy throughputs
// (Options.MeasureNoise): a job that ran alone at its scale factor in a
// round reports its true steps/s on that type times exp(N(0, sigma)),
// carried by the next snapshot (engine.Job.Measured); the decider is
// wrapped in the estimating stage (round.Estimating), which decides on the
// estimates while the simulator keeps advancing jobs at the true
// throughput.
type measurer struct {
	sigma  float64
	rng    *rand.Rand
	online *estimator.Online
	next   loop.Decider
	s      *simulator
	// The relative error of the estimates the decider used, over every
	// (round, job, measured type); and (tests) of each new estimate, by
	// the number of samples behind it.
	errSum    float64
	errN      int
	bySamples map[int]errStat
	// pairs are the colocated runs' reports for the next snapshot
	// (engine.Pair.Measured), by the pair's jobs in the assignment's order.
	pairs       map[[2]string]map[string][2]float64
	pairReports int // pair measurements handed to snapshots (tests)
}

type errStat struct {
	sum float64
	n   int
}

func (s *simulator) initMeasure(next loop.Decider) (loop.Decider, error) {
	sigma := s.o.MeasureNoise
	if sigma == 0 {
		return next, nil
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return nil, fmt.Errorf("sim: measurement noise %v: want a finite sigma ≥ 0", sigma)
	}
	if s.o.Ideal {
		return nil, fmt.Errorf("sim: measurement noise with the ideal baseline: nothing runs in rounds to measure")
	}
	s.meas = &measurer{sigma: sigma, rng: rand.New(rand.NewPCG(uint64(s.o.Engine.Seed), measureStream)),
		online: estimator.NewOnline(0, nil), next: next, s: s, bySamples: map[int]errStat{},
		pairs: map[[2]string]map[string][2]float64{}}
	e := &round.Estimating{Next: s.meas, Online: s.meas.online, Pairs: round.NewPairEstimates(s.tb)}
	if st := s.prof.stage; st != nil {
		// As the agent: the stage takes the cores' and memory's speed-up
		// out of the reports before the estimator learns them.
		e.Before = func(snap *engine.Snapshot) {
			if s.o.Placement.Learn {
				hideNames(snap)
			}
			st.Normalize(snap)
		}
	}
	return e, nil
}

// measure records a report of js on typ for the next snapshot (complete).
// A job of a colocated pair reports its pair throughput, learned as the
// pair's (both jobs must report, as on Nomad). With placement a job alone
// reports what it ran at under its cores and memory (as on Nomad),
// noiseless with Placement.Learn and no --measure-noise.
func (s *simulator) measure(js *jobState, m *micro, i int) {
	// With placement a job reports what it ran at under its cores and
	// memory, as on Nomad (the estimating stage normalises it first).
	learn := s.o.Placement != nil && (s.o.Placement.Learn || s.meas != nil)
	if (s.meas == nil && !learn) || js.remaining <= 0 || m.typ == "" || m.steps[i] <= 0 ||
		len(m.gpus) != max(js.tj.ScaleFactor, 1) {
		// Resized or idle runs do not measure the throughput at the
		// job's scale factor.
		return
	}
	if len(m.jobs) == 2 {
		if s.meas == nil {
			return
		}
		k := [2]string{m.jobs[0].id, m.jobs[1].id}
		byType := s.meas.pairs[k]
		if byType == nil {
			byType = map[string][2]float64{}
			s.meas.pairs[k] = byType
		}
		v := byType[m.typ]
		v[i] = m.tput[i] * math.Exp(s.meas.rng.NormFloat64()*s.meas.sigma)
		byType[m.typ] = v
		return
	}
	if js.measured == nil {
		js.measured = map[string]float64{}
	}
	v := js.tput[m.typ]
	if learn {
		v = m.tput[i]
	}
	if s.meas != nil {
		v *= math.Exp(s.meas.rng.NormFloat64() * s.meas.sigma)
	}
	js.measured[m.typ] = v
}

// pairsMeasured puts the pairs' reports in pairs (a copy when there are
// any: the simulator keeps its list) and starts gathering anew.
func (d *measurer) pairsMeasured(pairs []engine.Pair) []engine.Pair {
	if d == nil || len(d.pairs) == 0 {
		return pairs
	}
	out := slices.Clone(pairs)
	for i := range out {
		p := &out[i]
		byType, flip := d.pairs[p.Jobs], false
		if byType == nil {
			byType, flip = d.pairs[[2]string{p.Jobs[1], p.Jobs[0]}], true
		}
		for typ, v := range byType {
			if flip {
				v[0], v[1] = v[1], v[0]
			}
			if v[0] > 0 && v[1] > 0 {
				if p.Measured == nil {
					p.Measured = map[string][2]float64{}
				}
				p.Measured[typ] = v
				d.pairReports++
			}
		}
	}
	clear(d.pairs)
	return out
}

// Round scores the estimates the stage put in the snapshot against the
// truth, then lets the wrapped decider decide.
func (d *measurer) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	for _, j := range snap.Jobs {
		js := d.s.byIDs[j.ID]
		if js == nil {
			continue
		}
		for _, typ := range d.s.types { // sorted: the sums are reproducible
			v := j.Throughput[typ]
			n := d.online.Samples(j.ID, typ)
			truth := js.tput[typ]
			if n == 0 || truth <= 0 {
				continue
			}
			e := math.Abs(v-truth) / truth
			d.errSum += e
			d.errN++
			if _, fresh := j.Measured[typ]; fresh {
				b := d.bySamples[n]
				b.sum += e
				b.n++
				d.bySamples[n] = b
			}
		}
	}
	return d.next.Round(snap)
}

// estimateError is the mean relative error of the estimates decided on.
func (d *measurer) estimateError() float64 {
	if d == nil || d.errN == 0 {
		return 0
	}
	return d.errSum / float64(d.errN)
}

// Quotas are the wrapped decider's VC quotas (loop.QuotasOf).
func (m *measurer) Quotas() engine.Quotas { return loop.QuotasOf(m.next) }

package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

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
		online: estimator.NewOnline(0, nil), next: next, s: s, bySamples: map[int]errStat{}}
	return &round.Estimating{Next: s.meas, Online: s.meas.online}, nil
}

// measure records a report of js on typ for the next snapshot (complete).
func (s *simulator) measure(js *jobState, m *micro, i int) {
	if s.meas == nil || js.remaining <= 0 || len(m.jobs) != 1 || m.typ == "" || m.steps[i] <= 0 ||
		len(m.gpus) != max(js.tj.ScaleFactor, 1) {
		// Colocated, resized or idle runs do not measure the isolated
		// throughput at the job's scale factor.
		return
	}
	if js.measured == nil {
		js.measured = map[string]float64{}
	}
	js.measured[m.typ] = js.tput[m.typ] * math.Exp(s.meas.rng.NormFloat64()*s.meas.sigma)
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

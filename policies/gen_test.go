package policies

import (
	"fmt"
	"math/rand"
)

// randomProblem builds a random instance with the shape of the notes'
// benchmark: 3 GPU types, throughputs varying per type, scale factors
// 1/2/4/8 at 70/10/15/5%, weights 1 or 2, and about one GPU per eight jobs so
// the capacity rows bind.
func randomProblem(rng *rand.Rand, n int, gpus int) *Problem {
	p := &Problem{GPUTypes: map[string]GPUType{
		"k80":  {Count: gpus / 3, CostPerHour: 0.45},
		"p100": {Count: gpus / 3, CostPerHour: 1.46},
		"v100": {Count: gpus - 2*(gpus/3), CostPerHour: 2.48},
	}}
	for m := 0; m < n; m++ {
		u := rng.Float64()
		sf := 1
		switch {
		case u < 0.70:
			sf = 1
		case u < 0.80:
			sf = 2
		case u < 0.95:
			sf = 4
		default:
			sf = 8
		}
		base := 0.5 + rng.Float64()*10
		tp := map[string]float64{
			"v100": base * (2 + rng.Float64()*2),
			"p100": base * (1 + rng.Float64()*1.5),
			"k80":  base * (0.3 + rng.Float64()),
		}
		if rng.Float64() < 0.1 {
			tp["k80"] = 0 // cannot run there
		}
		w := 1.0
		if rng.Float64() < 0.3 {
			w = 2
		}
		slo := 3600 * (1 + rng.Float64()*100)
		p.Jobs = append(p.Jobs, Job{
			ID: fmt.Sprintf("j%d", m), Throughput: tp, ScaleFactor: sf, Weight: w,
			RemainingSteps: 1000 + rng.Float64()*1e6, TimeSinceStartS: rng.Float64() * 36000,
			SLOs: &slo, Entity: fmt.Sprintf("e%d", m%3),
		})
	}
	return p
}

// addPairs adds measured-looking pair throughputs for every pair of jobs with
// equal scale factor among the first limit jobs.
func addPairs(rng *rand.Rand, p *Problem, limit int) {
	for a := 0; a < len(p.Jobs) && a < limit; a++ {
		for b := a + 1; b < len(p.Jobs) && b < limit; b++ {
			ja, jb := p.Jobs[a], p.Jobs[b]
			if ja.ScaleFactor != jb.ScaleFactor {
				continue
			}
			tp := map[string][2]float64{}
			for t := range p.GPUTypes {
				fa, fb := 0.3+rng.Float64()*0.6, 0.3+rng.Float64()*0.6
				tp[t] = [2]float64{ja.Throughput[t] * fa, jb.Throughput[t] * fb}
			}
			p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{ja.ID, jb.ID}, Throughput: tp})
		}
	}
}

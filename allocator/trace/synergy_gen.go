package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/pyrand"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// SynergyClasses are the model classes of Synergy's synthetic workload, in
// the order of a class split, and the models each class cycles through
// (the reference's model zoo, jobs/model_zoo.py).
var SynergyClasses = [3]struct {
	Name   string
	Models []string
}{
	{"image", []string{"alexnet", "res18", "res50", "mobilenet", "shufflenet"}},
	{"language", []string{"gnmt", "transformer", "lstm"}},
	{"speech", []string{"m5", "deepspeech"}},
}

// DefaultSynergySplit is the paper's default class split, percent of jobs
// that are image, language and speech models.
var DefaultSynergySplit = [3]float64{20, 70, 10}

// SynergyOptions configure Synergy's synthetic trace (the paper's
// continuous setup).
type SynergyOptions struct {
	// Seed seeds the one generator every draw comes from, as the
	// reference's random.seed(seed) (its runs use 42).
	Seed int64
	// Rate is λ in jobs per hour; 0 makes a static trace (every job at
	// t = 0, the same jobs as any rate's trace of the seed).
	Rate float64
	// MultiGPU keeps the drawn GPU counts (1/2/4/8); off, every job takes
	// one GPU (the draw is still made), as the paper's single-GPU runs.
	MultiGPU bool
	// Split is the percent of image, language and speech jobs (zero value:
	// DefaultSynergySplit). Each ≥ 0, the sum in (0, 100].
	Split [3]float64
	// Profiles give each model's iteration time (nil: synergy.Default()).
	Profiles *synergy.Table
}

// SynergyGenerator yields Synergy's synthetic jobs in arrival order, as the
// reference simulator draws them in its synthetic mode (runner.py without a
// trace or a Philly log; jobs/workload.py generate_next_job,
// helpers/utils.py, jobs/model_zoo.py), through allocator/pyrand.
//
// Per job, from the one generator seeded Seed, in this order:
//   - the gap to the previous arrival, ⌈−ln(1−U)/Rate · 3600⌉ whole
//     seconds (the first job's from t = 0);
//   - the duration: random() ≥ 0.8 gives 60·10^U(3,4) s, else
//     60·10^U(1.5,3) s;
//   - the GPU count from uniform(0,1): ≥ 0.95 → 8, [0.8, 0.95) → 4,
//     [0.7, 0.8) → 2, else 1 (the reference's synthetic path always
//     keeps it; without MultiGPU it is drawn and every job takes 1 GPU,
//     as the paper's single-GPU runs of its Philly-derived workload);
//   - randint(0, 9), a draw the reference makes and discards.
//
// The class is not random: the reference's "overall" assignment picks the
// class furthest below its share, percent/100 − (its jobs so far / all jobs
// so far), the first of image, language, speech on a tie (all tie at 0
// before the first job); within a class the models take turns in
// SynergyClasses order. Iterations = ⌊duration / iter_time⌋ with the
// model's 1-GPU iter_time_s, whatever the GPU count; the job runs
// 1/iter_time_s iterations per second at the proportional share
// (StepsPerS), as ReadSynergy reads them.
type SynergyGenerator struct {
	o       SynergyOptions
	rng     *pyrand.Random
	iter    map[string]float64
	total   int
	perCls  [3]int
	turn    [3]int
	next    int
	arrival float64
}

// NewSynergyGenerator checks the options and starts a trace.
func NewSynergyGenerator(o SynergyOptions) (*SynergyGenerator, error) {
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return nil, fmt.Errorf("trace: rate must be a non-negative number of jobs per hour, got %v", o.Rate)
	}
	if o.Split == [3]float64{} {
		o.Split = DefaultSynergySplit
	}
	sum := 0.0
	for i, p := range o.Split {
		if !(p >= 0) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("trace: class split: %s %v: want a percent ≥ 0", SynergyClasses[i].Name, p)
		}
		sum += p
	}
	if !(sum > 0) || sum > 100+1e-9 {
		return nil, fmt.Errorf("trace: class split %v/%v/%v: want percents summing to more than 0 and at most 100", o.Split[0], o.Split[1], o.Split[2])
	}
	if o.Profiles == nil {
		o.Profiles = synergy.Default()
	}
	g := &SynergyGenerator{o: o, rng: pyrand.New(o.Seed), iter: map[string]float64{}}
	for _, c := range SynergyClasses {
		for _, m := range c.Models {
			it, err := synergyIterTime(o.Profiles, m)
			if err != nil {
				return nil, fmt.Errorf("trace: model %s: %v", m, err)
			}
			g.iter[m] = it
		}
	}
	return g, nil
}

// synergyIterTime is a model's iteration time at the proportional share,
// from its 1-GPU profile in the `models` set (as the reference reads it).
func synergyIterTime(tb *synergy.Table, model string) (float64, error) {
	set := tb.Sets["models"]
	if set == nil {
		set = tb.SetFor(synergy.BaseCoresPerGPU)
	}
	p, err := set.Lookup(model, 1)
	if err != nil {
		return 0, err
	}
	if !(p.IterTimeS > 0) {
		return 0, fmt.Errorf("its profile has no iter_time_s")
	}
	return p.IterTimeS, nil
}

// SynergyGPUsFromUniform maps the reference's uniform(0,1) draw to a GPU
// count (helpers/utils.py get_job_gpu_demand): probabilities
// 0.70/0.10/0.15/0.05 for 1/2/4/8.
func SynergyGPUsFromUniform(r float64) int {
	switch {
	case r >= 0.95:
		return 8
	case r >= 0.8:
		return 4
	case r >= 0.7:
		return 2
	}
	return 1
}

// class is the reference's overall assignment: the class with the highest
// percent/100 − share so far, the first on a tie.
func (g *SynergyGenerator) class() int {
	best, bestP := 0, math.Inf(-1)
	for i := range SynergyClasses {
		p := 0.0 // the reference's priorities start at 0, before any job
		if g.total > 0 {
			p = g.o.Split[i]/100 - float64(g.perCls[i])/float64(g.total)
		}
		if p > bestP {
			best, bestP = i, p
		}
	}
	return best
}

// Next returns the next job.
func (g *SynergyGenerator) Next() (Job, error) {
	rng := g.rng
	u := rng.Random()
	if g.o.Rate > 0 {
		hours := -math.Log(1.0-u) / g.o.Rate
		g.arrival += math.Ceil(hours * 60 * 60)
	}
	var duration float64
	if rng.Random() >= 0.8 {
		duration = 60 * pow10(rng.Uniform(3, 4))
	} else {
		duration = 60 * pow10(rng.Uniform(1.5, 3))
	}
	gpus := SynergyGPUsFromUniform(rng.Uniform(0, 1))
	if !g.o.MultiGPU {
		gpus = 1
	}
	rng.RandRange(0, 10) // randint(0, 9), discarded by the overall assignment
	c := g.class()
	models := SynergyClasses[c].Models
	model := models[g.turn[c]%len(models)]
	g.turn[c]++
	g.perCls[c]++
	g.total++
	it := g.iter[model]
	steps := math.Trunc(duration / it)
	if steps < 1 {
		steps = 1
	}
	j := Job{ID: g.next, Model: model, Profile: model, ScaleFactor: gpus, TotalSteps: steps,
		DurationS: steps * it, Priority: 1, ArrivalS: g.arrival,
		StepsPerS: map[string]float64{SynergyType: 1 / it}}
	g.next++
	return j, nil
}

// GenerateSynergy returns the first n jobs of a Synergy synthetic trace.
func GenerateSynergy(o SynergyOptions, n int) ([]Job, error) {
	g, err := NewSynergyGenerator(o)
	if err != nil {
		return nil, err
	}
	return take(g, n)
}

// WriteSynergy writes jobs in the reference's trace format (ReadSynergy's,
// the reference's --replay_trace and record_trace format):
// "job_id,model,arrival_s,iterations,gpus", one job a line.
func WriteSynergy(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	for _, j := range jobs {
		if strings.ContainsAny(j.Model, ",\n") {
			return fmt.Errorf("trace: job %d: model %q cannot be written in Synergy's format", j.ID, j.Model)
		}
		fmt.Fprintf(bw, "%d,%s,%s,%s,%d\n", j.ID, j.Model, strconv.FormatFloat(j.ArrivalS, 'f', -1, 64),
			strconv.FormatFloat(j.TotalSteps, 'f', -1, 64), j.ScaleFactor)
	}
	return bw.Flush()
}

// ParseSynergySplit reads a class split "IMAGE/LANGUAGE/SPEECH" (or with
// commas), percents, e.g. "20/70/10".
func ParseSynergySplit(s string) ([3]float64, error) {
	var out [3]float64
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == ',' })
	if len(f) != 3 {
		return out, fmt.Errorf("class split %q: want IMAGE/LANGUAGE/SPEECH percents, e.g. 20/70/10", s)
	}
	for i, p := range f {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return out, fmt.Errorf("class split %q: %s %q: want a percent ≥ 0", s, SynergyClasses[i].Name, p)
		}
		out[i] = v
	}
	if sum := out[0] + out[1] + out[2]; !(sum > 0) || sum > 100+1e-9 {
		return out, fmt.Errorf("class split %q: want percents summing to more than 0 and at most 100", s)
	}
	return out, nil
}

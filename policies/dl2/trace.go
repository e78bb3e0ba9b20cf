package dl2

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
)

// TraceJob is one job of a DL2 trace: its model, arrival and the epochs
// it trains.
type TraceJob struct {
	ID, Model string
	ArrivalS  float64 // seconds from the trace's start
	Epochs    float64 // > 0
}

// TraceHeader is the trace's (optional) header line.
const TraceHeader = "id,model,arrival_s,epochs"

// ParseTrace reads a trace: lines id,model,arrival_s,epochs; blank lines
// and lines starting with '#' are skipped, and the first line may be
// the header TraceHeader. A model must be one of models (any model when
// models is empty). Errors are one line naming the file, the line and
// the field, e.g. `t.csv:4: epochs: must be > 0, got "-3"`. The jobs come
// back sorted by arrival (stable: equal arrivals keep the file's order).
func ParseTrace(name string, r io.Reader, models Models) ([]TraceJob, error) {
	var jobs []TraceJob
	seen := map[string]int{} // id -> line
	first := true
	_, err := eachRecord(name, r, func(line int, text string, f []string) error {
		if first {
			first = false
			if f[0] == "id" {
				if strings.Join(f, ",") != TraceHeader {
					return fmt.Errorf("%s:%d: header: want %q, got %q", name, line, TraceHeader, text)
				}
				return nil
			}
		}
		if len(f) != 4 {
			return fmt.Errorf("%s:%d: want 4 fields (%s), got %d", name, line, TraceHeader, len(f))
		}
		j := TraceJob{ID: f[0], Model: f[1]}
		if j.ID == "" {
			return fmt.Errorf("%s:%d: id: empty", name, line)
		}
		if l, ok := seen[j.ID]; ok {
			return fmt.Errorf("%s:%d: id: duplicate %q (first on line %d)", name, line, j.ID, l)
		}
		seen[j.ID] = line
		if j.Model == "" {
			return fmt.Errorf("%s:%d: model: empty", name, line)
		}
		if _, ok := models[j.Model]; len(models) > 0 && !ok {
			return fmt.Errorf("%s:%d: model: unknown model %q (known: %s)", name, line, j.Model, strings.Join(models.Names(), ", "))
		}
		a, err := strconv.ParseFloat(f[2], 64)
		switch {
		case err != nil && !isRange(err):
			return fmt.Errorf("%s:%d: arrival_s: not a number %q", name, line, f[2])
		case math.IsNaN(a) || math.IsInf(a, 0):
			return fmt.Errorf("%s:%d: arrival_s: must be finite, got %q", name, line, f[2])
		case a < 0:
			return fmt.Errorf("%s:%d: arrival_s: must be >= 0, got %q", name, line, f[2])
		}
		j.ArrivalS = a
		e, err := strconv.ParseFloat(f[3], 64)
		switch {
		case err != nil && !isRange(err):
			return fmt.Errorf("%s:%d: epochs: not a number %q", name, line, f[3])
		case math.IsNaN(e) || math.IsInf(e, 0):
			return fmt.Errorf("%s:%d: epochs: must be finite, got %q", name, line, f[3])
		case e <= 0:
			return fmt.Errorf("%s:%d: epochs: must be > 0, got %q", name, line, f[3])
		}
		j.Epochs = e
		jobs = append(jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalS < jobs[b].ArrivalS })
	return jobs, nil
}

// isRange reports a ParseFloat out-of-range error (its value is ±Inf or
// 0, which the callers' checks then refuse or take).
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// WriteTrace writes the header and one row per job so that ParseTrace
// reads them back exactly (numbers in strconv's shortest 'g' form). An
// ID or model that the format cannot carry (empty, a comma, a line
// break, surrounding spaces, a leading '#') is an error.
func WriteTrace(w io.Writer, jobs []TraceJob) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, TraceHeader)
	for i, j := range jobs {
		for _, f := range [...]struct{ name, v string }{{"id", j.ID}, {"model", j.Model}} {
			if f.v == "" || strings.ContainsAny(f.v, ",\r\n") || strings.TrimSpace(f.v) != f.v || strings.HasPrefix(f.v, "#") {
				return fmt.Errorf("dl2: trace job %d: %s %q cannot be written", i, f.name, f.v)
			}
		}
		fmt.Fprintf(bw, "%s,%s,%s,%s\n", j.ID, j.Model,
			strconv.FormatFloat(j.ArrivalS, 'g', -1, 64), strconv.FormatFloat(j.Epochs, 'g', -1, 64))
	}
	return bw.Flush()
}

// Trace jobs' bounds (JobFor): one to eight workers and PSs.
const (
	TraceMaxWorkers = 8
	TraceMaxPS      = 8
)

// JobFor is the Job of a trace job: bounds one to eight workers and
// PSs, the model's Demand and Batch (a Batch below 1 is taken as 256,
// and the workers' maximum is cut to the Batch so every worker gets a
// sample). An unknown model gives a zero Demand.
func (m Models) JobFor(t TraceJob) Job {
	sm := m[t.Model]
	batch := sm.Batch
	if batch < 1 {
		batch = 256
	}
	return Job{
		ID: t.ID, Model: t.Model, ArrivalS: t.ArrivalS, Epochs: t.Epochs,
		Batch:  batch,
		Bounds: Bounds{MinWorkers: 1, MaxWorkers: min(TraceMaxWorkers, batch), MinPS: 1, MaxPS: TraceMaxPS},
		Demand: sm.Demand,
	}
}

// GenOptions are Generate's knobs; a zero field takes its default.
type GenOptions struct {
	Jobs        int     // jobs to generate (default 200, as the paper's simulations)
	JobsPerSlot float64 // mean arrivals per slot (default DefaultJobsPerSlot)
	SlotS       float64 // slot length, seconds (default 1200, the paper's 20 minutes)
	Seed        int64   // math/rand seed (0 is a seed like any other)
	Models      []string
	// MedianHours and Sigma shape the lognormal runtime of a job at one
	// PS and one worker (defaults DefaultMedianHours, DefaultSigma).
	MedianHours, Sigma float64
}

// Generate's defaults. On the paper's testbed (Servers(13, 2, 16), 1200 s
// slots) they keep 200 jobs at 10-40 concurrent for most of the run under
// DRF; TestGenerateConcurrency measures it (numbers in its comment).
const (
	DefaultJobsPerSlot = 2.0
	DefaultMedianHours = 2.5
	DefaultSigma       = 0.8
)

// Generate makes a trace in the pattern of the paper's Fig. 8 (scaled
// down): arrivals are a Poisson process of JobsPerSlot per slot on
// average, modulated by a diurnal sinusoid (period 24 h, amplitude 0.5:
// rate·(1 + 0.5·sin(2πt/24h)), drawn by thinning); each job's model is
// uniform over o.Models (nil: every model of models, sorted; models nil:
// Table1); its epochs make its runtime at one PS and one worker
// lognormal (median MedianHours, sigma Sigma, clipped to [20 min, 3
// days]), rounded to a whole number of at least 1. Arrivals are whole
// seconds, IDs j0000, j0001, ... in arrival order. The same options give
// the same trace. An o.Models name missing from models panics.
func Generate(o GenOptions, models Models) []TraceJob {
	if models == nil {
		models = Table1()
	}
	if o.Jobs <= 0 {
		o.Jobs = 200
	}
	if !(o.JobsPerSlot > 0) {
		o.JobsPerSlot = DefaultJobsPerSlot
	}
	if !(o.SlotS > 0) {
		o.SlotS = 1200
	}
	if !(o.MedianHours > 0) {
		o.MedianHours = DefaultMedianHours
	}
	if !(o.Sigma > 0) {
		o.Sigma = DefaultSigma
	}
	names := o.Models
	if len(names) == 0 {
		names = models.Names()
	}
	for _, n := range names {
		if _, ok := models[n]; !ok {
			panic(fmt.Sprintf("dl2: Generate: unknown model %q", n))
		}
	}
	rng := rand.New(rand.NewSource(o.Seed))
	rate := o.JobsPerSlot / o.SlotS // per second, on average
	peak := 1.5 * rate
	const day = 24 * 3600.0
	jobs := make([]TraceJob, 0, o.Jobs)
	t := 0.0
	for len(jobs) < o.Jobs {
		t += rng.ExpFloat64() / peak
		if rng.Float64()*peak > rate*(1+0.5*math.Sin(2*math.Pi*t/day)) {
			continue
		}
		name := names[rng.Intn(len(names))]
		runS := o.MedianHours * 3600 * math.Exp(o.Sigma*rng.NormFloat64())
		runS = min(max(runS, 20*60), 3*day)
		epochs := max(1, math.Round(runS*models[name].EpochsPerS(1, 1)))
		jobs = append(jobs, TraceJob{
			ID:       fmt.Sprintf("j%04d", len(jobs)),
			Model:    name,
			ArrivalS: math.Round(t),
			Epochs:   epochs,
		})
	}
	return jobs
}

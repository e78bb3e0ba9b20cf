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

// SpeedModel is one model's training speed: Optimus's synchronous PS
// model (Peng et al., EuroSys'18), seconds per epoch with p parameter
// servers and w workers at a fixed total batch size
//
//	t(p, w) = A/w + B + C·w/p + D·w + E·p
//
// A is the compute of one epoch split over the workers, B a fixed cost
// per epoch, C·w/p the PS side of the gradient exchange (each of p PSs
// takes w shards of the model), D·w and E·p the per-worker and per-PS
// costs (connections, stragglers, synchronisation). All are >= 0, so
// every model has decreasing returns and a best PS:worker split for a
// given number of tasks (BestSplit).
type SpeedModel struct {
	Name          string
	A, B, C, D, E float64 // seconds per epoch, see the type's comment
	Batch         int     // default total batch size (>= 8, the workers' maximum)
	Demand        Demand  // per worker and per PS
}

// EpochTimeS is t(p, w) in seconds (+Inf when p or w is 0).
func (m SpeedModel) EpochTimeS(ps, w int) float64 {
	if ps <= 0 || w <= 0 {
		return math.Inf(1)
	}
	p, n := float64(ps), float64(w)
	return m.A/n + m.B + m.C*n/p + m.D*n + m.E*p
}

// EpochsPerS is the speed 1/t(p, w) in epochs per second (0 when p or w
// is 0, or when t is not positive).
func (m SpeedModel) EpochsPerS(ps, w int) float64 {
	t := m.EpochTimeS(ps, w)
	if !(t > 0) || math.IsInf(t, 1) {
		return 0
	}
	return 1 / t
}

// BestSplit is the fastest (ps, workers) with ps + workers = tasks, both
// >= 1 (ties: fewer PSs); (0, 0) when tasks < 2.
func (m SpeedModel) BestSplit(tasks int) (ps, w int) {
	best := 0.0
	for p := 1; p < tasks; p++ {
		if v := m.EpochsPerS(p, tasks-p); v > best {
			best, ps, w = v, p, tasks-p
		}
	}
	return ps, w
}

// Models are the speed models by name (a Job's Model).
type Models map[string]SpeedModel

// Names are the models' names, sorted.
func (m Models) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Speed is the SpeedFunc of these models: a job's model looked up by
// job.Model (0 for an unknown model).
func (m Models) Speed() SpeedFunc {
	return func(job *Job, ps, w int) float64 {
		sm, ok := m[job.Model]
		if !ok {
			return 0
		}
		return sm.EpochsPerS(ps, w)
	}
}

// Table1 is the eight models of DL2's Table 1 (MXNet tutorials) with
// coefficients chosen to reproduce the paper's facts (§2.2, Fig. 2):
//
//   - resnet-50, vgg-16 and seq2seq have decreasing returns: with k PSs
//     and k workers the speed rises for k = 1..8 but speed/k falls
//     (A/56 > D+E makes t(k,k) fall to k = 8; B+C > 0 makes k·t(k,k) rise);
//   - with 12 tasks, seq2seq is fastest at 4 PS : 8 workers and vgg-16 at
//     6:6 (of 4:8, 6:6, 8:4), vgg-16 being communication-bound (large C
//     relative to A, 138M parameters) and seq2seq compute-bound.
//
// Every model has a best PS:worker split (BestSplit); at 12 tasks:
//
//	model          A    B    C    D    E   t(1,1)   best PS:workers at 12
//	resnet-50    900   20   30    3    2   955 s    5:7
//	vgg-16       800   30   80    4    3   917 s    6:6
//	resnext-110  300   10    3    1    1   315 s    3:9
//	inception-bn 420   15   12    2    1   450 s    5:7
//	seq2seq      600   20   15    3    2   640 s    4:8
//	ctc          130    5    2  0.5  0.5   138 s    4:8
//	dssm         330   10   45    1    2   388 s    7:5
//	wlm          250   10   20  1.5    1   282.5 s  6:6
//
// Epochs at one worker and one PS take 2.3-16 minutes, so a job of tens to
// hundreds of epochs runs hours to days. Demands follow §6.2 (a worker
// 1 or 2 GPUs and 1-4 CPU cores, a PS 1-4 cores): ImageNet models take
// 2-GPU workers and 4 cores to decode images; small-parameter models
// (resnext-110, ctc) need little PS CPU, large-parameter or embedding
// models (vgg-16, dssm) much. README.md has the same table.
func Table1() Models {
	ms := []SpeedModel{
		{Name: "resnet-50", A: 900, B: 20, C: 30, D: 3, E: 2, Batch: 256, Demand: Demand{WorkerGPUs: 2, WorkerCPUs: 4, PSCPUs: 2}},
		{Name: "vgg-16", A: 800, B: 30, C: 80, D: 4, E: 3, Batch: 256, Demand: Demand{WorkerGPUs: 2, WorkerCPUs: 4, PSCPUs: 4}},
		{Name: "resnext-110", A: 300, B: 10, C: 3, D: 1, E: 1, Batch: 128, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 2, PSCPUs: 1}},
		{Name: "inception-bn", A: 420, B: 15, C: 12, D: 2, E: 1, Batch: 128, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 3, PSCPUs: 2}},
		{Name: "seq2seq", A: 600, B: 20, C: 15, D: 3, E: 2, Batch: 64, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 2, PSCPUs: 3}},
		{Name: "ctc", A: 130, B: 5, C: 2, D: 0.5, E: 0.5, Batch: 50, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 1, PSCPUs: 1}},
		{Name: "dssm", A: 330, B: 10, C: 45, D: 1, E: 2, Batch: 256, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 2, PSCPUs: 4}},
		{Name: "wlm", A: 250, B: 10, C: 20, D: 1.5, E: 1, Batch: 32, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 1, PSCPUs: 2}},
	}
	out := make(Models, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

// Noise is a multiplicative speed factor with mean 1: lognormal
// exp(sigma·Z - sigma²/2), clipped to [0.5, 1.5]; 1 when sigma <= 0.
func Noise(rng *rand.Rand, sigma float64) float64 {
	if !(sigma > 0) {
		return 1
	}
	f := math.Exp(sigma*rng.NormFloat64() - sigma*sigma/2)
	return min(max(f, 0.5), 1.5)
}

// SpeedCSVHeader is the header line ReadSpeedCSV requires.
const SpeedCSVHeader = "model,ps,workers,epochs_per_hour"

// ReadSpeedCSV reads measured speeds (header SpeedCSVHeader, then rows
// model,ps,workers,epochs_per_hour; blank lines and lines starting with
// '#' skipped) and fits each model's five coefficients, all >= 0, to the
// measured seconds per epoch 3600/epochs_per_hour by nonnegative least
// squares on relative errors (each row divided by its measured time).
// The result is base (copied) with the measured models replaced: one
// in base keeps its Batch and Demand, a new one gets Batch 256 and
// Demand {1 GPU, 2 CPUs; PS 2 CPUs}. Errors name the file, the line and
// the field, e.g. `speeds.csv:3: ps: not a positive integer "x"`.
func ReadSpeedCSV(name string, r io.Reader, base Models) (Models, error) {
	type row struct{ p, w, t float64 }
	rows := map[string][]row{}
	var order []string
	header := false
	last, err := eachRecord(name, r, func(line int, text string, f []string) error {
		if !header {
			if strings.Join(f, ",") != SpeedCSVHeader {
				return fmt.Errorf("%s:%d: header: want %q, got %q", name, line, SpeedCSVHeader, text)
			}
			header = true
			return nil
		}
		if len(f) != 4 {
			return fmt.Errorf("%s:%d: want 4 fields (%s), got %d", name, line, SpeedCSVHeader, len(f))
		}
		model := f[0]
		if model == "" {
			return fmt.Errorf("%s:%d: model: empty", name, line)
		}
		ps, err := strconv.Atoi(f[1])
		if err != nil || ps <= 0 {
			return fmt.Errorf("%s:%d: ps: not a positive integer %q", name, line, f[1])
		}
		w, err := strconv.Atoi(f[2])
		if err != nil || w <= 0 {
			return fmt.Errorf("%s:%d: workers: not a positive integer %q", name, line, f[2])
		}
		eph, err := strconv.ParseFloat(f[3], 64)
		if err != nil || !(eph > 0) || math.IsInf(eph, 1) {
			return fmt.Errorf("%s:%d: epochs_per_hour: not a positive number %q", name, line, f[3])
		}
		if _, ok := rows[model]; !ok {
			order = append(order, model)
		}
		rows[model] = append(rows[model], row{float64(ps), float64(w), 3600 / eph})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !header {
		return nil, fmt.Errorf("%s:%d: header: want %q, got nothing", name, last+1, SpeedCSVHeader)
	}
	out := make(Models, len(base)+len(order))
	for k, v := range base {
		out[k] = v
	}
	for _, model := range order {
		rs := rows[model]
		A := make([][]float64, len(rs))
		b := make([]float64, len(rs))
		for i, r := range rs {
			A[i] = []float64{1 / r.w / r.t, 1 / r.t, r.w / r.p / r.t, r.w / r.t, r.p / r.t}
			b[i] = 1
		}
		x := NNLS(A, b)
		m, ok := base[model]
		if !ok {
			m = SpeedModel{Batch: 256, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 2, PSCPUs: 2}}
		}
		m.Name = model
		m.A, m.B, m.C, m.D, m.E = x[0], x[1], x[2], x[3], x[4]
		out[model] = m
	}
	return out, nil
}

// eachRecord calls fn with every line of r that is neither blank nor a
// "#" comment (its 1-based number, trimmed text and trimmed comma-separated
// fields), stopping at fn's first error; last is the last line's number.
// The trace and speed-table parsers share it.
func eachRecord(name string, r io.Reader, fn func(line int, text string, f []string) error) (last int, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		last++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := fn(last, text, splitFields(text)); err != nil {
			return last, err
		}
	}
	if err := sc.Err(); err != nil {
		return last, fmt.Errorf("%s: %v", name, err)
	}
	return last, nil
}

// splitFields splits a comma-separated line and trims each field.
func splitFields(text string) []string {
	f := strings.Split(text, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

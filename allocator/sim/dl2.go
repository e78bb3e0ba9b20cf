package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// DL2 (Options.DL2) runs two-role elastic jobs (trace.Job.PSMax > 0,
// DL2's workers and parameter servers, sized by allocator/sizer) in
// DL2's time model, the one policies/dl2.Env trains and evaluates in:
//
//   - rounds are slots on the grid k × round length (Options.RoundGrid,
//     forced): a job arriving inside a slot waits for the next one, an
//     idle cluster jumps to the first grid point at or after the next
//     arrival, and a slot lasts the round whatever finishes in it;
//   - a job with w workers and p PSs this slot trains
//     Models[model].EpochsPerS(p, w) × noise epochs per second (its
//     TotalSteps are epochs, fractional: no whole steps), where noise is
//     dl2.Env's factor for the job's trace ID (its index in arrival order,
//     as DL2Jobs numbers them) and the slot's grid index k, so that the
//     same trace and sizer give the same result as dl2.Env.Run;
//   - a job whose rate × round covers what is left (to 1e-9 of its
//     epochs, as dl2.Env) finishes at the slot's start + left / rate
//     (plus a start cost, when Options set one); JCT = finish - arrival.
//
// Other jobs of the trace run as the simulator runs them (Gavel's
// throughputs, whole steps).
type DL2 struct {
	// Models are the jobs' speed models (nil: dl2.Table1()).
	Models dl2.Models
	// Noise is the sigma of the per-job, per-slot speed factor (0: none).
	Noise float64
	// Seed seeds the noise (dl2.Env.Seed).
	Seed int64
}

// DL2Jobs are a DL2 trace's jobs as simulator jobs, in arrival order
// (stable) with IDs 0, 1, ... in that order (the noise's job index):
// bounds, demand and batch from models.JobFor (nil models: dl2.Table1()),
// workers of WorkerGPUs GPUs (ScaleFactor: the minimum's GPUs,
// ElasticMaxGPUs: the maximum's), PSMin..PSMax parameter servers,
// TotalSteps the epochs. An unknown model is an error.
func DL2Jobs(models dl2.Models, jobs []dl2.TraceJob) ([]trace.Job, error) {
	if models == nil {
		models = dl2.Table1()
	}
	tr := append([]dl2.TraceJob(nil), jobs...)
	sort.SliceStable(tr, func(a, b int) bool { return tr[a].ArrivalS < tr[b].ArrivalS })
	out := make([]trace.Job, 0, len(tr))
	for i, t := range tr {
		if _, ok := models[t.Model]; !ok {
			return nil, fmt.Errorf("sim: dl2 job %s: unknown model %q", t.ID, t.Model)
		}
		j := models.JobFor(t)
		b, d := j.Bounds, j.Demand
		if d.WorkerGPUs < 1 || b.MinWorkers < 1 || b.MaxWorkers < b.MinWorkers || b.MinPS < 1 || b.MaxPS < b.MinPS {
			return nil, fmt.Errorf("sim: dl2 job %s (%s): bounds %+v, demand %+v", t.ID, t.Model, b, d)
		}
		out = append(out, trace.Job{ID: i, Model: t.Model, ScaleFactor: b.MinWorkers * d.WorkerGPUs,
			TotalSteps: t.Epochs, Priority: 1, ArrivalS: t.ArrivalS,
			ElasticMaxGPUs: b.MaxWorkers * d.WorkerGPUs, ElasticStepGPUs: d.WorkerGPUs,
			PSMin: b.MinPS, PSMax: b.MaxPS, PSCores: float64(d.PSCPUs), WorkerCores: float64(d.WorkerCPUs),
			Batch: j.Batch})
	}
	return out, nil
}

// twoRole reports whether a trace job is a two-role (DL2) job.
func twoRole(tj *trace.Job) bool { return tj.PSMax > 0 }

// dl2State is Options.DL2 ready to use.
type dl2State struct {
	models dl2.Models
	env    dl2.Env // the noise (NoiseAt)
}

func (s *simulator) initDL2() error {
	d := s.o.DL2
	if d == nil {
		return nil
	}
	if s.o.Ideal {
		return fmt.Errorf("sim: DL2 jobs run in slots, not with the ideal realization")
	}
	if !(d.Noise >= 0) || math.IsInf(d.Noise, 0) {
		return fmt.Errorf("sim: DL2 noise %v", d.Noise)
	}
	s.dl2 = &dl2State{models: d.Models, env: dl2.Env{Noise: d.Noise, Seed: d.Seed, SlotS: s.roundS()}}
	if s.dl2.models == nil {
		s.dl2.models = dl2.Table1()
	}
	s.o.RoundGrid = true
	return nil
}

// checkDL2 refuses a two-role job the simulator cannot run: without
// Options.DL2, or of a model it has no speed for.
func (s *simulator) checkDL2(tj *trace.Job) error {
	if !twoRole(tj) {
		return nil
	}
	if s.dl2 == nil {
		return fmt.Errorf("sim: job %d is a two-role (DL2) job: it needs Options.DL2", tj.ID)
	}
	if _, ok := s.dl2.models[tj.Model]; !ok {
		return fmt.Errorf("sim: job %d: no DL2 speed model %q", tj.ID, tj.Model)
	}
	return nil
}

// dl2Elastic is a two-role job's elastic range for the snapshot.
func dl2Elastic(tj *trace.Job) *engine.Elastic {
	step := max(tj.ElasticStepGPUs, 1)
	return &engine.Elastic{StepGPUs: step, MaxGPUs: max(tj.ElasticMaxGPUs, tj.ScaleFactor, step),
		PS: &engine.PSGroup{Min: tj.PSMin, Max: tj.PSMax, Cores: tj.PSCores}, WorkerCores: tj.WorkerCores, Batch: tj.Batch}
}

// dl2Tput is a two-role job's epochs/s at its minimum (the snapshot's
// throughput on every type: the sizer does not read it).
func (s *simulator) dl2Tput(tj *trace.Job) float64 {
	step := max(tj.ElasticStepGPUs, 1)
	return s.dl2.models[tj.Model].EpochsPerS(max(tj.PSMin, 1), max(tj.ScaleFactor/step, 1))
}

// dl2Run fills micro m of a two-role job js on assignment a for this
// round (m.begin, m.cost set): its rate, the epochs it trains and when it
// finishes.
func (s *simulator) dl2Run(m *micro, js *jobState, a engine.Assignment, round float64) {
	step := max(js.tj.ElasticStepGPUs, 1)
	w := len(a.GPUs) / step
	k := int(math.Round((s.now - s.o.GridOriginS) / round))
	rate := 0.0
	if w >= 1 && a.PS >= 1 {
		rate = s.dl2.models[js.tj.Model].EpochsPerS(a.PS, w) * s.dl2.env.NoiseAt(js.tj.ID, k)
	}
	m.dl2 = true
	m.tput[0] = rate
	m.finish = s.now
	if !(rate > 0) {
		m.steps = append(m.steps, 0)
		return
	}
	left := js.tj.TotalSteps - js.dl2Done
	got := rate * math.Max(round-m.cost, 0)
	if got >= left-1e-9*js.tj.TotalSteps {
		got, m.dl2End = left, true
		m.finish = s.now + m.cost + left/rate
	} else {
		m.finish = s.now + round
	}
	m.steps = append(m.steps, got)
}

package dl2

import (
	"cmp"
	"fmt"
	"slices"
)

// TrainConfig is DL2's whole training: a supervised bootstrap from a
// teacher's decisions on training traces, then online actor-critic
// episodes on fresh traces, evaluated on held-out validation traces.
// Training and validation traces are generated with disjoint seeds.
type TrainConfig struct {
	Env     Env    // servers, slot, models, noise
	Teacher string // drf (DL2's default), fifo or srtf
	Window  int    // J
	// Arch is the networks' architecture (ArchMLP when "", ArchPerJob).
	Arch   string
	Hidden []int // hidden layer widths (NewArchModel)
	Spare  int   // spare one-hot slots for new job types
	// Types are the job types the model knows from the start (nil: every
	// model of Env.Models).
	Types []string
	// Gen generates the traces (its Seed is set per trace).
	Gen GenOptions
	// TrainModels, when set, are the only job types of the training traces
	// (supervised and RL); validation and test traces keep Gen's.
	TrainModels []string
	// TrainSeed, ValSeed: trace i of training uses TrainSeed+i, validation
	// trace i ValSeed+i.
	TrainSeed, ValSeed int64
	SLTraces           int // traces whose teacher decisions are the SL data
	SL                 SLOptions
	RL                 RLOptions // Episode and Eval are filled in
	ValTraces          int
	// TestSeed, TestTraces: the traces the report's numbers are measured
	// on, held out from training and from validation (which picks the
	// kept model when RL.KeepBest).
	TestSeed   int64
	TestTraces int
	Seed       int64 // network initialisation
	// Model, when set, is trained further (no new model, no SL unless
	// SL.Passes > 0).
	Model *Model
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// TrainReport is what training measured.
type TrainReport struct {
	Teacher string  `json:"teacher"`
	Samples int     `json:"sl_samples"`
	SLLoss  float64 `json:"sl_loss"`
	// On the test traces: the teacher, the model after the bootstrap and
	// after online RL.
	TeacherAvgJCT float64 `json:"teacher_avg_jct_s"`
	SLAvgJCT      float64 `json:"sl_avg_jct_s"`
	FinalAvgJCT   float64 `json:"final_avg_jct_s"`
	// Curve is measured on the validation traces.
	Curve         []CurvePoint `json:"curve"`
	TeacherValJCT float64      `json:"teacher_val_avg_jct_s"`
}

// Traces generates n traces with seeds seed, seed+1, ...
func (c *TrainConfig) Traces(seed int64, n int) [][]TraceJob {
	return c.Gen.traces(seed, n, c.Env.Models)
}

func (g GenOptions) traces(seed int64, n int, models Models) [][]TraceJob {
	out := make([][]TraceJob, n)
	for i := range out {
		g.Seed = seed + int64(i)
		out[i] = Generate(g, models)
	}
	return out
}

// trainGen generates the training traces.
func (c *TrainConfig) trainGen() GenOptions {
	g := c.Gen
	if c.TrainModels != nil {
		g.Models = c.TrainModels
	}
	return g
}

// Evaluate is the mean average JCT of sizer sz over the traces.
func Evaluate(env *Env, traces [][]TraceJob, sz Sizer) (float64, error) {
	var sum float64
	for _, tr := range traces {
		r, err := env.Run(tr, sz, nil)
		if err != nil {
			return 0, err
		}
		sum += r.AvgJCTS
	}
	return sum / float64(len(traces)), nil
}

// evalSlots bounds an evaluation run (a 120-job trace takes about 150
// slots under DRF).
const evalSlots = 3000

// Train runs the whole pipeline.
func Train(c TrainConfig) (*Model, *TrainReport, error) {
	logf := c.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	teacher, err := Teacher(c.Teacher)
	if err != nil {
		return nil, nil, err
	}
	types := c.Types
	if types == nil {
		types = c.Env.Models.Names()
	}
	m := c.Model
	if m == nil {
		if m, err = NewArchModel(cmp.Or(c.Arch, ArchMLP), c.Window, types, c.Spare, c.Hidden, c.Seed); err != nil {
			return nil, nil, err
		}
	}
	if err := func() error { m.Checksum = m.sum(); return m.Validate() }(); err != nil {
		return nil, nil, err
	}
	val := c.Traces(c.ValSeed, c.ValTraces)
	test := c.Traces(c.TestSeed, c.TestTraces)
	rep := &TrainReport{Teacher: teacher.Name()}
	if rep.TeacherAvgJCT, err = Evaluate(&c.Env, test, teacher); err != nil {
		return nil, nil, err
	}
	if rep.TeacherValJCT, err = Evaluate(&c.Env, val, teacher); err != nil {
		return nil, nil, err
	}
	// A policy that stops admitting jobs never finishes a trace: its
	// evaluations end at evalSlots (an error: that model is never kept).
	evalEnv := c.Env
	if evalEnv.MaxSlots <= 0 || evalEnv.MaxSlots > evalSlots {
		evalEnv.MaxSlots = evalSlots
	}
	evalOn := func(trs [][]TraceJob) func(m *Model) float64 {
		return func(m *Model) float64 {
			v, err := Evaluate(&evalEnv, trs, NewPolicy(m, nil))
			if err != nil {
				return -1
			}
			return v
		}
	}
	eval, evalTest := evalOn(val), evalOn(test)
	if c.SL.Passes > 0 && c.SLTraces > 0 {
		demos, err := Demonstrations(&c.Env, c.trainGen().traces(c.TrainSeed, c.SLTraces, c.Env.Models), teacher, m)
		if err != nil {
			return nil, nil, err
		}
		rep.Samples = len(demos)
		logf("supervised: %d decisions of %s on %d traces, %d passes", len(demos), teacher.Name(), c.SLTraces, c.SL.Passes)
		rep.SLLoss = Supervised(m, demos, c.SL)
	}
	m.Checksum = m.sum()
	rep.SLAvgJCT = evalTest(m)
	logf("after supervised: avg JCT %.0f s (teacher %.0f s)", rep.SLAvgJCT, rep.TeacherAvgJCT)
	if c.RL.Steps > 0 {
		o := c.RL
		base := c.TrainSeed + int64(c.SLTraces)
		o.Episode = func(i int) []TraceJob {
			g := c.trainGen()
			g.Seed = base + int64(i)
			return Generate(g, c.Env.Models)
		}
		o.Eval = func(m *Model) float64 { m.Checksum = m.sum(); return eval(m) }
		rep.Curve, err = Reinforce(&c.Env, m, o)
		if err != nil {
			return nil, nil, err
		}
	}
	m.Checksum = m.sum()
	rep.FinalAvgJCT = evalTest(m)
	if m.Trained == nil {
		m.Trained = map[string]string{}
	}
	m.Trained["teacher"] = teacher.Name()
	m.Trained["arch"] = m.arch()
	m.Trained["sl_traces"] = fmt.Sprint(c.SLTraces)
	m.Trained["rl_steps"] = fmt.Sprint(c.RL.Steps)
	m.Trained["types"] = fmt.Sprint(slices.DeleteFunc(slices.Clone(m.Types), func(s string) bool { return s == "" }))
	return m, rep, nil
}

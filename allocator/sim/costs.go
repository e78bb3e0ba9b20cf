package sim

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// Restart costs per job type (Options.Costs, `rondo simulate
// --preemption-cost realistic|FILE`): what starting, restoring and
// checkpointing a job costs, by its model's name, and how a stop loses
// the work done since the job's last checkpoint. The time model is in
// run.go (mechanism, complete) and described in README.md.

//go:embed costs/realistic.csv
var realisticCSV []byte

// CostColumns are the columns a costs CSV must have (any order; other
// columns are notes and ignored).
var CostColumns = []string{"model", "start_s", "restore_s", "checkpoint_s", "interval_s"}

// JobCosts are one job type's restart costs, in seconds.
type JobCosts struct {
	// Model is the prefix of the trace models the row applies to ("*":
	// every model no other row matches).
	Model string
	// StartS is lost from the round of a job's first start (scheduling,
	// process and framework init, data pipeline warm-up).
	StartS float64
	// RestoreS is lost from the round of a resume, migration or retune
	// (a start and loading the checkpoint).
	RestoreS float64
	// CheckpointS is lost from the round of a job that writes a
	// checkpoint on notice (JobIntent.Checkpoint).
	CheckpointS float64
	// IntervalS: the job checkpoints every IntervalS seconds of training
	// (0: only on notice).
	IntervalS float64
}

// Costs is a table of restart costs per job type.
type Costs struct {
	// Rows in the file's order; a model takes the row with the longest
	// matching prefix, else the "*" row.
	Rows []JobCosts
	// Source names where the table came from ("realistic" or the file).
	Source string
}

// RealisticCosts is the embedded table (costs/realistic.csv): Gavel's
// model families at Rondo's assumptions (README.md derives every value).
func RealisticCosts() *Costs {
	c, err := ParseCosts(bytes.NewReader(realisticCSV), "realistic")
	if err != nil {
		panic(err) // the embedded table is tested
	}
	return c
}

// ReadCostsFile reads a costs CSV file.
func ReadCostsFile(path string) (*Costs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseCosts(f, path)
}

// ParseCosts reads a costs CSV: '#' comment lines, a header naming at
// least CostColumns, one row per model prefix; every value a finite
// number ≥ 0. Errors name the file, the line and the field.
func ParseCosts(r io.Reader, name string) (*Costs, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: no header (want %s)", name, strings.Join(CostColumns, ","))
	}
	if err != nil {
		return nil, csvErr(name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if _, dup := col[h]; dup {
			line, _ := cr.FieldPos(i)
			return nil, fmt.Errorf("%s:%d: column %q twice", name, line, h)
		}
		col[h] = i
	}
	for _, want := range CostColumns {
		if _, ok := col[want]; !ok {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("%s:%d: no column %s (want %s)", name, line, want, strings.Join(CostColumns, ","))
		}
	}
	c := &Costs{Source: name}
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, the header has %d", name, line, len(rec), len(header))
		}
		jc := JobCosts{Model: strings.TrimSpace(rec[col["model"]])}
		if jc.Model == "" {
			return nil, fmt.Errorf("%s:%d: model: empty (a model name's prefix, or * for the default)", name, line)
		}
		if prev, dup := seen[jc.Model]; dup {
			return nil, fmt.Errorf("%s:%d: model %q: also on line %d", name, line, jc.Model, prev)
		}
		seen[jc.Model] = line
		for _, f := range []struct {
			col string
			v   *float64
		}{{"start_s", &jc.StartS}, {"restore_s", &jc.RestoreS}, {"checkpoint_s", &jc.CheckpointS}, {"interval_s", &jc.IntervalS}} {
			s := strings.TrimSpace(rec[col[f.col]])
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v >= 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s:%d: %s %q: want a finite number of seconds ≥ 0", name, line, f.col, s)
			}
			*f.v = v
		}
		c.Rows = append(c.Rows, jc)
	}
	if len(c.Rows) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return c, nil
}

func csvErr(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: %v", name, pe.Line, pe.Err)
	}
	return fmt.Errorf("%s: %v", name, err)
}

// For is the row of a model: the longest prefix of its name among the
// rows, else the "*" row; ok is false when neither exists.
func (c *Costs) For(model string) (JobCosts, bool) {
	best, found := -1, false
	var def *JobCosts
	for i := range c.Rows {
		r := &c.Rows[i]
		if r.Model == "*" {
			def = r
			continue
		}
		if strings.HasPrefix(model, r.Model) && (!found || len(r.Model) > len(c.Rows[best].Model)) {
			best, found = i, true
		}
	}
	if found {
		return c.Rows[best], true
	}
	if def != nil {
		return *def, true
	}
	return JobCosts{}, false
}

// initCosts checks the options that go with Options.Costs.
func (s *simulator) initCosts() error {
	if s.o.Costs == nil {
		return nil
	}
	switch {
	case s.o.PreemptionCostS != 0:
		return fmt.Errorf("sim: restart costs per job type replace the preemption cost: set one, not both")
	case s.o.Ideal:
		return fmt.Errorf("sim: restart costs per job type need the round-based mechanism, not the ideal one")
	case s.o.DL2 != nil:
		return fmt.Errorf("sim: restart costs per job type are not modelled for DL2's two-role jobs")
	}
	s.jobCosts = map[string]JobCosts{}
	return nil
}

// checkCosts finds a job's row (fetch): a model the table has no row for
// is an error.
func (s *simulator) checkCosts(j *trace.Job) error {
	if s.o.Costs == nil {
		return nil
	}
	if _, ok := s.jobCosts[j.Model]; ok {
		return nil
	}
	jc, ok := s.o.Costs.For(j.Model)
	if !ok {
		return fmt.Errorf("sim: job %d: the restart costs (%s) have no row for model %q and no default row (*)", j.ID, s.o.Costs.Source, j.Model)
	}
	s.jobCosts[j.Model] = jc
	return nil
}

// snapshotCosts reports a job's run, last checkpoint and costs (what the
// engine's preemption reads): RestoreS is what its next start costs, its
// StartS before it first ran.
func (s *simulator) snapshotCosts(js *jobState, j *engine.Job) {
	if js.holding {
		j.RunSinceS = js.runSince
	}
	j.CheckpointAtS = js.ckptAt
	j.CheckpointS = js.jc.CheckpointS
	j.RestoreS = js.jc.RestoreS
	if !js.ran {
		j.RestoreS = js.jc.StartS
	}
	j.RestoreS = math.Max(j.RestoreS, s.o.StartCostS)
}

// stops stops every job that held GPUs and is in none of the plan's
// assignments (suspended, preempted, or gone with a failed GPU): it loses
// the work since its last checkpoint. It also records the plan's
// reservations.
func (s *simulator) stops(plan *engine.Plan) {
	for _, r := range plan.Reservations {
		if s.reserved == nil {
			s.reserved = map[string]bool{}
		}
		s.reserved[r.Job] = true
	}
	if s.o.Costs == nil {
		return
	}
	assigned := map[string]bool{}
	for _, a := range plan.Assignments {
		for _, id := range a.Jobs {
			assigned[id] = true
		}
	}
	for _, js := range s.active {
		if js.holding && !assigned[js.id] {
			s.stop(js)
		}
	}
}

// start is an assigned job's part of the round: a job that moves
// (admit, resume, migrate, retune) stops where it ran first, if it ran,
// and (re)starts, its start or restore raising the unit's cost; a job that
// stays checkpoints at the round's end when the plan says so (the result).
func (s *simulator) start(js *jobState, moved, checkpoint bool, cost *float64) bool {
	defer func() { js.holding = true }()
	if !moved {
		return checkpoint
	}
	if js.holding {
		s.stop(js)
	}
	v := js.jc.StartS
	if js.ran {
		v = js.jc.RestoreS
	}
	*cost = math.Max(*cost, v)
	// A run starts from its checkpoint.
	js.runSince, js.ckptAt = s.now, s.now
	return false
}

// stop ends a job's run without notice: the work since its last
// checkpoint is lost (its steps are done again, its isolated time no
// longer counts them) and counted in GPU-seconds.
func (s *simulator) stop(js *jobState) {
	if js.sinceSteps > 0 {
		js.remaining = math.Min(js.remaining+js.sinceSteps, js.tj.TotalSteps)
		js.isoTime = math.Max(js.isoTime-js.sinceIsoS, 0)
		s.lostGPUS += js.sinceGPUS
	}
	js.sinceS, js.sinceSteps, js.sinceGPUS, js.sinceIsoS = 0, 0, 0, 0
	js.holding, js.runSince = false, 0
}

// account adds a job's steps of a finished micro-task to its work since
// its last checkpoint: a periodic checkpoint every IntervalS of training,
// the one written on notice at the end, or, when a GPU failure cut the
// micro-task, the stop.
func (s *simulator) account(js *jobState, m *micro, i int) {
	if js.remaining <= 0 {
		js.holding = false // it finished
		return
	}
	g := float64(len(m.gpus)) / float64(len(m.jobs)) // its GPUs (a pair's jobs share theirs)
	d := 0.0
	if m.tput[i] > 0 && m.steps[i] > 0 {
		d = m.steps[i] / m.tput[i]
		js.sinceS += d
		js.sinceSteps += m.steps[i]
		js.sinceGPUS += d * g
		if it := m.iso[i]; it > 0 {
			js.sinceIsoS += m.steps[i] / it
		}
		if iv := js.jc.IntervalS; iv > 0 && js.sinceS >= iv {
			// The last periodic checkpoint fell rem seconds of training
			// before the micro-task's end (rem < d).
			rem := math.Mod(js.sinceS, iv)
			js.ckptAt = m.begin + m.cost + d - rem
			js.sinceS = rem
			js.sinceSteps = math.Min(math.Floor(rem*m.tput[i]), m.steps[i])
			js.sinceGPUS = rem * g
			js.sinceIsoS = 0
			if it := m.iso[i]; it > 0 {
				js.sinceIsoS = js.sinceSteps / it
			}
		}
	}
	if m.cut {
		s.stop(js)
		return
	}
	if ck := m.ckpt[i]; ck > 0 {
		js.ckptAt = m.begin + m.cost + d + ck
		js.sinceS, js.sinceSteps, js.sinceGPUS, js.sinceIsoS = 0, 0, 0, 0
		s.noticed++
		s.lostGPUS += ck * g
	}
}

// preemptionResult adds the metrics of preemption that respects the work,
// with Options.Costs or any of the engine's preemption options.
func (s *simulator) preemptionResult(r *Result) {
	e := s.o.Engine
	if s.o.Costs == nil && e.MinRuntimeS == 0 && !e.CheckpointAware && e.ReserveAfterS == 0 && len(s.reserved) == 0 {
		return
	}
	r.LostGPUS, r.Restarts, r.Migrations, r.Noticed, r.Reserved = s.lostGPUS, s.restarts, s.migrations, s.noticed, len(s.reserved)
	var waits []float64
	for _, js := range s.all {
		if js.done && s.inWindow(js.tj.ID) && js.tj.ScaleFactor >= 4 {
			waits = append(waits, math.Max(js.finish-js.tj.ArrivalS-js.heldS, 0))
		}
	}
	if len(waits) > 0 {
		sum := 0.0
		for _, w := range waits {
			sum += w
		}
		r.LargeGangWaitAvgS = sum / float64(len(waits))
		r.LargeGangWaitP99S = Percentile(sortedCopy(waits), 99)
	}
}

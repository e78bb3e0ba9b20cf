package dl2

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
)

// Env is DL2's slot environment: a cluster, the jobs' speed models and
// the clock. Each slot the active jobs are sized by a Sizer and train at
// their models' speeds (times a noise factor) for the slot. It is the
// model the learned policy trains and is evaluated in.
type Env struct {
	Servers  []Server
	SlotS    float64 // slot length, seconds (default 1200)
	Models   Models  // nil: Table1
	Noise    float64 // sigma of the per-job per-slot speed factor (0: none)
	Seed     int64   // noise seed
	MaxSlots int     // safety stop (default 100000): an error when reached
}

// SlotRecord is one simulated slot, as Run's callback sees it.
type SlotRecord struct {
	Index    int       // the slot's place on the grid: it starts at Index·SlotS
	StartS   float64   // its start, seconds
	Slot     *Slot     // the sizer's decision; Jobs: the active jobs in arrival order, Done as at the start
	Trained  []float64 // epochs each job (Slot.Jobs order) trained in the slot
	Reward   float64   // Σ epochs trained / epochs of the job (DL2's eq. 1)
	Finished []string  // IDs of the jobs that finished in it
	Done     bool      // the last slot: every job has finished
}

// Result is one run's outcome.
type Result struct {
	AvgJCTS   float64            // mean completion time (finish - arrival) over all jobs
	MakespanS float64            // last finish - first arrival
	JCTs      map[string]float64 // by job ID
	Slots     int                // slots simulated (idle stretches skipped)
	Reward    float64            // sum of the slots' rewards
}

// Servers is n servers of gpus GPUs and cpus CPUs each.
func Servers(n, gpus, cpus int) []Server {
	out := make([]Server, n)
	for i := range out {
		out[i] = Server{GPUs: gpus, CPUs: cpus}
	}
	return out
}

// Env's defaults.
const (
	DefaultSlotS    = 1200.0
	DefaultMaxSlots = 100000
)

// ErrMaxSlots is what Run's error wraps when a run reached MaxSlots (a
// sizer that leaves jobs waiting forever).
var ErrMaxSlots = errors.New("the jobs did not finish")

// Run plays the jobs (sorted by arrival, stably, if they are not) through
// the slots with sz deciding each one, and calls after (when not nil)
// after every slot with its record (SlotRecord.Trained: the epochs each
// job trained in it). Slots start on the grid k·SlotS: a job arriving
// inside a slot waits for the next start, and with nothing active the
// clock jumps to the first start at or after the next arrival. In a slot
// a job with a worker and a PS trains speed(ps, w)·noise epochs per
// second; one that finishes inside the slot completes at start +
// remaining/rate. The noise of job i (in arrival order) in slot k is
// NoiseAt(i, k), the same whatever the sizer. A decision failing Check
// ends Run with the error, as does reaching MaxSlots.
func (e *Env) Run(jobs []TraceJob, sz Sizer, after func(*SlotRecord)) (Result, error) {
	slotS, maxSlots, models := e.SlotS, e.MaxSlots, e.Models
	if !(slotS > 0) {
		slotS = DefaultSlotS
	}
	if maxSlots <= 0 {
		maxSlots = DefaultMaxSlots
	}
	if models == nil {
		models = Table1()
	}
	res := Result{JCTs: map[string]float64{}}
	if len(jobs) == 0 {
		return res, nil
	}
	if len(e.Servers) == 0 {
		return res, errors.New("dl2: env has no servers")
	}
	if sz == nil {
		return res, errors.New("dl2: no sizer")
	}
	tr := append([]TraceJob(nil), jobs...)
	sort.SliceStable(tr, func(a, b int) bool { return tr[a].ArrivalS < tr[b].ArrivalS })
	speed := models.Speed()
	seen := map[string]bool{}
	for _, t := range tr {
		if _, ok := models[t.Model]; !ok {
			return res, fmt.Errorf("dl2: job %s: unknown model %q", t.ID, t.Model)
		}
		if !(t.Epochs > 0) || math.IsInf(t.Epochs, 1) || !(t.ArrivalS >= 0) || math.IsInf(t.ArrivalS, 1) {
			return res, fmt.Errorf("dl2: job %s: epochs %g, arrival %g", t.ID, t.Epochs, t.ArrivalS)
		}
		if seen[t.ID] {
			return res, fmt.Errorf("dl2: job %s: duplicate id", t.ID)
		}
		seen[t.ID] = true
		// Its minimum must fit the empty cluster, or it never runs.
		if s := NewSlot(e.Servers, []Job{models.JobFor(t)}, speed); !s.Running(0) {
			return res, fmt.Errorf("dl2: job %s (%s): its minimum does not fit the cluster", t.ID, t.Model)
		}
	}

	done := make([]float64, len(tr))
	slotsRun := make([]int, len(tr))
	finished := make([]bool, len(tr))
	next, left := 0, len(tr) // next job to arrive, jobs unfinished
	lastFinish := 0.0
	k := int(math.Ceil(tr[0].ArrivalS / slotS))
	for left > 0 {
		if res.Slots >= maxSlots {
			return res, fmt.Errorf("dl2: %d slots simulated (MaxSlots) with %d jobs unfinished: %w", res.Slots, left, ErrMaxSlots)
		}
		start := float64(k) * slotS
		for next < len(tr) && tr[next].ArrivalS <= start {
			next++
		}
		var idx []int // active jobs, arrival order
		var js []Job
		for i := 0; i < next; i++ {
			if !finished[i] {
				j := models.JobFor(tr[i])
				j.Done, j.SlotsRun = done[i], slotsRun[i]
				idx = append(idx, i)
				js = append(js, j)
			}
		}
		if len(idx) == 0 { // idle: jump to the next arrival's slot
			k = max(k+1, int(math.Ceil(tr[next].ArrivalS/slotS)))
			continue
		}
		s := NewSlot(e.Servers, js, speed)
		sz.Decide(s)
		if err := Check(e.Servers, s); err != nil {
			return res, fmt.Errorf("dl2: slot %d, sizer %s: %w", k, sz.Name(), err)
		}
		rec := &SlotRecord{Index: k, StartS: start, Slot: s, Trained: make([]float64, len(idx))}
		for a, i := range idx {
			al := s.Alloc[a]
			if al.Workers < 1 || al.PS < 1 {
				continue
			}
			rate := speed(&js[a], al.PS, al.Workers) * e.NoiseAt(i, k)
			if !(rate > 0) {
				continue
			}
			slotsRun[i]++
			rem := tr[i].Epochs - done[i]
			got := rate * slotS
			if got >= rem-1e-9*tr[i].Epochs {
				got = rem
				end := start + rem/rate
				finished[i] = true
				left--
				res.JCTs[tr[i].ID] = end - tr[i].ArrivalS
				lastFinish = max(lastFinish, end)
				rec.Finished = append(rec.Finished, tr[i].ID)
			}
			done[i] += got
			rec.Trained[a] = got
			rec.Reward += got / tr[i].Epochs
		}
		res.Slots++
		res.Reward += rec.Reward
		rec.Done = left == 0
		if after != nil {
			after(rec)
		}
		k++
	}
	var sum float64
	for _, t := range tr { // in order: the same sum every run
		sum += res.JCTs[t.ID]
	}
	res.AvgJCTS = sum / float64(len(tr))
	res.MakespanS = lastFinish - tr[0].ArrivalS
	return res, nil
}

// NoiseAt is the speed factor of job i (in arrival order) in slot k (its
// grid index): Noise with sigma e.Noise, drawn from a generator seeded
// by a hash of (Seed, i, k), so that every sizer sees the same factor
// for the same job and slot.
func (e *Env) NoiseAt(i, k int) float64 {
	if !(e.Noise > 0) {
		return 1
	}
	h := splitmix64(uint64(e.Seed))
	h = splitmix64(h ^ uint64(i))
	h = splitmix64(h ^ uint64(k)*0x9e3779b97f4a7c15)
	return Noise(rand.New(&splitmix{h}), e.Noise)
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// splitmix is a small rand.Source64 (cheap to seed per draw).
type splitmix struct{ s uint64 }

func (r *splitmix) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
func (r *splitmix) Int63() int64    { return int64(r.Uint64() >> 1) }
func (r *splitmix) Seed(seed int64) { r.s = uint64(seed) }

package placement

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// Learning makes the stage learn the profile of every job without a named
// one (engine.Job.Profile "") from its throughput reports, Synergy's
// optimistic profiling done online (synergy.Learn; docs/synergy/profiling.md):
//
//   - Samples: each round, every kept job alone on its GPUs of one server
//     that reported (engine.Job.Measured on the type it ran on) gives one
//     sample: its grant per GPU last round (Snapshot.Running's Resources)
//     and the throughput. Per job and GPU type, the last KeepSamples per
//     grant; a job's samples go when it leaves the snapshot. They are in
//     the stage's history (MarshalHistory: Next's wrapped with them), so a
//     restarted agent carries on.
//   - Until the samples hold MinPoints distinct core counts the job is
//     placed at its proportional share (best case = the share, nothing
//     below: not synergy.Flat's 1 core, nothing is known yet); then with
//     its learned profile, as any other.
//   - Exploration, in TUNE and OPT only, after the mode placed every job,
//     with what the server has left: a job measured at the most cores it
//     ran with (its top) is offered the next grid step of cores per GPU
//     (memory unchanged), in policy order while cores remain; a kept job
//     only once measured at its top and not retuned by the mode this round.
//     Each step is a retune (a checkpointed restart); a starting job's is
//     free. The climb stops at the first step gaining less than Epsilon
//     over the best fewer cores gave, where the server has no next step,
//     or at the grid's last. A kept job whose last step gained nothing is
//     retuned once back to its learned best case (never below
//     proportional). So a job costs at most one retune per grid step above
//     its share, plus one: an insensitive one two (up one step, back), and
//     never runs below its share.
type Learning struct {
	// Epsilon: a step must gain this much to go on; also the learned
	// best case's ε (0: synergy.DefaultEpsilon).
	Epsilon float64
	// MinPoints distinct core counts before the learned profile is used
	// (0: synergy.DefaultMinPoints).
	MinPoints int
	// Cache gives a job's cache model, memory's effect (nil, or nil for a
	// job: none; the profile then holds from the memory measured up).
	Cache func(j *engine.Job, gpus int) *synergy.CacheModel
}

// KeepSamples is how many samples the stage keeps per job, GPU type and
// grant (the latest): the history stays bounded and a drifting job is
// followed.
const KeepSamples = 8

type learnKey struct{ job, typ string }

// learner is one job's samples on one GPU type, and the profile last
// learned from them.
type learner struct {
	gpus    int
	samples []synergy.Sample
	prof    *synergy.Profile
	profN   int        // samples behind prof
	profFor [2]float64 // the share prof is relative to
}

func (st *Stage) eps() float64 {
	if st.Learn.Epsilon > 0 {
		return st.Learn.Epsilon
	}
	return synergy.DefaultEpsilon
}

// observe records the reports of the jobs that ran alone on one server
// last round, and forgets the jobs gone.
func (st *Stage) observe(s *engine.Snapshot, gpuServer map[string]string) {
	jobs := make(map[string]*engine.Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for k := range st.learnt {
		if jobs[k.job] == nil {
			delete(st.learnt, k)
		}
	}
	for _, a := range s.Running {
		if len(a.Jobs) != 1 || len(a.Resources) != 1 || len(a.GPUs) == 0 || !oneServer(a.GPUs, gpuServer) {
			continue
		}
		j := jobs[a.Jobs[0]]
		if j == nil || j.Profile != "" {
			continue
		}
		v, r, g := st.measured(j, a.Type), a.Resources[0], float64(len(a.GPUs))
		if !(v > 0) || math.IsInf(v, 0) || !(r.Cores > 0) || !(r.MemGB > 0) {
			continue
		}
		if st.learnt == nil {
			st.learnt = map[learnKey]*learner{}
		}
		k := learnKey{j.ID, a.Type}
		l := st.learnt[k]
		if l == nil || l.gpus != len(a.GPUs) { // a resized job starts over
			l = &learner{gpus: len(a.GPUs)}
			st.learnt[k] = l
		}
		l.add(synergy.Sample{CoresPerGPU: r.Cores / g, MemGBPerGPU: r.MemGB / g, Throughput: v})
	}
}

// add appends a sample, dropping the oldest at its grant beyond
// KeepSamples.
func (l *learner) add(x synergy.Sample) {
	same := func(s synergy.Sample) bool {
		return sameCores(s.CoresPerGPU, x.CoresPerGPU) && sameCores(s.MemGBPerGPU, x.MemGBPerGPU)
	}
	n := 0
	for _, s := range l.samples {
		if same(s) {
			n++
		}
	}
	if n >= KeepSamples {
		i := slices.IndexFunc(l.samples, same)
		l.samples = slices.Delete(l.samples, i, i+1)
	}
	l.samples = append(l.samples, x)
	l.profN = -1 // learn again
}

func oneServer(gpus []string, gpuServer map[string]string) bool {
	for _, g := range gpus[1:] {
		if gpuServer[g] != gpuServer[gpus[0]] {
			return false
		}
	}
	return true
}

// learned is the profile a learning job is placed with on srv: its
// learned profile once it has one, else its proportional share.
func (st *Stage) learned(j *engine.Job, typ string, gpus int, srv *Server) *synergy.Profile {
	shareC, shareM := srv.shareCores(), srv.shareMem()
	share := &synergy.Profile{Model: "learning", GPUs: gpus, CoresPerGPUBest: shareC, MemGBPerGPUBest: shareM,
		Speedup: 1, ShareCoresPerGPU: shareC, ShareMemGBPerGPU: shareM}
	l := st.learnt[learnKey{j.ID, typ}]
	if l == nil || l.gpus != gpus {
		return share
	}
	if l.profN != len(l.samples) || l.profFor != [2]float64{shareC, shareM} {
		o := synergy.LearnOptions{ShareCoresPerGPU: shareC, ShareMemGBPerGPU: shareM,
			Epsilon: st.Learn.Epsilon, MinPoints: st.Learn.MinPoints}
		if st.Learn.Cache != nil {
			o.Cache = st.Learn.Cache(j, gpus)
		}
		p, err := synergy.Learn(j.ID, gpus, l.samples, o)
		if err != nil {
			st.warn(j.ID, fmt.Sprintf("learning its profile: %v; placed at its proportional share", err))
			p = nil
		}
		l.prof, l.profN, l.profFor = p, len(l.samples), [2]float64{shareC, shareM}
	}
	if l.prof == nil {
		return share
	}
	return l.prof
}

// Learned is what the stage learned of a job on a GPU type: its samples
// and profile (nil until it has one). For records and tests.
func (st *Stage) Learned(job, typ string) ([]synergy.Sample, *synergy.Profile) {
	l := st.learnt[learnKey{job, typ}]
	if l == nil {
		return nil, nil
	}
	return slices.Clone(l.samples), l.prof
}

// point is one measured core count per GPU: the mean throughput there.
type point struct{ cores, v float64 }

// points are l's samples' mean per core count, by cores.
func (l *learner) points() []point {
	var ps []point
	var ns []int
	for _, s := range l.samples {
		k := slices.IndexFunc(ps, func(p point) bool { return sameCores(p.cores, s.CoresPerGPU) })
		if k < 0 {
			ps, ns = append(ps, point{cores: s.CoresPerGPU}), append(ns, 0)
			k = len(ps) - 1
		}
		ps[k].v += s.Throughput
		ns[k]++
	}
	for k := range ps {
		ps[k].v /= float64(ns[k])
	}
	sort.Slice(ps, func(a, b int) bool { return ps[a].cores < ps[b].cores })
	return ps
}

func sameCores(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, b) }

// climb says where l's exploration stands: the most cores per GPU
// measured (top), whether the step to it gained nothing (failed), and the
// next grid step above it (0: none).
func (l *learner) climb(eps float64) (top float64, failed bool, next float64) {
	ps := l.points()
	if len(ps) == 0 {
		return 0, false, 0
	}
	last := ps[len(ps)-1]
	if len(ps) > 1 {
		below := 0.0
		for _, p := range ps[:len(ps)-1] {
			below = math.Max(below, p.v)
		}
		failed = last.v < (1+eps)*below
	}
	for _, c := range synergy.CoresAxis {
		if c > last.cores && !sameCores(c, last.cores) {
			next = c
			break
		}
	}
	return last.cores, failed, next
}

// learnJob is a learning job of a mode group, as explore needs it.
type learnJob struct {
	j   *engine.Job
	typ string
}

// explore offers the group's learning jobs their next step, or takes a
// kept job whose last step gained nothing back to its best case (see
// Learning), amending grants.
func (st *Stage) explore(servers []Server, jobs []Job, grants map[string]Grant, learning map[string]learnJob) {
	used, _ := usage(jobs, grants)
	byID := map[string]*Server{}
	for i := range servers {
		byID[servers[i].ID] = &servers[i]
	}
	for _, j := range jobs {
		lj, ok := learning[j.ID]
		gr, granted := grants[j.ID]
		if !ok || !granted || len(j.GPUs) != 1 || j.Shared {
			continue
		}
		var srv *Server
		var gpus int
		for id, n := range j.GPUs {
			srv, gpus = byID[id], n
		}
		l := st.learnt[learnKey{lj.j.ID, lj.typ}]
		if srv == nil || l == nil || l.gpus != gpus {
			continue
		}
		g := float64(gpus)
		top, failed, next := l.climb(st.eps())
		kept := j.Held != nil
		if kept && (math.Abs(gr.Cores-j.Held.Cores) > 1e-6 || math.Abs(gr.MemGB-j.Held.MemGB) > 1e-6) {
			continue // the mode retunes it already
		}
		if kept && !sameCores(gr.Cores/g, top) {
			continue // not at its top: climbs only from there
		}
		if failed {
			if !kept {
				continue // placed by its learned profile already
			}
			p := st.learned(lj.j, lj.typ, gpus, srv)
			back := math.Max(p.CoresPerGPUBest, srv.shareCores()) * g
			if back < gr.Cores-1e-6 {
				used[srv.ID] -= gr.Cores - back
				gr.Cores = back
				grants[j.ID] = gr
			}
			continue
		}
		if next == 0 || next*g > srv.Cores+eps || next*g <= gr.Cores+eps {
			continue
		}
		if need := next*g - gr.Cores; need <= srv.Cores-used[srv.ID]+eps {
			used[srv.ID] += need
			gr.Cores = next * g
			grants[j.ID] = gr
		}
	}
}

// learnHistory is the stage's history when it learned something: Next's
// history and the samples. A history without the placement_learn key is
// Next's as it is.
type learnHistory struct {
	Learn []learnRecord   `json:"placement_learn"`
	Next  json.RawMessage `json:"next,omitempty"`
}

type learnRecord struct {
	Job     string       `json:"job"`
	Type    string       `json:"type"`
	GPUs    int          `json:"gpus"`
	Samples [][3]float64 `json:"samples"` // cores per GPU, GB per GPU, throughput
}

// wrapHistory adds the samples to Next's history next.
func (st *Stage) wrapHistory(next []byte) ([]byte, error) {
	h := learnHistory{Next: next}
	for k, l := range st.learnt {
		r := learnRecord{Job: k.job, Type: k.typ, GPUs: l.gpus}
		for _, s := range l.samples {
			r.Samples = append(r.Samples, [3]float64{s.CoresPerGPU, s.MemGBPerGPU, s.Throughput})
		}
		h.Learn = append(h.Learn, r)
	}
	sort.Slice(h.Learn, func(a, b int) bool {
		if h.Learn[a].Job != h.Learn[b].Job {
			return h.Learn[a].Job < h.Learn[b].Job
		}
		return h.Learn[a].Type < h.Learn[b].Type
	})
	return json.Marshal(h)
}

// unwrapHistory restores the samples of a history wrapHistory made and
// returns Next's part (wrapped); any other history is Next's as it is.
// Entries that cannot be samples (no job, type or GPUs; a value not
// positive) are dropped; without Learn all are.
func (st *Stage) unwrapHistory(b []byte) (next []byte, wrapped bool, err error) {
	var keys map[string]json.RawMessage
	if !bytes.Contains(b, []byte(`"placement_learn"`)) || json.Unmarshal(b, &keys) != nil || keys["placement_learn"] == nil {
		return b, false, nil
	}
	var h learnHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, true, fmt.Errorf("placement history: %w", err)
	}
	if st.Learn == nil {
		return h.Next, true, nil
	}
	st.learnt = map[learnKey]*learner{}
	for _, r := range h.Learn {
		if r.Job == "" || r.Type == "" || r.GPUs < 1 {
			continue
		}
		l := &learner{gpus: r.GPUs, profN: -1}
		for _, s := range r.Samples {
			if s[0] > 0 && s[1] > 0 && s[2] > 0 && !math.IsInf(s[0]+s[1]+s[2], 0) {
				l.samples = append(l.samples, synergy.Sample{CoresPerGPU: s[0], MemGBPerGPU: s[1], Throughput: s[2]})
			}
		}
		if len(l.samples) > 0 {
			st.learnt[learnKey{r.Job, r.Type}] = l
		}
	}
	return h.Next, true, nil
}

// usage is the cores and memory the granted jobs hold per server: a job
// on several servers holds its grant in proportion to its GPUs there.
func usage(jobs []Job, grants map[string]Grant) (cores, memGB map[string]float64) {
	cores, memGB = map[string]float64{}, map[string]float64{}
	for _, j := range jobs {
		g, ok := grants[j.ID]
		if !ok {
			continue
		}
		total := 0
		for _, n := range j.GPUs {
			total += n
		}
		for id, n := range j.GPUs {
			cores[id] += g.Cores * float64(n) / float64(total)
			memGB[id] += g.MemGB * float64(n) / float64(total)
		}
	}
	return cores, memGB
}

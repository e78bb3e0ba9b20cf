package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies/names"
)

// Placement runs the CPU and memory placement stage (allocator/placement)
// in the simulator: servers get cores and memory, jobs a sensitivity
// profile (trace.Job.Profile; a Gavel job without one, its model's:
// synergy.ForGavelModel), and a job runs at its profile's throughput
// under its grant relative to the proportional share.
//
// Profiles were measured on V100s (synergy.ProfiledGPU). On another GPU
// type the job's profile is scaled to its speed there
// (synergy.Profile.OnGPU, the ratio of its throughputs on the two types),
// for the stage's decisions and for the job's speed alike, unless
// SameOnEveryGPU or Learn (the stage then learns what it sees).
type Placement struct {
	// Mode of a job's VC ("" : the only one).
	Mode func(vc string) placement.Mode
	// CoresPerServer and MemGBPerServer size every server (a node of
	// Options.Nodes too).
	CoresPerServer, MemGBPerServer float64
	// Profiles (nil: synergy.Default()).
	Profiles *synergy.Table
	// Compat is --synergy-compat: as the reference simulator, every job is
	// re-placed each round at no cost, no leftover step, and a job is
	// credited only two speeds: its profile's speedup when it holds its
	// best-case demand (both cores and memory), else the proportional 1.
	Compat bool
	// Learn hides the jobs' profiles from the stage, which learns them
	// (placement.Learning) from the throughputs the jobs report: what they
	// ran at under their grant (measure.go), with --measure-noise's noise
	// when set. The simulator still runs them at their profiles.
	Learn bool
	// SameOnEveryGPU runs a profile on every GPU type as measured (the
	// same speedup over the proportional share everywhere) instead of
	// scaling it to the type's speed. Compat implies it.
	SameOnEveryGPU bool
}

// profiling is the run's profile state (placement.go).
type profiling struct {
	table  *synergy.Table
	scaled bool                 // profiles scaled to GPU types (a clone of the table, added to)
	names  map[scaledKey]string // profile name at a GPU ratio → scaled name
	cache  map[lookupKey]*synergy.Profile
	stage  *placement.Stage
}

type scaledKey struct {
	name  string
	ratio float64
}

type lookupKey struct {
	name        string
	gpus        int
	coresPerGPU float64
}

// gavelProfile gives a job of a Gavel trace its model's profile when the
// trace names none (synergy.ForGavelModel; "" for other models).
func (s *simulator) gavelProfile(tj *trace.Job) {
	if s.o.Placement != nil && tj.Profile == "" {
		tj.Profile = synergy.ForGavelModel(tj.Model)
	}
}

// typedProfile is the name of js's profile on GPU type typ: scaled to the
// job's speed there relative to synergy.ProfiledGPU when profiles scale.
func (s *simulator) typedProfile(js *jobState, typ string) string {
	name := js.tj.Profile
	if !s.prof.scaled || name == "" {
		return name
	}
	r := synergy.GPURatio(js.tput[typ], js.tput[synergy.ProfiledGPU])
	if r == 1 {
		return name
	}
	k := scaledKey{name, r}
	n, ok := s.prof.names[k]
	if !ok {
		n = s.prof.table.AddOnGPU(name, r)
		s.prof.names[k] = n
	}
	return n
}

// lookup resolves a profile name, cached.
func (s *simulator) lookup(name string, gpus int, coresPerGPU float64) (*synergy.Profile, error) {
	k := lookupKey{name, gpus, coresPerGPU}
	if p, ok := s.prof.cache[k]; ok {
		return p, nil
	}
	p, err := s.prof.table.Lookup(name, gpus, coresPerGPU)
	if err == nil {
		s.prof.cache[k] = p
	}
	return p, err
}

// typedStage lets the stage's Next decide, then has the stage place cores
// and memory with every single-job assignment's profile scaled to the GPU
// type the job got (on a copy of the snapshot's jobs).
type typedStage struct {
	s *simulator
}

func (t typedStage) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	st := t.s.prof.stage
	p, err := st.Next.Round(snap)
	if err != nil || p == nil {
		return p, err
	}
	view := *snap
	view.Jobs = slices.Clone(snap.Jobs)
	at := make(map[string]int, len(view.Jobs))
	for i := range view.Jobs {
		at[view.Jobs[i].ID] = i
	}
	for _, a := range p.Assignments {
		if len(a.Jobs) != 1 {
			continue
		}
		i, ok := at[a.Jobs[0]]
		js := t.s.byIDs[a.Jobs[0]]
		if !ok || js == nil || view.Jobs[i].Profile == "" {
			continue
		}
		view.Jobs[i].Profile = t.s.typedProfile(js, a.Type)
	}
	return p, st.Apply(&view, p)
}

// initPlacement gives the servers cores and memory and wraps the decider
// in the placement stage (Options.Placement).
func (s *simulator) initPlacement(next loop.Decider) (loop.Decider, error) {
	p := s.o.Placement
	if p == nil {
		return next, nil
	}
	if !(p.CoresPerServer > 0) || !(p.MemGBPerServer > 0) || math.IsInf(p.CoresPerServer+p.MemGBPerServer, 0) {
		return nil, fmt.Errorf("sim: placement needs servers with cores and memory (cpus per server %v, memory per server %v GB)", p.CoresPerServer, p.MemGBPerServer)
	}
	if s.o.Ideal {
		return nil, fmt.Errorf("sim: placement needs the round-based mechanism, not the ideal one")
	}
	if len(s.nodes) == 0 {
		seen := map[string]bool{}
		for _, g := range s.gpus {
			if !seen[g.Server] {
				seen[g.Server] = true
				s.nodes = append(s.nodes, engine.Node{ID: g.Server, Name: g.Server, Ready: true})
			}
		}
	}
	s.srvGPUs = map[string]int{}
	for _, g := range s.gpus {
		s.srvGPUs[g.Server]++
	}
	for i := range s.nodes {
		s.nodes[i].Cores, s.nodes[i].MemGB = p.CoresPerServer, p.MemGBPerServer
	}
	tb := p.Profiles
	if tb == nil {
		tb = synergy.Default()
	}
	s.prof = profiling{table: tb, scaled: !p.Compat && !p.SameOnEveryGPU, names: map[scaledKey]string{},
		cache: map[lookupKey]*synergy.Profile{}}
	if s.prof.scaled {
		s.prof.table = tb.Clone() // scaled profiles are added to it as jobs meet types
	}
	st := &placement.Stage{Next: next, Mode: p.Mode, Profiles: s.prof.table,
		Options: placement.Options{Leftover: !p.Compat, Fresh: p.Compat, FirstFit: p.Compat && s.o.Decider == nil,
			Choose: !p.Compat && s.o.Decider == nil,
			Regrow: !p.Compat, RetuneCostS: math.Max(s.o.PreemptionCostS, s.o.StartCostS)}}
	if st.Options.FirstFit {
		st.Order, st.Backfill = compatOrder(s.o.Engine.Policy, s.baseThroughput)
		if st.Order != nil {
			st.Next = referenceQueue{}
		}
	}
	s.prof.stage = st
	if p.Learn {
		if p.Compat {
			return nil, fmt.Errorf("sim: placement learning with --synergy-compat: the reference knows every profile")
		}
		st.Learn = &placement.Learning{}
		return hideProfiles{st}, nil
	}
	if s.prof.scaled {
		return typedStage{s}, nil
	}
	return st, nil
}

// referenceQueue stands in for the policy under --synergy-compat when the
// reference's queue decides who runs (compatOrder, placement's firstFit):
// the plan starts empty, every running job suspended, and the stage fills
// it. Solving the policy would be wasted, and slow: FTF's program over the
// hundreds of jobs the reference's FTF starves.
type referenceQueue struct{}

func (referenceQueue) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p := &engine.Plan{TimeS: s.TimeS}
	active := make(map[string]bool, len(s.Jobs))
	for i := range s.Jobs {
		active[s.Jobs[i].ID] = true
	}
	for _, a := range s.Running {
		for _, id := range a.Jobs {
			if active[id] {
				p.Suspend = append(p.Suspend, id)
			}
		}
	}
	return p, nil
}

// hideProfiles hands the stage the snapshot without the jobs' profile
// names (Placement.Learn; the snapshot's job list is built each round).
type hideProfiles struct{ next loop.Decider }

func (h hideProfiles) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	hideNames(snap)
	return h.next.Round(snap)
}

func hideNames(snap *engine.Snapshot) {
	for i := range snap.Jobs {
		snap.Jobs[i].Profile = ""
	}
}

// cpuFactor is how fast job k of assignment a runs for its cores and
// memory, relative to the proportional share (1 without placement, for a
// job without a profile, or without a grant).
func (s *simulator) cpuFactor(js *jobState, a engine.Assignment, k int) float64 {
	if s.o.Placement == nil || js.tj.Profile == "" || k >= len(a.Resources) || len(a.Jobs) > 1 || len(a.GPUs) == 0 {
		return 1
	}
	servers := map[string]bool{}
	for _, g := range a.GPUs {
		servers[s.serverOf(g)] = true
	}
	if len(servers) > 1 {
		return 1 // a multi-server job holds its proportional share
	}
	srvGPUs := float64(s.srvGPUs[s.serverOf(a.GPUs[0])])
	shareC, shareM := s.o.Placement.CoresPerServer/srvGPUs, s.o.Placement.MemGBPerServer/srvGPUs
	p, err := s.lookup(s.typedProfile(js, a.Type), len(a.GPUs), shareC)
	if err != nil {
		return 1
	}
	g := float64(len(a.GPUs))
	c, m := a.Resources[k].Cores/g, a.Resources[k].MemGB/g
	if s.o.Placement.Compat {
		if c+1e-9 >= math.Min(p.CoresPerGPUBest, shareC*srvGPUs/g) && m+1e-9 >= math.Min(p.MemGBPerGPUBest, shareM*srvGPUs/g) {
			return p.Speedup
		}
		return 1
	}
	base := p.Throughput(shareC, shareM)
	if base <= 0 {
		return 1
	}
	return p.Throughput(c, m) / base
}

// serverOf is a GPU's server.
func (s *simulator) serverOf(gpu string) string {
	if s.gpuServer == nil {
		s.gpuServer = make(map[string]string, len(s.gpus))
		for _, g := range s.gpus {
			s.gpuServer[g.ID] = g.Server
		}
	}
	return s.gpuServer[gpu]
}

// compatOrderSpeed is the speed a --synergy-compat TUNE or GREEDY run shows
// the policy for a job, as the reference orders SRTF and FTF by remaining
// time divided by the job's speedup: the speed it ran at in the last round
// (1 at the proportional share), else its profile's speedup. 1 otherwise
// (Rondo's own model admits by GPUs alone).
func (s *simulator) compatOrderSpeed(js *jobState) float64 {
	p := s.o.Placement
	if !s.compatOrderSpeeds() || js.tj.Profile == "" {
		return 1
	}
	if js.compatSpeed > 0 {
		return js.compatSpeed
	}
	pr, err := s.lookup(js.tj.Profile, max(js.tj.ScaleFactor, 1), p.CoresPerServer/float64(max(s.o.Cluster.GPUsPerServer, 1)))
	if err != nil {
		return 1
	}
	return pr.Speedup
}

// compatOrderSpeeds: a --synergy-compat TUNE or GREEDY run, where the
// policy sees speeds (compatOrderSpeed).
func (s *simulator) compatOrderSpeeds() bool {
	p := s.o.Placement
	if p == nil || !p.Compat || p.Mode == nil {
		return false
	}
	m := p.Mode("")
	return m == placement.Tune || m == placement.Greedy
}

// compatOrder is the reference's queue under --synergy-compat, which
// decides the jobs that run (placement's firstFit), and whether it is
// walked to its end (backfill): FIFO by arrival, SRTF by remaining time
// (at the speed the policy sees), both walked; LAS by attained service
// (time run × GPUs), then arrival, listed first, as the reference; FTF by
// ρ = (now − arrival + remaining time) / isolated time at the
// proportional share, ascending as the reference sorts it (the job least
// behind its fair finish first, the reverse of Themis's FTF, which is
// Rondo's own: docs/synergy/reference-notes.md §4), walked. base is a
// job's throughput at the proportional share. Other policies: nil (the
// plan's jobs in the plan's order).
func compatOrder(policy string, base func(id string) float64) (func(*engine.Snapshot) []string, bool) {
	c, err := names.Canonical(policy)
	if err != nil {
		return nil, false
	}
	// The reference's SRTF, LAS and FTF put first, whatever their key, the
	// jobs that had not run for over 1000 hours (since their last round
	// ended, or since arrival) at an earlier round: its "priority bump",
	// sticky; FIFO ignores it.
	bumped := map[string]bool{}
	lastRan := map[string]float64{}
	// The previous round's maps, cleared and refilled: no two new maps a round.
	spareAged, spareRan := map[string]bool{}, map[string]float64{}
	bump := !strings.HasPrefix(c, "fifo")
	sorted := func(s *engine.Snapshot, key func(j *engine.Job) float64) []string {
		type keyed struct {
			id       string
			bumped   bool
			k        float64
			arrivalS float64
			i        int
		}
		ks := make([]keyed, len(s.Jobs))
		for _, a := range s.Running {
			for _, id := range a.Jobs {
				lastRan[id] = s.TimeS // its round ends now
			}
		}
		aged, ran := spareAged, spareRan
		clear(aged)
		clear(ran)
		for i := range s.Jobs {
			j := &s.Jobs[i]
			ks[i] = keyed{j.ID, bump && bumped[j.ID], key(j), j.ArrivalS, i}
			since := j.ArrivalS
			if t, ok := lastRan[j.ID]; ok {
				since, ran[j.ID] = t, t
			}
			if bumped[j.ID] || s.TimeS-since > compatBumpS {
				aged[j.ID] = true
			}
		}
		bumped, lastRan, spareAged, spareRan = aged, ran, bumped, lastRan
		// Arrival breaks ties, as the reference's keys end with it.
		slices.SortFunc(ks, func(a, b keyed) int {
			if a.bumped != b.bumped {
				if a.bumped {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.arrivalS, b.arrivalS), cmp.Compare(a.i, b.i))
		})
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.id
		}
		return out
	}
	switch {
	case strings.HasPrefix(c, "fifo"):
		return func(s *engine.Snapshot) []string { return sorted(s, func(*engine.Job) float64 { return 0 }) }, true
	case strings.HasPrefix(c, "shortest_job_first"):
		return func(s *engine.Snapshot) []string { return sorted(s, remainingS) }, true
	case strings.HasPrefix(c, "finish_time_fairness"):
		return func(s *engine.Snapshot) []string {
			return sorted(s, func(j *engine.Job) float64 {
				b := base(j.ID)
				if b <= 0 || j.TotalSteps <= 0 {
					return math.Inf(1)
				}
				return (s.TimeS - j.ArrivalS + remainingS(j)) / (j.TotalSteps / b)
			})
		}, true
	case strings.HasPrefix(c, "max_min_fairness"):
		return func(s *engine.Snapshot) []string {
			return sorted(s, func(j *engine.Job) float64 {
				t := 0.0
				for _, v := range j.ReceivedS {
					t += v
				}
				return t * float64(max(j.ScaleFactor, 1))
			})
		}, false
	}
	return nil, false
}

// compatBumpS is the reference's starvation bound: 1000 hours.
const compatBumpS = 1000 * 3600

// remainingS is a job's remaining time at the best throughput the policy
// sees for it (+Inf where it cannot run).
func remainingS(j *engine.Job) float64 {
	best := 0.0
	for _, v := range j.Throughput {
		best = math.Max(best, v)
	}
	if best <= 0 {
		return math.Inf(1)
	}
	return j.RemainingSteps / best
}

// baseThroughput is an active job's best throughput at the proportional
// share (what its snapshot shows before compatOrderSpeed); 0 if gone.
func (s *simulator) baseThroughput(id string) float64 {
	js := s.byIDs[id]
	if js == nil {
		return 0
	}
	best := 0.0
	for _, v := range js.tput {
		best = math.Max(best, v)
	}
	return best
}

// Quotas are the wrapped decider's VC quotas (loop.QuotasOf).
func (h hideProfiles) Quotas() engine.Quotas { return loop.QuotasOf(h.next) }

package round

import (
	"maps"
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// PairEstimates is the estimating stage's half for colocated pairs (Gavel
// §3.3): what the policy is told of each pair the backend offers.
//
//   - A pair the two jobs reported running together (engine.Pair.Measured)
//     is told its learned throughputs (estimator.PairOnline), in place of
//     the table's, as a job's isolated throughput is.
//   - A pair nobody measured on a type (engine.Pair.Unknown: one job's
//     model is absent from the table) is estimated by matrix completion
//     (estimator.Completer) once the new job was profiled against
//     Profiles reference jobs (jobs whose model the table has) on that
//     type.
//   - Until then the round plans the profiling runs: the new job's pairs
//     with reference models it was not yet profiled against are offered as
//     free (both jobs at their isolated throughput), so a packing policy
//     that has use for a pair tries them; the first report replaces the
//     guess. Profiling starts once the new job's isolated throughput on the
//     type was measured (pair throughputs are normalized by it).
//
// A pair whose two models the table lacks is not offered (neither is a
// reference). Each change a profiling run brings (a job starts profiling
// on a type, a profile lands, a completion becomes available) asks the
// engines to recompute, so the policy decides on it at once rather than at
// the next arrival.
type PairEstimates struct {
	Online    *estimator.PairOnline
	Completer *estimator.Completer
	// Profiles is how many reference jobs a new job is profiled against
	// (0: estimator.DefaultProfiles).
	Profiles int

	// profiles[job][type][reference index]: the new job's normalized
	// throughput with that reference (its steps/s, normalized when used:
	// its isolated estimate improves) and the reference's; kept while the
	// job is active, even after the partner left.
	profiles map[string]map[string]map[int]profile
	// state: how far a new job's estimation is on a type (a reset is
	// asked for when it moves).
	state map[jobType]stage
}

type jobType struct{ job, typ string }

type profile struct {
	steps     float64 // the new job's steps/s in the pair
	otherNorm float64 // the reference job's steps/s over its isolated
}

type stage struct {
	eligible bool // isolated throughput measured: profiling runs offered
	profiled int  // profiles landed
	complete bool
}

// NewPairEstimates estimates pairs against t's colocation measurements.
func NewPairEstimates(t *throughputs.Table) *PairEstimates {
	return &PairEstimates{Online: estimator.NewPairOnline(0), Completer: estimator.NewCompleter(t, estimator.DefaultOptions)}
}

// Estimate rewrites s.Pairs (a new slice: backends may share theirs) with
// what the policy is told of each pair, iso being the isolated estimator
// the stage already applied to s.Jobs. It reports whether the engines
// should recompute.
func (p *PairEstimates) Estimate(s *engine.Snapshot, iso *estimator.Online) bool {
	if p.profiles == nil {
		p.profiles = map[string]map[string]map[int]profile{}
		p.state = map[jobType]stage{}
	}
	jobs := make(map[string]*engine.Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	p.forgetGone(jobs)
	for _, pr := range s.Pairs {
		a, b := jobs[pr.Jobs[0]], jobs[pr.Jobs[1]]
		for _, typ := range slices.Sorted(maps.Keys(pr.Measured)) {
			v := pr.Measured[typ]
			p.Online.Observe(pr.Jobs[0], pr.Jobs[1], typ, v)
			if a != nil && b != nil {
				p.noteProfile(a, b, typ, v[0], v[1])
				p.noteProfile(b, a, typ, v[1], v[0])
			}
		}
	}
	if !p.touches(s.Pairs) {
		return false
	}
	before := maps.Clone(p.state)
	out := make([]engine.Pair, 0, len(s.Pairs))
	for _, pr := range s.Pairs {
		a, b := jobs[pr.Jobs[0]], jobs[pr.Jobs[1]]
		if a == nil || b == nil {
			continue
		}
		if len(pr.Unknown) == 0 && !(p.Online.Has(a.ID) && p.Online.Has(b.ID)) {
			out = append(out, pr) // the table's, as offered (the common case: no map built)
			continue
		}
		tp := map[string][2]float64{}
		useful := false
		set := func(typ string, v [2]float64) {
			tp[typ] = v
			useful = useful || v[0] > 0 && v[1] > 0
		}
		for typ, v := range pr.Throughput {
			if m, n := p.Online.Pair(a.ID, b.ID, typ); n > 0 {
				v = m
			}
			set(typ, v)
		}
		for _, typ := range pr.Unknown {
			if _, ok := pr.Throughput[typ]; ok {
				continue
			}
			if m, n := p.Online.Pair(a.ID, b.ID, typ); n > 0 {
				set(typ, m)
			} else if v, ok := p.unknown(a, b, typ, iso); ok {
				set(typ, v)
			}
		}
		if !useful {
			continue
		}
		if maps.Equal(tp, pr.Throughput) {
			tp = pr.Throughput // unchanged: keep the backend's map
		}
		out = append(out, engine.Pair{Jobs: pr.Jobs, Throughput: tp, ReceivedS: pr.ReceivedS})
	}
	s.Pairs = out
	return !maps.Equal(before, p.state)
}

// touches reports whether some pair is unknown somewhere or was measured:
// otherwise the backend's pairs stand as they are (the simulator offers
// tens of thousands, measured only with --measure-noise).
func (p *PairEstimates) touches(pairs []engine.Pair) bool {
	for _, pr := range pairs {
		if len(pr.Unknown) > 0 || p.Online.Has(pr.Jobs[0]) && p.Online.Has(pr.Jobs[1]) {
			return true
		}
	}
	return false
}

// noteProfile records a's run with b on typ as one of a's profiles when b
// is a reference job and a is not.
func (p *PairEstimates) noteProfile(a, b *engine.Job, typ string, aSteps, bSteps float64) {
	r := p.Completer.Reference(typ, a.ScaleFactor)
	if r == nil || r.Index(key(a)) >= 0 {
		return
	}
	ib := r.Index(key(b))
	bIso := b.Throughput[typ]
	if ib < 0 || !(aSteps > 0) || !(bSteps > 0) || !(bIso > 0) {
		return
	}
	byType := p.profiles[a.ID]
	if byType == nil {
		byType = map[string]map[int]profile{}
		p.profiles[a.ID] = byType
	}
	if byType[typ] == nil {
		byType[typ] = map[int]profile{}
	}
	byType[typ][ib] = profile{steps: aSteps, otherNorm: bSteps / bIso}
}

// unknown is the policy's view of a pair nobody measured on typ: a
// completion, a profile taken with another job of the reference's model,
// or a profiling run's guess (both at full speed).
func (p *PairEstimates) unknown(a, b *engine.Job, typ string, iso *estimator.Online) ([2]float64, bool) {
	if a.ScaleFactor != b.ScaleFactor {
		return [2]float64{}, false
	}
	r := p.Completer.Reference(typ, a.ScaleFactor)
	if r == nil {
		return [2]float64{}, false
	}
	ia, ib := r.Index(key(a)), r.Index(key(b))
	if (ia >= 0) == (ib >= 0) {
		return [2]float64{}, false // both references (the table would have them) or neither
	}
	nw, ref, ir, flip := a, b, ib, false
	if ia >= 0 {
		nw, ref, ir, flip = b, a, ia, true
	}
	orient := func(v [2]float64) ([2]float64, bool) {
		if flip {
			v[0], v[1] = v[1], v[0]
		}
		return v, true
	}
	refIso, newIso := ref.Throughput[typ], nw.Throughput[typ]
	if !(refIso > 0) || !(newIso > 0) || iso == nil || iso.Samples(nw.ID, typ) == 0 {
		return [2]float64{}, false // the new job's isolated throughput is not measured yet
	}
	id := jobType{nw.ID, typ}
	st := p.state[id]
	st.eligible = true
	profs := p.profiles[nw.ID][typ]
	st.profiled = len(profs)
	need := p.Profiles
	if need <= 0 {
		need = estimator.DefaultProfiles
	}
	if len(profs) >= need {
		ms := make([]estimator.Measurement, 0, len(profs))
		for _, j := range slices.Sorted(maps.Keys(profs)) {
			ms = append(ms, estimator.Measurement{Ref: j, New: profs[j].steps / newIso, Other: profs[j].otherNorm})
		}
		if e, err := p.Completer.Estimate(nw.ID, typ, r, ms); err == nil {
			st.complete = true
			p.state[id] = st
			nn, on, ok := e.Pair(ir)
			if !ok {
				return orient([2]float64{})
			}
			return orient(estimator.PairThroughput(nn, on, newIso, refIso))
		}
	}
	p.state[id] = st
	if pf, ok := profs[ir]; ok {
		return orient(estimator.PairThroughput(pf.steps/newIso, pf.otherNorm, newIso, refIso))
	}
	return orient([2]float64{newIso, refIso}) // a profiling run
}

// forgetGone drops what was learned of jobs no longer active.
func (p *PairEstimates) forgetGone(jobs map[string]*engine.Job) {
	for id := range p.profiles {
		if jobs[id] == nil {
			delete(p.profiles, id)
			p.Completer.Forget(id)
		}
	}
	for id := range p.state {
		if jobs[id.job] == nil {
			delete(p.state, id)
		}
	}
	p.Online.Retain(func(job string) bool { return jobs[job] != nil })
}

func key(j *engine.Job) throughputs.Key {
	return throughputs.Key{Model: j.Model, ScaleFactor: j.ScaleFactor}
}

package round_test

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// TestPairsLearned: a pair both jobs reported running together is told
// its learned throughputs in place of the table's (a mean of the reports,
// as the isolated estimator's first samples).
func TestPairsLearned(t *testing.T) {
	pe := round.NewPairEstimates(throughputs.Default())
	jobs := []engine.Job{{ID: "a", ScaleFactor: 1, Model: "A3C", Throughput: map[string]float64{"v100": 10}},
		{ID: "b", ScaleFactor: 1, Model: "CycleGAN", Throughput: map[string]float64{"v100": 8}}}
	table := map[string][2]float64{"v100": {6, 5}, "k80": {1, 1}}
	s := &engine.Snapshot{Jobs: jobs, Pairs: []engine.Pair{{Jobs: [2]string{"a", "b"}, Throughput: table,
		Measured: map[string][2]float64{"v100": {7, 4}}}}}
	if reset := pe.Estimate(s, estimator.NewOnline(0, nil)); reset {
		t.Error("a learned pair of table models asked for a recompute")
	}
	if got := s.Pairs[0].Throughput; got["v100"] != [2]float64{7, 4} || got["k80"] != [2]float64{1, 1} {
		t.Fatalf("after one report: %v, want v100 learned, k80 the table's", got)
	}
	if table["v100"] != [2]float64{6, 5} {
		t.Fatal("the backend's map was written")
	}
	s = &engine.Snapshot{Jobs: jobs, Pairs: []engine.Pair{{Jobs: [2]string{"b", "a"}, Throughput: map[string][2]float64{"v100": {5, 6}},
		Measured: map[string][2]float64{"v100": {6, 9}}}}}
	pe.Estimate(s, estimator.NewOnline(0, nil))
	if got := s.Pairs[0].Throughput["v100"]; got != [2]float64{5, 8} {
		t.Fatalf("after a second report, in the other order: %v, want the mean [5 8]", got)
	}
	// A job that left takes its pairs' estimates along.
	s = &engine.Snapshot{Jobs: jobs[:1]}
	pe.Estimate(s, nil)
	if pe.Online.Has("a") || pe.Online.Has("b") {
		t.Fatal("the pair of a job that left is still kept")
	}
}

// TestPairsProfiledThenCompleted walks a job whose model the table lacks
// through Gavel's estimation: nothing offered until its isolated
// throughput is measured, then profiling runs with each reference model
// (offered as free), each profile told as measured, and after
// DefaultProfiles profiles every other pair completed exactly as
// estimator.Reference.Estimate completes the job's row and column; a
// recompute is asked for at each step and only then.
func TestPairsProfiledThenCompleted(t *testing.T) {
	tb := throughputs.Default()
	const typ = "v100"
	var refs []throughputs.Key
	for _, k := range tb.Keys(typ) {
		if k.ScaleFactor == 1 {
			refs = append(refs, k)
		}
	}
	// The new job behaves as twin (its truth), under a name the table lacks.
	twin := refs[3]
	twinIso, _ := tb.Isolated(twin, typ)
	truth := func(k throughputs.Key) [2]float64 { v, _ := tb.Pair(twin, k, typ); return v }

	iso := estimator.NewOnline(0, nil)
	pe := round.NewPairEstimates(tb)
	partners := refs[:6]
	snap := func(newMeasured float64, measured map[int][2]float64) *engine.Snapshot {
		s := &engine.Snapshot{Jobs: []engine.Job{{ID: "new", ScaleFactor: 1, Model: "mystery",
			Throughput: map[string]float64{typ: 1}}}}
		if newMeasured > 0 {
			s.Jobs[0].Measured = map[string]float64{typ: newMeasured}
		}
		for i, k := range partners {
			v, _ := tb.Isolated(k, typ)
			id := string(rune('a' + i))
			s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Model: k.Model, Throughput: map[string]float64{typ: v}})
			p := engine.Pair{Jobs: [2]string{"new", id}, Unknown: []string{typ}}
			if m, ok := measured[i]; ok {
				p.Measured = map[string][2]float64{typ: m}
			}
			s.Pairs = append(s.Pairs, p)
		}
		// Two jobs of models the table lacks: neither is a reference.
		s.Jobs = append(s.Jobs, engine.Job{ID: "other", ScaleFactor: 1, Model: "enigma", Throughput: map[string]float64{typ: 1}})
		s.Pairs = append(s.Pairs, engine.Pair{Jobs: [2]string{"new", "other"}, Unknown: []string{typ}})
		return s
	}
	decide := func(s *engine.Snapshot) bool {
		round.Estimate(iso, s)
		return pe.Estimate(s, iso)
	}
	told := func(s *engine.Snapshot) map[string][2]float64 {
		m := map[string][2]float64{}
		for _, p := range s.Pairs {
			if p.Jobs[1] == "other" {
				t.Errorf("a pair of two models the table lacks was offered: %v", p.Throughput)
			}
			m[p.Jobs[1]] = p.Throughput[typ]
		}
		return m
	}

	s := snap(0, nil)
	if decide(s) || len(told(s)) != 0 {
		t.Fatalf("before its isolated throughput is measured: %v offered", told(s))
	}
	s = snap(twinIso, nil)
	if !decide(s) {
		t.Error("profiling runs offered without a recompute")
	}
	for id, v := range told(s) {
		ref := partners[id[0]-'a']
		refIso, _ := tb.Isolated(ref, typ)
		if v != [2]float64{twinIso, refIso} {
			t.Fatalf("profiling run with %s told %v, want both at full speed [%v %v]", id, v, twinIso, refIso)
		}
	}
	if decide(snap(0, nil)) {
		t.Error("nothing changed, yet a recompute was asked for")
	}
	// Profiles land one per round.
	var ms []estimator.Measurement
	r, err := estimator.NewReferenceKeys(tb, typ, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < estimator.DefaultProfiles; i++ {
		v := truth(partners[i])
		if v[0] <= 0 {
			t.Fatalf("pick a twin that shares with %v", partners[i])
		}
		s = snap(0, map[int][2]float64{i: v})
		if !decide(s) {
			t.Errorf("profile %d landed without a recompute", i+1)
		}
		if got := told(s)[string(rune('a'+i))]; got != v {
			t.Fatalf("profiled pair told %v, want its measurement %v", got, v)
		}
		refIso, _ := tb.Isolated(partners[i], typ)
		ms = append(ms, estimator.Measurement{Ref: r.Index(partners[i]), New: v[0] / twinIso, Other: v[1] / refIso})
	}
	want, err := r.Estimate(sortedByRef(ms), estimator.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := told(s)
	for i := estimator.DefaultProfiles; i < len(partners); i++ {
		k := partners[i]
		refIso, _ := tb.Isolated(k, typ)
		nn, on, ok := want.Pair(r.Index(k))
		exp := [2]float64{}
		if ok {
			exp = estimator.PairThroughput(nn, on, twinIso, refIso)
		}
		id := string(rune('a' + i))
		if g, told := got[id]; exp[0] > 0 && exp[1] > 0 && (!told || math.Abs(g[0]-exp[0]) > 1e-9 || math.Abs(g[1]-exp[1]) > 1e-9) {
			t.Errorf("completed pair with %v told %v, want %v (truth %v)", k, g, exp, truth(k))
		}
	}
	if decide(snap(0, nil)) {
		t.Error("a completed job asked for a recompute again")
	}
}

func sortedByRef(ms []estimator.Measurement) []estimator.Measurement {
	out := append([]estimator.Measurement(nil), ms...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Ref < out[i].Ref {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

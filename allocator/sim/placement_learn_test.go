package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// learnRun runs two alexnets and two gnmts (1 GPU each, about 40 rounds
// at the share) on one server of 8 V100s, 24 cores and 500 GB under FIFO
// and TUNE; with learn the stage learns their profiles. It returns the
// result and each job's cores per GPU in every round it ran.
func learnRun(t *testing.T, learn bool, noise float64, mode placement.Mode) (*Result, map[int][]float64) {
	t.Helper()
	var b strings.Builder
	for i, m := range []string{"alexnet", "gnmt", "alexnet", "gnmt"} {
		p, err := synergy.Default().Sets["models"].Lookup(m, 1)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d,%s,0,%d,1\n", i, m, int(40*300/p.IterTimeS))
	}
	jobs, err := trace.ReadSynergy(strings.NewReader(b.String()), synergy.Default())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Cluster: Cluster{Types: map[string]int{"v100": 8}, GPUsPerServer: 8},
		Engine:  engine.Config{Policy: "fifo", RoundS: 300, Seed: 1},
		Placement: &Placement{Mode: func(string) placement.Mode { return mode }, CoresPerServer: 24, MemGBPerServer: 500,
			Learn: learn},
		MeasureNoise: noise,
	}
	cores := map[int][]float64{}
	seen := 0
	o.observe = func(s *simulator) {
		if s.rounds == seen {
			return
		}
		seen = s.rounds
		for _, a := range s.prev {
			var id int
			fmt.Sscan(a.Jobs[0], &id)
			cores[id] = append(cores[id], a.Resources[0].Cores/float64(len(a.GPUs)))
		}
	}
	r, err := Run(&SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Finished || r.JobsDone != 4 {
		t.Fatalf("%d jobs done", r.JobsDone)
	}
	return r, cores
}

// TestPlacementLearns: the stage, told nothing, learns from the jobs'
// reports. From round 10 on the alexnets hold more than the proportional
// 3 cores per GPU (9: 12 does not fit beside the others) and the gnmts 3;
// learning costs at most one retune per grid step above the share plus
// one per job (7 here) over TUNE with the profiles named, and the average
// JCT beats proportional placement's.
func TestPlacementLearns(t *testing.T) {
	named, _ := learnRun(t, false, 0, placement.Tune)
	prop, _ := learnRun(t, false, 0, placement.Proportional)
	for _, noise := range []float64{0, 0.05} {
		r, cores := learnRun(t, true, noise, placement.Tune)
		for id, cs := range cores {
			if len(cs) < 12 {
				t.Fatalf("noise %v: job %d ran %d rounds", noise, id, len(cs))
			}
			for k, c := range cs[10:] {
				alex := id%2 == 0
				if alex && !(c > 3) {
					t.Errorf("noise %v: alexnet %d has %v cores per GPU in round %d", noise, id, c, 10+k)
				}
				if !alex && noise == 0 && c != 3 {
					t.Errorf("gnmt %d has %v cores per GPU in round %d", id, c, 10+k)
				}
			}
			if noise == 0 && id%2 == 0 && cs[len(cs)-1] != 9 {
				t.Errorf("alexnet %d ends at %v cores, want 9", id, cs[len(cs)-1])
			}
		}
		steps := 0
		for _, c := range synergy.CoresAxis {
			if c > 3 {
				steps++
			}
		}
		if extra := r.Retunes - named.Retunes; extra > 4*(steps+1) {
			t.Errorf("noise %v: %d retunes learning, %d named: %d extra, bound %d", noise, r.Retunes, named.Retunes, extra, 4*(steps+1))
		}
		if !(r.AvgJCTS < prop.AvgJCTS) {
			t.Errorf("noise %v: learning avg JCT %.0f, proportional %.0f", noise, r.AvgJCTS, prop.AvgJCTS)
		}
		t.Logf("noise %v: learned avg JCT %.0f s (%d retunes), named %.0f s (%d), proportional %.0f s; cores %v",
			noise, r.AvgJCTS, r.Retunes, named.AvgJCTS, named.Retunes, prop.AvgJCTS, cores)
	}
}

// TestPlacementLearnCompat: the reference knows every profile.
func TestPlacementLearnCompat(t *testing.T) {
	_, err := Run(&SliceSource{}, Options{Cluster: Cluster{Types: map[string]int{"v100": 8}, GPUsPerServer: 8},
		Engine:    engine.Config{Policy: "fifo", RoundS: 300},
		Placement: &Placement{CoresPerServer: 24, MemGBPerServer: 500, Compat: true, Learn: true}})
	if err == nil || !strings.Contains(err.Error(), "learning with --synergy-compat") {
		t.Errorf("got %v", err)
	}
}

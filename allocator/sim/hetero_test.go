package sim

import (
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// heteroRun runs n jobs of Gavel's continuous single-GPU trace on Gavel's
// three types, 4 GPUs a server with Synergy's 3 cores and 62.5 GB per GPU,
// under heterogeneity-aware LAS (max_min_fairness_perf), the jobs taking
// their models' Synergy profiles (synergy.ForGavelModel).
func heteroRun(t *testing.T, seed int64, rate float64, n, perType int, mode placement.Mode, same bool, observe func(*simulator)) *Result {
	t.Helper()
	jobs, err := trace.Generate(trace.Options{Seed: seed, Rate: rate}, n)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(&SliceSource{Jobs: jobs}, Options{
		Cluster: Cluster{Types: map[string]int{"v100": perType, "p100": perType, "k80": perType}, GPUsPerServer: 4},
		Engine:  engine.Config{Policy: "max_min_fairness_perf", RoundS: 360},
		Placement: &Placement{Mode: func(string) placement.Mode { return mode },
			CoresPerServer: 4 * synergy.BaseCoresPerGPU, MemGBPerServer: 4 * synergy.BaseMemGBPerGPU, SameOnEveryGPU: same},
		observe: observe,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Finished || r.JobsDone != n {
		t.Fatalf("seed %d %s same=%v: %d of %d jobs done", seed, mode, same, r.JobsDone, n)
	}
	return r
}

// TestHeteroTuneNotWorse: Gavel's cluster scaled down (8 GPUs of each
// type, 80 jobs at 3 jobs/h: the queue builds up), every job finishes and
// aware LAS + TUNE's average JCT is no worse than aware LAS +
// proportional's, per seed and with either reading of a V100 profile on
// slower GPUs (scaled to the type's speed, or the same everywhere);
// proportional is the same run either way (its grant is the share, 1.0).
// docs/synergy/heterogeneous.md has the full-size runs.
func TestHeteroTuneNotWorse(t *testing.T) {
	for _, seed := range []int64{0, 1} {
		prop := heteroRun(t, seed, 3, 80, 8, placement.Proportional, false, nil)
		if same := heteroRun(t, seed, 3, 80, 8, placement.Proportional, true, nil); same.AvgJCTS != prop.AvgJCTS {
			t.Errorf("seed %d: proportional %v scaled, %v same", seed, prop.AvgJCTS, same.AvgJCTS)
		}
		if prop.Retunes != 0 {
			t.Errorf("seed %d: proportional retuned %d times", seed, prop.Retunes)
		}
		for _, same := range []bool{false, true} {
			tune := heteroRun(t, seed, 3, 80, 8, placement.Tune, same, nil)
			if tune.AvgJCTS > prop.AvgJCTS {
				t.Errorf("seed %d same=%v: TUNE avg JCT %.0f s > proportional %.0f s", seed, same, tune.AvgJCTS, prop.AvgJCTS)
			}
			t.Logf("seed %d same=%v: proportional %.0f s, TUNE %.0f s (%.1f%%, %d retunes)", seed, same, prop.AvgJCTS, tune.AvgJCTS,
				100*(tune.AvgJCTS/prop.AvgJCTS-1), tune.Retunes)
		}
	}
}

// TestHeteroProfilesFollowTheGPU: Gavel's jobs get their models' profiles,
// and with profiles scaled to the GPU type a ResNet-18 job on a K80
// (a tenth to a third of its V100 speed: GPU-bound at its share) is never
// granted more than its 3-core share, while on V100s TUNE gives ResNet-18
// more; with the same profile everywhere, K80 jobs get more too.
func TestHeteroProfilesFollowTheGPU(t *testing.T) {
	for _, same := range []bool{false, true} {
		most := map[string]float64{} // type → most cores per GPU a ResNet-18 job held
		profiled := 0
		heteroRun(t, 0, 3, 40, 4, placement.Tune, same, func(s *simulator) {
			for _, a := range s.prev {
				if len(a.Jobs) != 1 || len(a.Resources) != 1 {
					continue
				}
				js := s.byIDs[a.Jobs[0]]
				if js.tj.Profile != synergy.ForGavelModel(js.tj.Model) || js.tj.Profile == "" {
					t.Fatalf("job %s (%s): profile %q", js.id, js.tj.Model, js.tj.Profile)
				}
				profiled++
				if js.tj.Profile == "res18" && js.tj.Model != "A3C" {
					most[a.Type] = max(most[a.Type], a.Resources[0].Cores/float64(len(a.GPUs)))
				}
			}
		})
		if profiled == 0 || most["v100"] <= synergy.BaseCoresPerGPU || most["k80"] == 0 {
			t.Fatalf("same=%v: %d profiled runs, ResNet-18 at most %v cores per GPU", same, profiled, most)
		}
		if k80 := most["k80"]; same != (k80 > synergy.BaseCoresPerGPU+1e-9) {
			t.Errorf("same=%v: ResNet-18 on a K80 held up to %v cores per GPU", same, k80)
		}
		t.Logf("same=%v: ResNet-18 held at most %v cores per GPU", same, most)
	}
}

package dl2

import "testing"

// TestSupervisedWithinTenPercent: the supervised bootstrap alone (DRF the
// teacher, the defaults of `rondo dl2 train` on shorter traces: 8 training
// traces of 80 jobs, 30 passes) decides within 10% of DRF's average JCT on held-out
// traces (DL2's claim for its supervised stage; docs/dl2.md has the full
// runs).
func TestSupervisedWithinTenPercent(t *testing.T) {
	for _, arch := range []string{ArchPerJob, ArchMLP} {
		t.Run(arch, func(t *testing.T) { supervisedWithinTenPercent(t, arch) })
	}
}

func supervisedWithinTenPercent(t *testing.T, arch string) {
	cfg := TrainConfig{Arch: arch,
		Env:     Env{Servers: Servers(13, 2, 16), SlotS: 1200, Models: Table1(), Noise: 0.1, Seed: 1},
		Teacher: "drf", Window: 40, Hidden: []int{64, 64}, Spare: 4,
		Gen:       GenOptions{Jobs: 80, SlotS: 1200},
		TrainSeed: 100000, ValSeed: 190000, TestSeed: 1, SLTraces: 8, ValTraces: 1, TestTraces: 3, Seed: 1,
		SL: SLOptions{Passes: 30, Batch: 64, LR: 1e-3, Seed: 1},
	}
	_, rep, err := Train(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.SLAvgJCT / rep.TeacherAvgJCT; r > 1.10 {
		t.Fatalf("supervised %.0f s is %.1f%% above DRF's %.0f s", rep.SLAvgJCT, 100*(r-1), rep.TeacherAvgJCT)
	} else {
		t.Logf("supervised %.0f s, DRF %.0f s (%+.1f%%), %d samples", rep.SLAvgJCT, rep.TeacherAvgJCT, 100*(r-1), rep.Samples)
	}
}

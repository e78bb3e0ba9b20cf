package synergy

import (
	"math"
	"testing"
)

// TestCacheFor: each model's dataset and steps per epoch (samples / GPUs /
// per-GPU batch, rounded down), and nil where nothing is known.
func TestCacheFor(t *testing.T) {
	for _, c := range []struct {
		model     string
		gpus      int
		gb, steps float64
	}{
		{"alexnet", 1, 140, 2502},     // 1,281,167 / 512
		{"res18", 4, 140, 625},        // / 2048
		{"shufflenet", 8, 140, 312},   // no 8-GPU profile: the 4-GPU one's batch
		{"gnmt", 1, 8, 27329},         // 3,498,161 / 128
		{"transformer", 2, 1.3, 2100}, // 537,728 / 256
		{"lstm", 1, 1.3, 26886},       // / 20
	} {
		cm := CacheFor(c.model, c.gpus, 0.0625)
		if cm == nil {
			t.Fatalf("%s on %d: nil", c.model, c.gpus)
		}
		if err := cm.Validate(); err != nil {
			t.Fatalf("%s on %d: %v", c.model, c.gpus, err)
		}
		if cm.DatasetGB != c.gb || cm.StepsPerEpoch != c.steps || cm.StorageGBps != 0.0625 {
			t.Errorf("%s on %d: %+v, want %v GB, %v steps, 0.0625 GB/s", c.model, c.gpus, *cm, c.gb, c.steps)
		}
	}
	for _, c := range []struct {
		model string
		gpus  int
		gbps  float64
	}{
		{"m5", 1, 0.0625}, {"deepspeech", 1, 0.0625}, {"vae", 1, 0.0625}, {"bert", 1, 0.0625},
		{"ResNet-18 (batch size 32)", 1, 0.0625}, {"nope", 1, 0.0625},
		{"alexnet", 0, 0.0625}, {"alexnet", 1, 0}, {"alexnet", 1, -1},
		{"alexnet", 1, math.NaN()}, {"alexnet", 1, math.Inf(1)},
	} {
		if cm := CacheFor(c.model, c.gpus, c.gbps); cm != nil {
			t.Errorf("CacheFor(%q, %d, %v) = %+v, want nil", c.model, c.gpus, c.gbps, *cm)
		}
	}
}

// TestCacheForAgainstProfiles: the models' datasets against the embedded
// profiles' memory columns. Language datasets fit in the smallest memory
// column (20.83 GB per GPU): never storage-bound, as their flat profiles.
// ImageNet does not fit in 62.5 GB: alexnet's measured 2.0 there (its
// 125 GB columns reach 2.94) needs storage of about 0.103 GB/s for one GPU,
// between the reference's per-GPU share (500/8 MB/s, which caps it at
// 1.21) and its server's 500 MB/s (which never binds above 62.5 GB).
func TestCacheForAgainstProfiles(t *testing.T) {
	for _, m := range []string{"gnmt", "transformer", "lstm"} {
		for _, g := range []int{1, 2, 4} {
			if b := CacheFor(m, g, 0.0625).bound(MemAxis[0], g); !math.IsInf(b, 1) {
				t.Errorf("%s on %d at %v GB per GPU: storage-bound at %v steps/s", m, g, MemAxis[0], b)
			}
		}
	}
	p, err := Default().Sets["models"].Lookup("alexnet", 1)
	if err != nil {
		t.Fatal(err)
	}
	share := 1 / p.IterTimeS // steps/s at the proportional share
	at := func(gbps, mem float64) float64 { return CacheFor("alexnet", 1, gbps).bound(mem, 1) / share }
	if got := at(0.0625, 62.5); math.Abs(got-1.21) > 0.005 {
		t.Errorf("alexnet at the per-GPU share, 62.5 GB: %.3f× the share, want 1.21", got)
	}
	if got := at(ReferenceServerStorageGBps, 62.5); got < 2.94 {
		t.Errorf("alexnet at the server's storage, 62.5 GB: %.3f×, want above the profile's best 2.94", got)
	}
	if got := at(0.103, 62.5); math.Abs(got-2.0) > 0.01 {
		t.Errorf("alexnet at 0.103 GB/s, 62.5 GB: %.3f×, want the measured 2.0", got)
	}
	if got := at(0.0625, 125); got < 2.94 {
		t.Errorf("alexnet at the per-GPU share, 125 GB: %.3f×, want above its measured 2.94", got)
	}
}

package synergy

import (
	"math"
	"sort"
	"testing"
)

func TestGPURatio(t *testing.T) {
	for _, c := range []struct{ on, ref, want float64 }{
		{7.05, 24.09, 0.293}, {24.09, 24.09, 1}, {2, 1, 2}, {1, 3, 0.333},
		{0, 24, 1}, {5, 0, 1}, {math.NaN(), 1, 1}, {math.Inf(1), 1, 1},
	} {
		if got := GPURatio(c.on, c.ref); got != c.want {
			t.Errorf("GPURatio(%v, %v) = %v, want %v", c.on, c.ref, got, c.want)
		}
	}
}

// TestOnGPU: the cores axis scales by the GPU ratio (hand-computed points
// of res18_1, linear to 9 cores on the V100), the base share stays 1.0,
// the best case and speedup follow, infeasible points stay infeasible, and
// flat profiles stay flat.
func TestOnGPU(t *testing.T) {
	tab := Default()
	r18, _ := tab.Lookup("res18", 1, 3)
	if r18.OnGPU(1) != r18 || r18.OnGPU(0) != r18 || r18.OnGPU(math.NaN()) != r18 {
		t.Error("ratio 1 or invalid: want the profile itself")
	}
	for _, c := range []struct {
		ratio, cores, want, best, speedup float64
	}{
		// A K80 a third as fast: 3 cores are the V100's 9, GPU-bound.
		{1.0 / 3, 3, 1, 3, 1},
		{1.0 / 3, 1, 1 / 2.4, 3, 1},
		{1.0 / 3, 12, 1, 3, 1},
		// Half as fast: 3 cores are the V100's 6 (1.75), 4.5 its 9 (2.4).
		{0.5, 4.5, 2.4 / 1.75, 4.5, 2.4 / 1.75},
		{0.5, 2, 1.3 / 1.75, 4.5, 2.4 / 1.75},
		// Twice as fast: 3 cores are the V100's 1.5 (0.545).
		{2, 6, 1 / 0.545, 18, 2.4 / 0.545},
		// A tenth as fast: GPU-bound from 1 core (the floor: 0.9 cores
		// would do), where it runs as at 10 on the V100 (2.4, as at 3).
		{0.1, 1, 1, 1, 1},
		{0.1, 0.5, 1, 1, 1},
	} {
		q := r18.OnGPU(c.ratio)
		if got := q.Throughput(c.cores, 62.5); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("ratio %v at %v cores: %v, want %v", c.ratio, c.cores, got, c.want)
		}
		if !near(q.Throughput(BaseCoresPerGPU, BaseMemGBPerGPU), 1) || !near(q.CoresPerGPUBest, c.best) || math.Abs(q.Speedup-c.speedup) > 1e-3 {
			t.Errorf("ratio %v: base %v, best %v speedup %v; want 1, %v, %v", c.ratio, q.Throughput(3, 62.5), q.CoresPerGPUBest, q.Speedup, c.best, c.speedup)
		}
		if q.Throughput(3, 20.83) == 0 || q.Throughput(3, 20.83) > q.Throughput(3, 62.5) {
			t.Errorf("ratio %v: memory axis changed: %v at 20.83 GB", c.ratio, q.Throughput(3, 20.83))
		}
		if q.Model != ScaledName("res18", c.ratio) || q.GPUs != 1 || r18.Model != "res18" {
			t.Errorf("ratio %v: model %q gpus %d (original %q)", c.ratio, q.Model, q.GPUs, r18.Model)
		}
	}
	// res18_4 a GPU 1.5 times as fast: its best case stops at the 6 cores
	// per GPU a 24-core server holds for 4 GPUs (the V100's 4: 1.3 over
	// the share's 2: 0.72).
	if q := tab.Sets["models"].Profiles["res18_4"].OnGPU(1.5); q.CoresPerGPUBest != 6 || !near(q.Speedup, 1.3/0.72) {
		t.Errorf("res18_4 at 1.5: best %v speedup %v", q.CoresPerGPUBest, q.Speedup)
	}
	// res18_4 on a 24-core server: above 6 cores per GPU infeasible before
	// and after; half as fast, 3 cores are the V100's 6 (1.75) and 6 read
	// the unknown 12 as the last feasible value, 1.75: GPU-bound from 3.
	r4, _ := tab.Lookup("res18", 4, 3)
	q := r4.OnGPU(0.5)
	if q.Throughput(9, 62.5) != 0 || q.Throughput(7, 62.5) != 0 || !near(q.Throughput(6, 62.5), 1) || !near(q.Throughput(2, 62.5), 1.3/1.75) {
		t.Errorf("res18_4 at 0.5: %v at 9 cores, %v at 7, %v at 6, %v at 2", q.Throughput(9, 62.5), q.Throughput(7, 62.5), q.Throughput(6, 62.5), q.Throughput(2, 62.5))
	}
	// Every profile of every set at a few ratios: well formed, 1.0 at the
	// base share, the original at cores / ratio (relative to the share's),
	// infeasible exactly where the original is; flat ones flat.
	for _, s := range tab.Sets {
		for key, p := range s.Profiles {
			flat := true
			for _, row := range p.Matrix {
				for _, v := range row {
					flat = flat && (v == 0 || v == 1)
				}
			}
			for _, ratio := range []float64{0.1, 0.293, 0.8, 1.5} {
				q := p.OnGPU(ratio)
				if !(q.CoresPerGPUBest > 0) || q.Speedup < 1 || len(q.Matrix) != len(q.CoresAxis) || len(q.Matrix[0]) != len(q.MemAxis) ||
					!sort.Float64sAreSorted(q.CoresAxis) {
					t.Errorf("%s/%s at %v: best %v speedup %v, %dx%d matrix on %dx%d axes", s.Name, key, ratio,
						q.CoresPerGPUBest, q.Speedup, len(q.Matrix), len(q.Matrix[0]), len(q.CoresAxis), len(q.MemAxis))
				}
				if !near(q.Throughput(BaseCoresPerGPU, BaseMemGBPerGPU), 1) {
					t.Errorf("%s/%s at %v: base share %v", s.Name, key, ratio, q.Throughput(3, 62.5))
				}
				base := p.filled().Throughput(BaseCoresPerGPU/ratio, BaseMemGBPerGPU)
				for c := 0.25; c <= 30; c += 0.25 {
					for _, m := range []float64{20.83, 40, 62.5, 100, 187.5, 250} {
						got, orig := q.Throughput(c, m), p.Throughput(c, m)
						if (got == 0) != (orig == 0) {
							t.Errorf("%s/%s at %v: (%v, %v) %v, original %v", s.Name, key, ratio, c, m, got, orig)
						}
						if want := p.filled().Throughput(max(c, 1)/ratio, m) / base; got != 0 && math.Abs(got-want) > 1e-9 {
							t.Errorf("%s/%s at %v: (%v, %v) %v, want %v", s.Name, key, ratio, c, m, got, want)
						}
						if flat && got != 0 && !near(got, 1) {
							t.Errorf("%s/%s at %v: flat profile at (%v, %v) = %v", s.Name, key, ratio, c, m, got)
						}
					}
				}
				// The best case: at least 1 core, the most the profile gives
				// up to the original's best × ratio, no fewer cores would.
				bm := p.MemGBPerGPUBest
				lim := max(p.CoresPerGPUBest*ratio, 1)
				top := q.Throughput(lim, bm)
				for c := 1.0; c <= lim; c += 0.01 {
					top = max(top, q.Throughput(c, bm))
				}
				if q.CoresPerGPUBest < 1 || q.CoresPerGPUBest > lim+1e-9 || math.Abs(q.Throughput(q.CoresPerGPUBest, bm)-top) > 1e-9 ||
					q.CoresPerGPUBest > 1 && q.Throughput(q.CoresPerGPUBest-0.01, bm) >= top-1e-9 {
					t.Errorf("%s/%s at %v: best %v cores (original %v), %v there, most %v", s.Name, key, ratio, q.CoresPerGPUBest,
						p.CoresPerGPUBest, q.Throughput(q.CoresPerGPUBest, bm), top)
				}
				if share := q.Throughput(p.ShareCoresPerGPU, p.ShareMemGBPerGPU); math.Abs(q.Speedup-max(1, top/share)) > 1e-9 {
					t.Errorf("%s/%s at %v: speedup %v, want %v", s.Name, key, ratio, q.Speedup, max(1, top/share))
				}
				if flat && (q.CoresPerGPUBest != 1 || q.Speedup != 1) {
					t.Errorf("%s/%s at %v: flat profile: best %v, speedup %v", s.Name, key, ratio, q.CoresPerGPUBest, q.Speedup)
				}
			}
		}
	}
}

// TestAddOnGPU: scaled profiles go to a clone, looked up by their name and
// the job's GPUs (or an explicit key); the embedded table is untouched.
func TestAddOnGPU(t *testing.T) {
	tab := Default().Clone()
	name := tab.AddOnGPU("res18", 0.5)
	if name != "res18@0.5" {
		t.Fatalf("name %q", name)
	}
	for _, g := range []int{1, 2, 4, 8} {
		p, err := tab.Lookup(name, g, 3)
		if err != nil {
			t.Errorf("%s at %d GPUs: %v", name, g, err)
			continue
		}
		orig, _ := Default().Lookup("res18", g, 3)
		if p.GPUs != min(g, 4) || p.Model != name || !near(p.CoresPerGPUBest, orig.CoresPerGPUBest*0.5) {
			t.Errorf("%s at %d GPUs: %v %v", name, g, p, err)
		}
	}
	if _, err := Default().Lookup(name, 1, 3); err == nil {
		t.Error("the embedded table learned a scaled profile")
	}
	if k := tab.AddOnGPU("res18_2", 0.25); k != "res18@0.25_2" {
		t.Errorf("explicit key: %q", k)
	} else if p, err := tab.Lookup(k, 1, 3); err != nil || p.GPUs != 2 {
		t.Errorf("%s: %v %v", k, p, err)
	}
	if tab.AddOnGPU("res18", 1) != "res18" || tab.AddOnGPU("nosuch", 0.5) != "nosuch" {
		t.Error("ratio 1 or an unknown name: want the name itself")
	}
	n := len(tab.Sets["models"].Profiles)
	tab.AddOnGPU("res18", 0.5)
	if len(tab.Sets["models"].Profiles) != n {
		t.Error("adding twice grew the set")
	}
}

package synergy

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func profile(t *testing.T, set, key string) *Profile {
	t.Helper()
	p := Default().Sets[set].Profiles[key]
	if p == nil {
		t.Fatalf("%s/%s missing", set, key)
	}
	return p
}

func TestThroughputKnownValues(t *testing.T) {
	a := profile(t, "models", "alexnet_1")
	m5 := profile(t, "models", "m5_1")
	for _, c := range []struct {
		p          *Profile
		cores, mem float64
		want       float64
	}{
		{a, 12, 125, 2.94},   // best-case demand
		{a, 3, 62.5, 1.0},    // proportional share
		{a, 9, 125, 2.0},     // grid point
		{a, 12, 62.5, 2.0},   // memory-bound below 125 GB
		{a, 3, 20.83, 0.1},   // the smallest memory column: slow, not infeasible
		{a, 3, 10, 0.1},      // below the memory axis: clamped to 20.83
		{a, 0.5, 62.5, 0.3},  // below the cores axis: clamped to 1
		{a, 48, 500, 2.94},   // above both axes: clamped
		{a, 2.5, 62.5, 0.83}, // (0.66 + 1.0) / 2
		// Hand-computed midpoint between 9/12 cores and 62.5/125 GB:
		// (2.0 + 2.0 + 2.0 + 2.94) / 4.
		{a, 10.5, 93.75, 2.235},
		// A quarter of the way from 9 to 12 cores at 125 GB: 2.0 + 0.25 * 0.94.
		{a, 9.75, 125, 2.235},
		// m5 needs memory: 6 cores, halfway between 125 (2.0) and 187.5 GB (2.5).
		{m5, 6, 156.25, 2.25},
		{m5, 6, 187.5, 2.5},
	} {
		if got := c.p.Throughput(c.cores, c.mem); !near(got, c.want) {
			t.Errorf("%s at %v cores, %v GB: %v, want %v", c.p.Key(), c.cores, c.mem, got, c.want)
		}
	}
}

// TestThroughputInfeasible: in res18_2 24 and 12 cores per GPU are 0.0
// (infeasible for two GPUs on a 24-core server); nothing between 9 and 12
// cores may come out plausible, and clamping above 24 stays infeasible.
func TestThroughputInfeasible(t *testing.T) {
	p := profile(t, "models", "res18_2")
	for _, c := range []struct{ cores, mem, want float64 }{
		{9, 62.5, 2.4},   // last feasible row, exactly
		{9, 250, 2.4},    // memory above the 4 columns: clamped to 187.5
		{9.01, 62.5, 0},  // any weight on the infeasible row
		{10.5, 93.75, 0}, // midpoint next to infeasible points
		{12, 62.5, 0},    // infeasible grid point
		{24, 187.5, 0},   // infeasible grid point
		{30, 62.5, 0},    // clamped to the infeasible last row
		{math.NaN(), 62.5, 0},
	} {
		if got := p.Throughput(c.cores, c.mem); !near(got, c.want) {
			t.Errorf("res18_2 at %v cores, %v GB: %v, want %v", c.cores, c.mem, got, c.want)
		}
	}
	q := profile(t, "models", "alexnet_4")
	if got := q.Throughput(6, 62.5); got != 1.75 {
		t.Errorf("alexnet_4 at 6 cores: %v, want 1.75", got)
	}
	if got := q.Throughput(7, 62.5); got != 0 {
		t.Errorf("alexnet_4 at 7 cores (towards infeasible 9): %v, want 0", got)
	}
}

// TestLanguageModelsFlat: gnmt, transformer, lstm, bert run at 1.0 wherever
// feasible, in every set and at every size, on and off the grid.
func TestLanguageModelsFlat(t *testing.T) {
	n := 0
	for sn, s := range Default().Sets {
		for key, p := range s.Profiles {
			switch p.Model {
			case "gnmt", "transformer", "lstm", "bert":
			default:
				continue
			}
			n++
			for _, c := range []float64{0.5, 1, 1.5, 3, 4.5, 6, 10, 12, 24, 30} {
				for _, m := range []float64{10, 20.83, 40, 62.5, 100, 187.5, 250} {
					if got := p.Throughput(c, m); got != 0 && !near(got, 1) {
						t.Errorf("%s/%s at %v cores, %v GB: %v, want 1 (or 0 infeasible)", sn, key, c, m, got)
					}
				}
			}
			if got := p.Throughput(1, 20.83); !near(got, 1) {
				t.Errorf("%s/%s at 1 core: %v, want 1", sn, key, got)
			}
		}
	}
	// models: gnmt, transformer, lstm at 1, 2, 4 GPUs and bert_1; the others: 4 each.
	if n != 10+3*4 {
		t.Errorf("language profiles: %d, want 22", n)
	}
}

func TestFlat(t *testing.T) {
	f := Flat()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.CoresPerGPUBest != 1 || f.MemGBPerGPUBest != 62.5 || f.Speedup != 1 {
		t.Errorf("flat best: %v cores %v GB speedup %v", f.CoresPerGPUBest, f.MemGBPerGPUBest, f.Speedup)
	}
	for _, c := range [][2]float64{{1, 62.5}, {0.25, 5}, {3, 62.5}, {7, 100}, {24, 250}, {100, 1000}} {
		if got := f.Throughput(c[0], c[1]); got != 1 {
			t.Errorf("flat at %v: %v, want 1", c, got)
		}
	}
}

// TestTwoPointModel: a profile with a null matrix, best 9 cores and 125 GB at
// speedup 2, in a set with the base share (3 cores, 62.5 GB).
func TestTwoPointModel(t *testing.T) {
	tab, err := Parse([]byte(`{"ops":{"x_1":{"model":"x","gpus":1,"cpus_per_gpu_best":9,
		"mem_gb_per_gpu_best":125,"speedup_over_proportional":2,"throughput_matrix":null}}}`), "ops.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := tab.Lookup("x", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cores, mem, want float64 }{
		{3, 62.5, 1},     // share
		{9, 125, 2},      // best
		{24, 250, 2},     // beyond best: no further gain
		{6, 125, 1.5},    // halfway in cores, memory at best
		{6, 93.75, 1.5},  // halfway in both
		{9, 93.75, 1.5},  // the lagging resource decides
		{9, 62.5, 1},     // memory still at the share
		{1.5, 62.5, 0.5}, // half the share's cores: proportional slowdown
		{3, 31.25, 0.5},  // half the share's memory
	} {
		if got := p.Throughput(c.cores, c.mem); !near(got, c.want) {
			t.Errorf("two-point at %v cores, %v GB: %v, want %v", c.cores, c.mem, got, c.want)
		}
	}
	// A job whose best is below the share (1 core, 20 GB) is not slowed at it.
	tab, _ = Parse([]byte(`{"ops":{"y_1":{"model":"y","gpus":1,"cpus_per_gpu_best":1,
		"mem_gb_per_gpu_best":20,"speedup_over_proportional":1,"throughput_matrix":null}}}`), "ops.json")
	q := tab.Sets["ops"].Profiles["y_1"]
	if got := q.Throughput(1, 20); got != 1 {
		t.Errorf("best below share: %v, want 1", got)
	}
	if got := q.Throughput(0.5, 20); got != 0.5 {
		t.Errorf("half the best: %v, want 0.5", got)
	}
}

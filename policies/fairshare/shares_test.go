package fairshare

import (
	"math"
	"testing"
)

func jobs(n, gpus int, types ...string) []Job {
	var out []Job
	for i := 0; i < n; i++ {
		out = append(out, Job{GPUs: gpus, Types: types})
	}
	return out
}

// The paper's example: 8 GPUs, A and B with two 2-GPU jobs each, C with one.
func TestComputePaperExample(t *testing.T) {
	s := Compute(map[string]float64{"v100": 8}, []User{
		{Name: "A", Tickets: 100, Jobs: jobs(2, 2, "v100")},
		{Name: "B", Tickets: 100, Jobs: jobs(2, 2, "v100")},
		{Name: "C", Tickets: 100, Jobs: jobs(1, 2, "v100")},
	})
	for u, want := range map[string]float64{"A": 3, "B": 3, "C": 2} {
		if got := s.Total(u); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v GPUs, want %v", u, got, want)
		}
	}
}

// Two generations: uncapped users get the same mix; a capped user's excess
// and GPUs only some can use go to the others; nothing idles.
func TestComputeGenerations(t *testing.T) {
	capa := map[string]float64{"v100": 4, "k80": 12}
	s := Compute(capa, []User{
		{Name: "a", Tickets: 200, Jobs: jobs(16, 1, "v100", "k80")},
		{Name: "b", Tickets: 100, Jobs: jobs(16, 1, "v100", "k80")},
		{Name: "c", Tickets: 100, Jobs: jobs(1, 2, "v100", "k80")},
		{Name: "d", Tickets: 100, Jobs: jobs(4, 1, "k80")},
	})
	for _, ty := range []string{"v100", "k80"} {
		sum := 0.0
		for u := range s {
			sum += s[u][ty]
		}
		if math.Abs(sum-capa[ty]) > 1e-9 {
			t.Errorf("%s: %v of %v GPUs given", ty, sum, capa[ty])
		}
	}
	if got := s.Total("c"); math.Abs(got-2) > 1e-9 {
		t.Errorf("c: %v, want its demand 2", got)
	}
	if s["d"]["v100"] != 0 {
		t.Errorf("d got v100 it cannot use")
	}
	if r := s.Total("a") / s.Total("b"); math.Abs(r-2) > 0.01 {
		t.Errorf("a/b = %v, want the ticket ratio 2", r)
	}
}

func TestWaterFill(t *testing.T) {
	got := WaterFill(10, []float64{1, 100, 100, 0}, []float64{1, 1, 2, 1})
	want := []float64{1, 3, 6, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

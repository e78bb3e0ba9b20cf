package trace

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/synergy"
)

// TestSynergyGenMatchesReference: the generator writes, byte for byte, the
// jobs the reference simulator's own synthetic workload draws (testdata
// written by scripts/synergy-reference.py --generate; README.md says how).
func TestSynergyGenMatchesReference(t *testing.T) {
	for _, c := range []struct {
		file  string
		o     SynergyOptions
		n     int
		split string
	}{
		{"synergy_gen_r9_s42.csv", SynergyOptions{Seed: 42, Rate: 9, MultiGPU: true}, 400, ""},
		{"synergy_gen_r4_s7_33-33-33.csv", SynergyOptions{Seed: 7, Rate: 4, MultiGPU: true}, 200, "33/33/33"},
		{"synergy_gen_r6_s1_50-0-50.csv", SynergyOptions{Seed: 1, Rate: 6, MultiGPU: true}, 200, "50,0,50"},
	} {
		if c.split != "" {
			var err error
			if c.o.Split, err = ParseSynergySplit(c.split); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := GenerateSynergy(c.o, c.n)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteSynergy(&got, jobs); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile("testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		if len(gl) != len(wl) {
			t.Errorf("%s: %d lines, want %d", c.file, len(gl), len(wl))
		}
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Errorf("%s line %d: %q, reference %q", c.file, i+1, gl[i], wl[i])
				break
			}
		}
		// The written trace reads back as the same jobs.
		back, err := ReadSynergy(&got, synergy.Default())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, jobs) {
			t.Errorf("%s: WriteSynergy then ReadSynergy changed the jobs", c.file)
		}
	}
}

func TestSynergyGenDeterministic(t *testing.T) {
	a, _ := GenerateSynergy(SynergyOptions{Seed: 3, Rate: 5}, 500)
	b, _ := GenerateSynergy(SynergyOptions{Seed: 3, Rate: 5}, 500)
	c, _ := GenerateSynergy(SynergyOptions{Seed: 4, Rate: 5}, 500)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different traces")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 3 and 4 gave the same trace")
	}
	// Static: the same jobs as any rate's trace of the seed, all at t = 0.
	s, err := GenerateSynergy(SynergyOptions{Seed: 3}, 500)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s {
		if s[i].ArrivalS != 0 {
			t.Fatalf("static job %d arrives at %v", i, s[i].ArrivalS)
		}
		s[i].ArrivalS = a[i].ArrivalS
	}
	if !reflect.DeepEqual(a, s) {
		t.Error("static trace's jobs differ from the continuous trace's")
	}
	// Single-GPU: the same jobs on one GPU each.
	m, _ := GenerateSynergy(SynergyOptions{Seed: 3, Rate: 5, MultiGPU: true}, 500)
	multi := 0
	for i := range m {
		if m[i].ScaleFactor > 1 {
			multi++
		}
		m[i].ScaleFactor = 1
	}
	if multi == 0 || !reflect.DeepEqual(a, m) {
		t.Errorf("multi-GPU trace (%d multi-GPU jobs) is not the single-GPU one with more GPUs", multi)
	}
}

// TestSynergyGenStatistics: over many jobs the classes follow the split,
// models take turns within a class, and durations, GPU counts and
// arrivals have the distributions the generator draws from.
func TestSynergyGenStatistics(t *testing.T) {
	const n = 20000
	for _, split := range [][3]float64{{20, 70, 10}, {33, 33, 33}, {50, 0, 50}} {
		rate := 9.0
		jobs, err := GenerateSynergy(SynergyOptions{Seed: 11, Rate: rate, Split: split, MultiGPU: true}, n)
		if err != nil {
			t.Fatal(err)
		}
		cls := map[string]int{}
		for i, c := range SynergyClasses {
			for _, m := range c.Models {
				cls[m] = i
			}
		}
		var perCls [3]int
		perModel := map[string]int{}
		gpus := map[int]int{}
		long := 0
		var expShort, expLong []float64
		prev := 0.0
		for i, j := range jobs {
			c, ok := cls[j.Model]
			if !ok || j.Profile != j.Model || j.ID != i || j.Priority != 1 {
				t.Fatalf("job %d: %+v", i, j)
			}
			perCls[c]++
			perModel[j.Model]++
			gpus[j.ScaleFactor]++
			it := 1 / j.StepsPerS[SynergyType]
			if j.TotalSteps != math.Trunc(j.TotalSteps) || math.Abs(j.DurationS-j.TotalSteps*it) > 1e-6*j.DurationS {
				t.Fatalf("job %d: %v steps, %v s", i, j.TotalSteps, j.DurationS)
			}
			// The drawn duration is DurationS plus less than one iteration.
			lo, hi := 60*math.Pow(10, 1.5)-it, 60*math.Pow(10, 4)
			if j.DurationS < lo || j.DurationS > hi {
				t.Fatalf("job %d: duration %v outside [%v, %v]", i, j.DurationS, lo, hi)
			}
			e := math.Log10((j.DurationS + it/2) / 60)
			if e >= 3 {
				long++
				expLong = append(expLong, e)
			} else {
				expShort = append(expShort, e)
			}
			if j.ArrivalS != math.Trunc(j.ArrivalS) || j.ArrivalS < prev {
				t.Fatalf("job %d arrives at %v after %v", i, j.ArrivalS, prev)
			}
			prev = j.ArrivalS
		}
		sum := split[0] + split[1] + split[2]
		for c := range 3 {
			if got, want := float64(perCls[c])/n, split[c]/sum; math.Abs(got-want) > 0.005 {
				t.Errorf("split %v: %s %.4f of jobs, want %.4f", split, SynergyClasses[c].Name, got, want)
			}
			for _, m := range SynergyClasses[c].Models {
				if d := perModel[m] - perCls[c]/len(SynergyClasses[c].Models); d < 0 || d > 1 {
					t.Errorf("split %v: %s %d jobs of %d %s", split, m, perModel[m], perCls[c], SynergyClasses[c].Name)
				}
			}
		}
		// The duration's long branch has probability 0.2 (an exponent ≥ 3
		// from the short branch has probability 0). Exponents are uniform:
		// mean 2.25 (short) and 3.5 (long).
		if f := float64(long) / n; math.Abs(f-0.2) > 0.012 {
			t.Errorf("split %v: %.4f long jobs, want 0.2", split, f)
		}
		if m := mean(expShort); math.Abs(m-2.25) > 0.015 {
			t.Errorf("split %v: short exponent mean %.4f, want 2.25", split, m)
		}
		if m := mean(expLong); math.Abs(m-3.5) > 0.02 {
			t.Errorf("split %v: long exponent mean %.4f, want 3.5", split, m)
		}
		for g, p := range map[int]float64{1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05} {
			if f := float64(gpus[g]) / n; math.Abs(f-p) > 0.012 {
				t.Errorf("split %v: %.4f of jobs on %d GPUs, want %.2f", split, f, g, p)
			}
		}
		if len(gpus) != 4 {
			t.Errorf("split %v: GPU counts %v", split, gpus)
		}
		// Poisson arrivals, each gap rounded up to a whole second: mean gap
		// 3600/rate + about 0.5 s.
		if gap := jobs[n-1].ArrivalS / (n - 1); math.Abs(gap/(3600/rate+0.5)-1) > 0.03 {
			t.Errorf("split %v: mean gap %.1f s, want %.1f", split, gap, 3600/rate+0.5)
		}
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func TestSynergyGenErrors(t *testing.T) {
	for _, c := range []struct {
		o    SynergyOptions
		want string
	}{
		{SynergyOptions{Rate: -1}, "rate must be a non-negative number"},
		{SynergyOptions{Rate: math.NaN()}, "rate must be a non-negative number"},
		{SynergyOptions{Rate: math.Inf(1)}, "rate must be a non-negative number"},
		{SynergyOptions{Rate: 1, Split: [3]float64{-1, 50, 50}}, "class split: image -1: want a percent ≥ 0"},
		{SynergyOptions{Rate: 1, Split: [3]float64{10, math.NaN(), 50}}, "class split: language NaN"},
		{SynergyOptions{Rate: 1, Split: [3]float64{60, 30, 30}}, "class split 60/30/30: want percents summing to more than 0 and at most 100"},
	} {
		_, err := NewSynergyGenerator(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
	// A table without one of the zoo's models.
	tb, err := synergy.Parse([]byte(`{"models": {}}`), "empty.json")
	if err == nil {
		if _, err := NewSynergyGenerator(SynergyOptions{Rate: 1, Profiles: tb}); err == nil || !strings.Contains(err.Error(), "model alexnet") {
			t.Errorf("empty table: error %v, want one naming model alexnet", err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"20/70", "want IMAGE/LANGUAGE/SPEECH percents"},
		{"20/70/10/0", "want IMAGE/LANGUAGE/SPEECH percents"},
		{"20/x/10", `language "x": want a percent ≥ 0`},
		{"20/70/-10", `speech "-10"`},
		{"0/0/0", "summing to more than 0"},
		{"50/50/50", "at most 100"},
	} {
		if _, err := ParseSynergySplit(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
	if s, err := ParseSynergySplit(" 33 / 33 / 33 "); err != nil || s != [3]float64{33, 33, 33} {
		t.Errorf("33/33/33: %v %v", s, err)
	}
}

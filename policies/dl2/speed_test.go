package dl2

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// The paper's §2.2 facts: decreasing returns with k PSs and k workers.
func TestSpeedDecreasingReturns(t *testing.T) {
	ms := Table1()
	for _, name := range []string{"resnet-50", "vgg-16", "seq2seq"} {
		m := ms[name]
		for k := 1; k < 8; k++ {
			s, s1 := m.EpochsPerS(k, k), m.EpochsPerS(k+1, k+1)
			if !(s1 > s) {
				t.Errorf("%s: speed(%d,%d) = %g not above speed(%d,%d) = %g", name, k+1, k+1, s1, k, k, s)
			}
			if !(s1/float64(k+1) < s/float64(k)) {
				t.Errorf("%s: speed/k does not fall from k = %d to %d", name, k, k+1)
			}
		}
	}
}

// With 12 tasks, seq2seq is fastest at 4:8 and vgg-16 at 6:6 (of 4:8,
// 6:6, 8:4), and every model's best split is the documented one.
func TestSpeedRatios(t *testing.T) {
	ms := Table1()
	fastest := func(m SpeedModel) string {
		best, at := 0.0, ""
		for _, pw := range [][2]int{{4, 8}, {6, 6}, {8, 4}} {
			if v := m.EpochsPerS(pw[0], pw[1]); v > best {
				best, at = v, fmt.Sprintf("%d:%d", pw[0], pw[1])
			}
		}
		return at
	}
	if got := fastest(ms["seq2seq"]); got != "4:8" {
		t.Errorf("seq2seq fastest at %s, want 4:8", got)
	}
	if got := fastest(ms["vgg-16"]); got != "6:6" {
		t.Errorf("vgg-16 fastest at %s, want 6:6", got)
	}
	// Table1's comment and README.md.
	want := map[string]string{
		"resnet-50": "5:7", "vgg-16": "6:6", "resnext-110": "3:9", "inception-bn": "5:7",
		"seq2seq": "4:8", "ctc": "4:8", "dssm": "7:5", "wlm": "6:6",
	}
	if len(ms) != 8 {
		t.Fatalf("Table1 has %d models", len(ms))
	}
	for name, m := range ms {
		p, w := m.BestSplit(12)
		if got := fmt.Sprintf("%d:%d", p, w); got != want[name] {
			t.Errorf("%s: best split at 12 = %s, want %s", name, got, want[name])
		}
		// Strictly best: the neighbours are slower.
		if !(m.EpochsPerS(p-1, w+1) < m.EpochsPerS(p, w) && m.EpochsPerS(p+1, w-1) < m.EpochsPerS(p, w)) {
			t.Errorf("%s: %d:%d not strictly best", name, p, w)
		}
		if m.Name != name {
			t.Errorf("model %q named %q", name, m.Name)
		}
		t11 := m.EpochTimeS(1, 1)
		if t11 < 120 || t11 > 1200 {
			t.Errorf("%s: epoch at (1,1) takes %g s, want 2-20 min", name, t11)
		}
		d := m.Demand
		if d.WorkerGPUs < 1 || d.WorkerGPUs > 2 || d.WorkerCPUs < 1 || d.WorkerCPUs > 4 || d.PSCPUs < 1 || d.PSCPUs > 4 {
			t.Errorf("%s: demand %+v outside §6.2's", name, d)
		}
		if m.Batch < 8 {
			t.Errorf("%s: batch %d < 8 workers", name, m.Batch)
		}
		for _, c := range []float64{m.A, m.B, m.C, m.D, m.E} {
			if c < 0 {
				t.Errorf("%s: negative coefficient", name)
			}
		}
	}
}

func TestSpeedFunc(t *testing.T) {
	ms := Table1()
	f := ms.Speed()
	j := Job{Model: "vgg-16"}
	if got, want := f(&j, 2, 3), ms["vgg-16"].EpochsPerS(2, 3); got != want || got <= 0 {
		t.Errorf("speed = %g, want %g", got, want)
	}
	if f(&j, 0, 3) != 0 || f(&j, 2, 0) != 0 {
		t.Error("speed with no PS or no worker is not 0")
	}
	if f(&Job{Model: "nope"}, 1, 1) != 0 {
		t.Error("unknown model has a speed")
	}
}

func TestNoise(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	if Noise(rng, 0) != 1 {
		t.Error("sigma 0 is not 1")
	}
	var sum float64
	const n = 20000
	for i := 0; i < n; i++ {
		f := Noise(rng, 0.2)
		if f < 0.5 || f > 1.5 {
			t.Fatalf("factor %g outside [0.5, 1.5]", f)
		}
		sum += f
	}
	if mean := sum / n; math.Abs(mean-1) > 0.01 {
		t.Errorf("mean factor %g, want 1", mean)
	}
}

// A CSV of Table1's own speeds at a grid is refitted within 1%.
func TestReadSpeedCSVRefit(t *testing.T) {
	base := Table1()
	var sb strings.Builder
	sb.WriteString(SpeedCSVHeader + "\n# measured\n\n")
	for _, name := range base.Names() {
		m := base[name]
		for _, p := range []int{1, 2, 4, 8} {
			for _, w := range []int{1, 2, 3, 5, 8} {
				fmt.Fprintf(&sb, "%s, %d, %d, %.6g\n", name, p, w, 3600*m.EpochsPerS(p, w))
			}
		}
	}
	// A new model, measured at a few points.
	sb.WriteString("mine,1,1,10\nmine,1,2,18\nmine,2,2,19\nmine,2,4,30\nmine,4,4,31\n")
	got, err := ReadSpeedCSV("speeds.csv", strings.NewReader(sb.String()), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(base)+1 {
		t.Errorf("%d models, want %d", len(got), len(base)+1)
	}
	for _, name := range base.Names() {
		m, f := base[name], got[name]
		if f.Batch != m.Batch || f.Demand != m.Demand || f.Name != name {
			t.Errorf("%s: batch/demand/name not kept: %+v", name, f)
		}
		for p := 1; p <= 8; p++ {
			for w := 1; w <= 8; w++ {
				if r := f.EpochsPerS(p, w) / m.EpochsPerS(p, w); math.Abs(r-1) > 0.01 {
					t.Errorf("%s (%d,%d): refitted speed off by %.2f%%", name, p, w, 100*(r-1))
				}
			}
		}
	}
	mine := got["mine"]
	if mine.Batch != 256 || mine.Demand != (Demand{WorkerGPUs: 1, WorkerCPUs: 2, PSCPUs: 2}) {
		t.Errorf("new model's defaults: %+v", mine)
	}
	for _, c := range []float64{mine.A, mine.B, mine.C, mine.D, mine.E} {
		if c < 0 {
			t.Errorf("negative coefficient: %+v", mine)
		}
	}
	if r := 3600 * mine.EpochsPerS(1, 1) / 10; math.Abs(r-1) > 0.15 {
		t.Errorf("mine at (1,1): %g epochs/h, measured 10", 3600*mine.EpochsPerS(1, 1))
	}
	if base["vgg-16"].A != Table1()["vgg-16"].A {
		t.Error("base changed")
	}
}

func TestReadSpeedCSVErrors(t *testing.T) {
	const h = SpeedCSVHeader + "\n"
	cases := []struct{ in, want string }{
		{"", `speeds.csv:1: header: want "model,ps,workers,epochs_per_hour", got nothing`},
		{"model,ps,workers\n", `speeds.csv:1: header: want "model,ps,workers,epochs_per_hour", got "model,ps,workers"`},
		{"vgg-16,1,1,3\n", `speeds.csv:1: header:`},
		{h + "vgg-16,1,1\n", `speeds.csv:2: want 4 fields (model,ps,workers,epochs_per_hour), got 3`},
		{h + "vgg-16,1,1,3,4\n", `speeds.csv:2: want 4 fields`},
		{h + "vgg-16,1,1,3\nvgg-16,x,1,3\n", `speeds.csv:3: ps: not a positive integer "x"`},
		{h + "vgg-16,0,1,3\n", `speeds.csv:2: ps: not a positive integer "0"`},
		{h + "#c\nvgg-16,1,-2,3\n", `speeds.csv:3: workers: not a positive integer "-2"`},
		{h + "vgg-16,1,1.5,3\n", `speeds.csv:2: workers: not a positive integer "1.5"`},
		{h + "vgg-16,1,1,0\n", `speeds.csv:2: epochs_per_hour: not a positive number "0"`},
		{h + "vgg-16,1,1,fast\n", `speeds.csv:2: epochs_per_hour: not a positive number "fast"`},
		{h + "vgg-16,1,1,NaN\n", `speeds.csv:2: epochs_per_hour: not a positive number "NaN"`},
		{h + "vgg-16,1,1,+Inf\n", `speeds.csv:2: epochs_per_hour: not a positive number "+Inf"`},
		{h + " ,1,1,3\n", `speeds.csv:2: model: empty`},
	}
	for _, c := range cases {
		_, err := ReadSpeedCSV("speeds.csv", strings.NewReader(c.in), Table1())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

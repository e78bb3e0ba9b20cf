package dl2

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestParseTrace(t *testing.T) {
	in := "# a trace\n" + TraceHeader + "\n\n" +
		"b, vgg-16, 30, 10\n" +
		"a,ctc,0,2.5\n" +
		"# comment\n" +
		"c,wlm,30,1e2\n"
	got, err := ParseTrace("t.csv", strings.NewReader(in), Table1())
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceJob{{"a", "ctc", 0, 2.5}, {"b", "vgg-16", 30, 10}, {"c", "wlm", 30, 100}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// No header, any model when models is empty.
	got, err = ParseTrace("t.csv", strings.NewReader("x,mine,1,1\n"), nil)
	if err != nil || len(got) != 1 || got[0].Model != "mine" {
		t.Errorf("no header: %+v, %v", got, err)
	}
}

func TestParseTraceErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a,ctc,0,1\nb,ctc,0,1\nc,ctc,0,1\nd,ctc,0,-3\n", `t.csv:4: epochs: must be > 0, got "-3"`},
		{"#\na,resnet50,0,1\n", `t.csv:2: model: unknown model "resnet50" (known: ctc, dssm, inception-bn, resnet-50, resnext-110, seq2seq, vgg-16, wlm)`},
		{"a,ctc,0\n", `t.csv:1: want 4 fields (id,model,arrival_s,epochs), got 3`},
		{"a,ctc,0,1,2\n", `t.csv:1: want 4 fields (id,model,arrival_s,epochs), got 5`},
		{"id,model,arrival,epochs\n", `t.csv:1: header: want "id,model,arrival_s,epochs", got "id,model,arrival,epochs"`},
		{" ,ctc,0,1\n", `t.csv:1: id: empty`},
		{"a,ctc,0,1\n\na,wlm,1,1\n", `t.csv:3: id: duplicate "a" (first on line 1)`},
		{"a,,0,1\n", `t.csv:1: model: empty`},
		{"a,ctc,soon,1\n", `t.csv:1: arrival_s: not a number "soon"`},
		{"a,ctc,-1,1\n", `t.csv:1: arrival_s: must be >= 0, got "-1"`},
		{"a,ctc,NaN,1\n", `t.csv:1: arrival_s: must be finite, got "NaN"`},
		{"a,ctc,1e999,1\n", `t.csv:1: arrival_s: must be finite, got "1e999"`},
		{"a,ctc,0,many\n", `t.csv:1: epochs: not a number "many"`},
		{"a,ctc,0,0\n", `t.csv:1: epochs: must be > 0, got "0"`},
		{"a,ctc,0,NaN\n", `t.csv:1: epochs: must be finite, got "NaN"`},
		{"a,ctc,0,+Inf\n", `t.csv:1: epochs: must be finite, got "+Inf"`},
		{"a,ctc,0,1e-999\n", `t.csv:1: epochs: must be > 0, got "1e-999"`},
	}
	for _, c := range cases {
		_, err := ParseTrace("t.csv", strings.NewReader(c.in), Table1())
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

func TestTraceRoundTrip(t *testing.T) {
	jobs := Generate(GenOptions{Jobs: 50, Seed: 3}, nil)
	jobs = append(jobs, TraceJob{"odd", "ctc", 0.1 + 0.2, 1.0 / 3}, TraceJob{"big", "wlm", 1e7 / 3, 12345.678901234567})
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalS < jobs[b].ArrivalS })
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := ParseTrace("rt.csv", &buf, Table1())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, jobs) {
		t.Error("round trip changed the trace")
	}
	for _, bad := range []TraceJob{{"a,b", "ctc", 0, 1}, {"", "ctc", 0, 1}, {"#a", "ctc", 0, 1}, {"a", " ctc", 0, 1}, {"a\nb", "ctc", 0, 1}} {
		if err := WriteTrace(&bytes.Buffer{}, []TraceJob{bad}); err == nil {
			t.Errorf("%q written", bad.ID+"/"+bad.Model)
		}
	}
}

func TestJobFor(t *testing.T) {
	ms := Table1()
	j := ms.JobFor(TraceJob{"x", "vgg-16", 5, 40})
	want := Job{ID: "x", Model: "vgg-16", ArrivalS: 5, Epochs: 40, Batch: 256,
		Bounds: Bounds{MinWorkers: 1, MaxWorkers: 8, MinPS: 1, MaxPS: 8}, Demand: ms["vgg-16"].Demand}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("got %+v, want %+v", j, want)
	}
	ms["tiny"] = SpeedModel{Name: "tiny", A: 100, Batch: 4, Demand: Demand{WorkerGPUs: 1, WorkerCPUs: 1, PSCPUs: 1}}
	if j := ms.JobFor(TraceJob{"y", "tiny", 0, 1}); j.Bounds.MaxWorkers != 4 || j.Batch != 4 {
		t.Errorf("batch 4: %+v", j)
	}
	for _, m := range Table1() {
		if j := ms.JobFor(TraceJob{"z", m.Name, 0, 1}); j.Batch < j.Bounds.MaxWorkers {
			t.Errorf("%s: batch %d < %d workers", m.Name, j.Batch, j.Bounds.MaxWorkers)
		}
	}
}

func TestGenerate(t *testing.T) {
	ms := Table1()
	a := Generate(GenOptions{Seed: 5}, ms)
	b := Generate(GenOptions{Seed: 5}, ms)
	c := Generate(GenOptions{Seed: 6}, ms)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different traces")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("different seeds, same trace")
	}
	if len(a) != 200 {
		t.Errorf("%d jobs, want the default 200", len(a))
	}
	used := map[string]int{}
	for i, j := range a {
		if want := fmt.Sprintf("j%04d", i); j.ID != want {
			t.Errorf("job %d: id %s, want %s", i, j.ID, want)
		}
		if i > 0 && j.ArrivalS < a[i-1].ArrivalS {
			t.Errorf("job %d arrives before job %d", i, i-1)
		}
		if j.Epochs < 1 || j.Epochs != math.Round(j.Epochs) || j.ArrivalS != math.Round(j.ArrivalS) {
			t.Errorf("job %+v: epochs or arrival not whole", j)
		}
		// Runtime at (1,1) within [20 min, 3 days], up to the rounding.
		t11 := ms[j.Model].EpochTimeS(1, 1)
		if r := j.Epochs * t11; r > 3*86400+t11/2 || (j.Epochs > 1 && r < 1200-t11/2) {
			t.Errorf("job %+v runs %g s at (1,1)", j, r)
		}
		used[j.Model]++
	}
	if len(used) != 8 {
		t.Errorf("models used: %v", used)
	}
	only := Generate(GenOptions{Jobs: 30, Seed: 1, Models: []string{"ctc", "dssm"}}, ms)
	for _, j := range only {
		if j.Model != "ctc" && j.Model != "dssm" {
			t.Errorf("model %s not asked for", j.Model)
		}
	}
}

// The arrival rate follows the diurnal sinusoid: the half day where
// sin > 0 gets (1+1/π)/(1-1/π) ≈ 1.93 times the arrivals of the other.
func TestGenerateDiurnal(t *testing.T) {
	jobs := Generate(GenOptions{Jobs: 6000, Seed: 2, JobsPerSlot: 3}, nil)
	var hi, lo int
	for _, j := range jobs {
		if math.Sin(2*math.Pi*j.ArrivalS/86400) > 0 {
			hi++
		} else {
			lo++
		}
	}
	if r := float64(hi) / float64(lo); r < 1.75 || r > 2.1 {
		t.Errorf("high/low half-day arrivals %d/%d = %.2f, want about 1.93", hi, lo, r)
	}
	// Mean rate: JobsPerSlot per 1200 s slot.
	if slots := jobs[len(jobs)-1].ArrivalS / 1200; math.Abs(float64(len(jobs))/slots/3-1) > 0.08 {
		t.Errorf("%d jobs in %.0f slots, want 3 a slot", len(jobs), slots)
	}
}

// The defaults keep 200 jobs at 10-40 concurrent (active: arrived and
// unfinished) most of the time on the testbed under DRF. Measured
// (seeds 1-8, Servers(13, 2, 16), 1200 s slots, no noise), the share of
// slots with 10-40 active jobs: 77, 82, 58, 80, 65, 70, 60, 72 % (mean
// 70.5 %); median active 18, 23, 13, 23, 19, 13, 12, 27; max 26-52.
// The slots outside are the ramp-up, the drain and diurnal peaks.
func TestGenerateConcurrency(t *testing.T) {
	var sum float64
	for seed := int64(1); seed <= 8; seed++ {
		jobs := Generate(GenOptions{Seed: seed}, nil)
		e := &Env{Servers: Servers(13, 2, 16)}
		var act []int
		if _, err := e.Run(jobs, DRF{}, func(r *SlotRecord) { act = append(act, len(r.Slot.Jobs)) }); err != nil {
			t.Fatal(err)
		}
		in := 0
		for _, a := range act {
			if a >= 10 && a <= 40 {
				in++
			}
		}
		sort.Ints(act)
		frac := float64(in) / float64(len(act))
		sum += frac
		t.Logf("seed %d: %d slots, active median %d, max %d, %.0f%% of slots at 10-40", seed, len(act), act[len(act)/2], act[len(act)-1], 100*frac)
		if med := act[len(act)/2]; med < 10 || med > 40 {
			t.Errorf("seed %d: median active %d outside 10-40", seed, med)
		}
	}
	if mean := sum / 8; mean < 0.6 {
		t.Errorf("mean share of slots at 10-40 active: %.2f, want >= 0.6", mean)
	}
}

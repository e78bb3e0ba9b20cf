package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

type pyJob struct {
	ID          int     `json:"id"`
	Model       string  `json:"model"`
	ScaleFactor int     `json:"scale_factor"`
	DurationS   string  `json:"duration_s"`
	TotalSteps  string  `json:"total_steps"`
	Priority    float64 `json:"priority"`
	ArrivalS    string  `json:"arrival_s"`
}

func f64(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// close within a few ulps: Go's math.Pow/Log and the C library's may differ
// in the last bit.
func close(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-13*math.Max(math.Abs(a), math.Abs(b))
}

// TestMatchesReferenceTraces compares with traces CPython generated
// (testdata/gen.py) following the reference's draw order.
func TestMatchesReferenceTraces(t *testing.T) {
	b, err := os.ReadFile("testdata/gavel_traces.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Cases []struct {
			Seed          int64   `json:"seed"`
			Rate          float64 `json:"rate"`
			MultiGPU      bool    `json:"multi_gpu"`
			MultiPriority bool    `json:"multi_priority"`
			Jobs          []pyJob `json:"jobs"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	exact, total := 0, 0
	for _, c := range data.Cases {
		jobs, err := Generate(Options{Seed: c.Seed, Rate: c.Rate, MultiGPU: c.MultiGPU, MultiPriority: c.MultiPriority}, len(c.Jobs))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.Jobs {
			got := jobs[i]
			if got.ID != want.ID || got.Model != want.Model || got.ScaleFactor != want.ScaleFactor || got.Priority != want.Priority {
				t.Fatalf("seed %d job %d: got %+v, want %+v", c.Seed, i, got, want)
			}
			for _, p := range [][2]float64{{got.DurationS, f64(t, want.DurationS)}, {got.TotalSteps, f64(t, want.TotalSteps)}, {got.ArrivalS, f64(t, want.ArrivalS)}} {
				total++
				if p[0] == p[1] {
					exact++
				}
				if !close(p[0], p[1]) {
					t.Fatalf("seed %d job %d: %v vs reference %v", c.Seed, i, p[0], p[1])
				}
			}
		}
	}
	t.Logf("%d of %d floats bit-identical to CPython", exact, total)
	// A correctly rounded 10^x matches the C library's pow all but very
	// rarely (glibc's pow is not always correctly rounded).
	if total-exact > total/500 {
		t.Errorf("%d floats differ from CPython in the last bits", total-exact)
	}
}

// TestRecipeStatistics checks the recipe over many jobs: scale-factor mix
// 0.70/0.10/0.15/0.05, durations within [10^1.5, 10^4] minutes with 20% long,
// Poisson arrivals at the given rate.
func TestRecipeStatistics(t *testing.T) {
	const n = 20000
	jobs, err := Generate(Options{Seed: 3, Rate: 3, MultiGPU: true}, n)
	if err != nil {
		t.Fatal(err)
	}
	sf := map[int]int{}
	long := 0
	tb := throughputs.Default()
	for _, j := range jobs {
		sf[j.ScaleFactor]++
		min := j.DurationS / 60
		if min < math.Pow(10, 1.5) || min > 1e4 {
			t.Fatalf("job %d: %v minutes", j.ID, min)
		}
		if min > 1e3 {
			long++
		}
		iso, _ := tb.Isolated(j.Key(), "v100")
		if !close(j.TotalSteps, j.DurationS*iso) {
			t.Fatalf("job %d: steps %v != duration x V100 throughput", j.ID, j.TotalSteps)
		}
		if j.ScaleFactor > 1 {
			ok := false
			for _, tp := range Templates {
				ok = ok || (tp.Model == j.Model && tp.Distributed)
			}
			if !ok {
				t.Fatalf("job %d: %s is not distributed", j.ID, j.Model)
			}
		}
	}
	for s, p := range map[int]float64{1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05} {
		if got := float64(sf[s]) / n; math.Abs(got-p) > 0.012 {
			t.Errorf("scale factor %d: fraction %.3f, want %.2f", s, got, p)
		}
	}
	if got := float64(long) / n; math.Abs(got-0.2) > 0.012 {
		t.Errorf("long jobs: %.3f, want 0.20", got)
	}
	// Mean inter-arrival 3600/3 = 1200 s.
	mean := jobs[n-1].ArrivalS / float64(n-1)
	if math.Abs(mean-1200)/1200 > 0.03 {
		t.Errorf("mean gap %.0f s, want 1200", mean)
	}
	if jobs[0].ArrivalS != 0 {
		t.Error("first job must arrive at t=0")
	}
	single, _ := Generate(Options{Seed: 3, Rate: 3}, 500)
	for _, j := range single {
		if j.ScaleFactor != 1 {
			t.Fatal("single-GPU trace with a multi-GPU job")
		}
	}
	static, _ := Generate(Options{Seed: 3}, 50)
	for _, j := range static {
		if j.ArrivalS != 0 {
			t.Fatal("static trace job arriving after 0")
		}
	}
}

func TestTemplates(t *testing.T) {
	tb := throughputs.Default()
	if len(Templates) != 26 {
		t.Fatal(len(Templates))
	}
	for _, tp := range Templates {
		for _, sf := range []int{1, 2, 4, 8} {
			_, ok := tb.Lookup(tp.Model, sf, "v100")
			if want := sf == 1 || tp.Distributed; ok != want {
				t.Errorf("%s at %d: measured %v, template says %v", tp.Model, sf, ok, want)
			}
		}
	}
}

func TestReadPhysical(t *testing.T) {
	jobs, err := ReadFile("testdata/small_test.trace")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 20 {
		t.Fatalf("%d jobs", len(jobs))
	}
	j := jobs[0]
	if j.Model != "Transformer (batch size 128)" || j.TotalSteps != 346 || j.ScaleFactor != 2 || j.Priority != 1 || j.SLOFactor != 0 || j.ArrivalS != 0 || !j.NeedsDataDir || j.NumStepsArg != "-step" || j.WorkDir != "translation" {
		t.Fatalf("%+v", j)
	}
	// Every shared trace parses, when the shared data is present.
	files, _ := filepath.Glob("/work/shared/data/gavel/traces/physical_cluster/*.trace")
	tb := throughputs.Default()
	for _, f := range files {
		jobs, err := ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if _, ok := tb.Isolated(j.Key(), "v100"); !ok {
				t.Errorf("%s: job %d %v not in the throughput table", f, j.ID, j.Key())
			}
		}
	}
	if _, err := ReadPhysical(bytes.NewReader([]byte("a\tb\n"))); err == nil {
		t.Fatal("short line accepted")
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	jobs, err := Generate(Options{Seed: 9, Rate: 2, MultiGPU: true, MultiPriority: true, SLOs: true}, 200)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jobs, back) {
		t.Fatal("JSON lines did not round-trip")
	}
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadFile(path)
	if err != nil || !reflect.DeepEqual(jobs, fromFile) {
		t.Fatalf("ReadFile: %v", err)
	}
	if _, err := ReadJSONL(bytes.NewReader([]byte(`{"id":0,"model":"A3C","scale_factor":1,"total_steps":5,"bogus":1}`))); err == nil {
		t.Fatal("unknown field accepted")
	}
}

// TestJSONLVCFields: vc and opportunistic round-trip through JSON lines,
// are absent from the JSON of jobs without them, and ReadFileCheck reports
// a job its check rejects with the file and line.
func TestJSONLVCFields(t *testing.T) {
	jobs := []Job{
		{ID: 0, Model: "A3C", ScaleFactor: 1, TotalSteps: 5, Priority: 1},
		{ID: 1, Model: "A3C", ScaleFactor: 1, TotalSteps: 5, Priority: 1, ArrivalS: 1, VC: "prod"},
		{ID: 2, Model: "A3C", ScaleFactor: 2, TotalSteps: 5, Priority: 1, ArrivalS: 2, VC: "dev", Opportunistic: true},
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if strings.Contains(lines[0], "vc") || strings.Contains(lines[0], "opportunistic") ||
		!strings.Contains(lines[2], `"vc":"dev","opportunistic":true`) {
		t.Fatalf("JSON lines: %q", lines)
	}
	path := filepath.Join(t.TempDir(), "vc.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFileCheck(path, func(j Job) error { return nil })
	if err != nil || !reflect.DeepEqual(jobs, back) {
		t.Fatalf("%v: %+v", err, back)
	}
	_, err = ReadFileCheck(path, func(j Job) error {
		if j.VC == "dev" {
			return fmt.Errorf("vc: %q is not declared", j.VC)
		}
		return nil
	})
	if want := path + `: line 3: vc: "dev" is not declared`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

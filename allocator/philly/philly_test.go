package philly

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

func TestEmbeddedMatchesSharedData(t *testing.T) {
	d, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// The data README documents the mix; the shared file, when present,
	// must read to the same rows.
	mix := map[int]int{}
	for _, p := range d {
		mix[p.GPUs]++
	}
	if want := map[int]int{1: 25304, 2: 665, 4: 3076, 8: 4147}; len(d) != 33192 || !reflect.DeepEqual(mix, want) {
		t.Fatalf("%d rows, mix %v; want 33192 rows, %v", len(d), mix, want)
	}
	f, err := os.Open("/work/shared/data/gavel/philly_job_distribution.csv")
	if err != nil {
		t.Skip("shared copy not available:", err)
	}
	defer f.Close()
	shared, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, d) {
		t.Fatal("embedded copy differs from the shared file")
	}
}

func TestReadCSVErrors(t *testing.T) {
	for _, in := range []string{
		"", "a,b\n1,1\n", "duration_s,num_gpus\n", "duration_s,num_gpus\n-1,1\n",
		"duration_s,num_gpus\n10,0\n", "duration_s,num_gpus\n10,1.5\n", "duration_s,num_gpus\n10\n",
	} {
		if _, err := ReadCSV(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	p, err := ReadCSV(strings.NewReader("duration_s,num_gpus\n860662.0,1\n3600,8.0\n"))
	if err != nil || !reflect.DeepEqual(p, []Pair{{860662, 1}, {3600, 8}}) {
		t.Fatalf("%v %v", p, err)
	}
}

func opts(seed uint64, jobs int) Options {
	return Options{Seed: seed, Jobs: jobs, ClusterGPUs: 128, Load: 0.8, Opportunistic: 0.2,
		Tenants: []Tenant{{VC: "a", Share: 56}, {VC: "b", Share: 40}, {VC: "c", Share: 24}, {VC: "d", Share: 8}}}
}

func TestGenerateReproducible(t *testing.T) {
	d, _ := Embedded()
	a, err := Generate(d, opts(7, 500))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(d, opts(7, 500))
	c, _ := Generate(d, opts(8, 500))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different traces")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same trace")
	}
	if a[0].ArrivalS != 0 {
		t.Fatalf("first arrival at %g", a[0].ArrivalS)
	}
	for i := 1; i < len(a); i++ {
		if a[i].ID != i || a[i].ArrivalS < a[i-1].ArrivalS {
			t.Fatalf("job %d: id %d arrival %g after %g", i, a[i].ID, a[i].ArrivalS, a[i-1].ArrivalS)
		}
	}
	// A prefix of a longer trace is the shorter trace.
	long, _ := Generate(d, opts(7, 800))
	if !reflect.DeepEqual(long[:500], a) {
		t.Fatal("trace is not a prefix of the longer one")
	}
}

// TestGenerateDistribution checks the GPU-count mix against the CSV's with a
// chi-square test, and the tenant shares, opportunistic fraction and
// arrival rate against their targets.
func TestGenerateDistribution(t *testing.T) {
	d, _ := Embedded()
	const n = 40000
	o := opts(1, n)
	jobs, err := Generate(d, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{}
	for _, p := range d {
		want[p.GPUs] += 1.0 / float64(len(d))
	}
	got := map[int]float64{}
	share := map[string]float64{}
	opp := 0
	work := 0.0
	for _, j := range jobs {
		got[j.GPUs]++
		share[j.VC]++
		if j.Opportunistic {
			opp++
		}
		work += float64(j.GPUs) * j.DurationS
	}
	chi2 := 0.0
	for g, p := range want {
		e := p * n
		chi2 += (got[g] - e) * (got[g] - e) / e
	}
	if chi2 > 16.27 { // 3 degrees of freedom, p = 0.001
		t.Fatalf("GPU mix %v vs CSV %v: chi2 %.1f", got, want, chi2)
	}
	for _, tn := range o.Tenants {
		if f := share[tn.VC] / n; math.Abs(f-tn.Share/128) > 0.01 {
			t.Errorf("tenant %s: share %.3f, want %.3f", tn.VC, f, tn.Share/128)
		}
	}
	if f := float64(opp) / n; math.Abs(f-0.2) > 0.01 {
		t.Errorf("opportunistic fraction %.3f", f)
	}
	rate, _ := Rate(d, o)
	span := jobs[n-1].ArrivalS
	if r := float64(n-1) / span; math.Abs(r/rate-1) > 0.03 {
		t.Errorf("arrival rate %g, want %g", r, rate)
	}
	// Offered load: rate × mean work (heavy tailed, so a loose bound).
	if l := work / span / 128; math.Abs(l-0.8) > 0.15 {
		t.Errorf("offered load %.3f, want 0.8", l)
	}
}

func TestGenerateTenantFilterAndErrors(t *testing.T) {
	d, _ := Embedded()
	o := opts(3, 2000)
	o.Tenants = []Tenant{{VC: "small", Share: 1, GPUs: []int{1}}, {VC: "big", Share: 1, GPUs: []int{8}}}
	o.MaxDurationS = 7200
	jobs, err := Generate(d, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if (j.VC == "small") != (j.GPUs == 1) || (j.VC == "big") != (j.GPUs == 8) || j.DurationS > 7200 {
			t.Fatalf("job %+v", j)
		}
	}
	// Work shares: equal shares mean equal offered GPU time, so the 1-GPU
	// tenant submits far more jobs.
	o.WorkShares, o.Jobs = true, 20000
	jobs, _ = Generate(d, o)
	work := map[string]float64{}
	count := map[string]int{}
	for _, j := range jobs {
		work[j.VC] += float64(j.GPUs) * j.DurationS
		count[j.VC]++
	}
	if r := work["small"] / work["big"]; r < 0.9 || r > 1.1 || count["small"] < 4*count["big"] {
		t.Errorf("work shares: work ratio %.3f, jobs %v", r, count)
	}
	bad := []func(*Options){
		func(o *Options) { o.Tenants = nil },
		func(o *Options) { o.Load = 0 },
		func(o *Options) { o.ClusterGPUs = 0 },
		func(o *Options) { o.Opportunistic = 1.5 },
		func(o *Options) { o.Tenants[0].Share = 0 },
		func(o *Options) { o.Tenants[0].GPUs = []int{3} },
		func(o *Options) { o.Jobs = -1 },
	}
	for i, f := range bad {
		o := opts(0, 10)
		f(&o)
		if _, err := Generate(d, o); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}

// TestSimJobs: a Philly job becomes a simulator job of a model measured at
// its GPU count on every given type, whose steps take its duration on the
// reference type; VC, class and arrival carry over; a GPU count no model
// has is an error.
func TestSimJobs(t *testing.T) {
	tb := throughputs.Default()
	tr := []Job{{ID: 0, VC: "a", ArrivalS: 0, DurationS: 3600, GPUs: 1},
		{ID: 7, VC: "b", ArrivalS: 5, DurationS: 100, GPUs: 8, Opportunistic: true}}
	types := []string{"v100", "p100", "k80"}
	js, err := SimJobs(tr, tb, "v100", types)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range js {
		v, ok := tb.Isolated(j.Key(), "v100")
		if !ok || j.ScaleFactor != tr[i].GPUs || math.Abs(j.TotalSteps/v-tr[i].DurationS) > 1e-9*tr[i].DurationS ||
			j.VC != tr[i].VC || j.Opportunistic != tr[i].Opportunistic || j.ArrivalS != tr[i].ArrivalS || j.DurationS != tr[i].DurationS {
			t.Errorf("job %d: %+v", i, j)
		}
		for _, typ := range types {
			if v, ok := tb.Isolated(j.Key(), typ); !ok || v <= 0 {
				t.Errorf("job %d: model %v not measured on %s", i, j.Key(), typ)
			}
		}
	}
	if _, err := SimJobs([]Job{{ID: 0, GPUs: 3, DurationS: 1}}, tb, "v100", types); err == nil {
		t.Error("3-GPU job accepted")
	}
	if _, err := SimJobs([]Job{{ID: 0, GPUs: 1, DurationS: 1, ArrivalS: 5}, {ID: 1, GPUs: 1, DurationS: 1}}, tb, "v100", types); err == nil {
		t.Error("arrivals out of order accepted")
	}
}

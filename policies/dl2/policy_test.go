package dl2

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"reflect"
	"strings"
	"testing"
)

// randomSlotJobs is a random cluster and random jobs (bounds, demands,
// progress, types among Table 1's and unknown ones).
func randomSlotJobs(r *rand.Rand) ([]Server, []Job) {
	servers := make([]Server, 1+r.Intn(14))
	for i := range servers {
		servers[i] = Server{GPUs: 1 + r.Intn(4), CPUs: 4 + r.Intn(29)}
	}
	names := append(Table1().Names(), "new-a", "new-b")
	jobs := make([]Job, 1+r.Intn(60))
	for j := range jobs {
		minW, minP := 1+r.Intn(2), r.Intn(2)
		jobs[j] = Job{ID: string(rune('a' + j%26)), Model: names[r.Intn(len(names))], Epochs: 1 + r.Float64()*200,
			SlotsRun: r.Intn(50), Batch: 256,
			Bounds: Bounds{MinWorkers: minW, MaxWorkers: minW + r.Intn(8), MinPS: minP, MaxPS: minP + r.Intn(8)},
			Demand: Demand{WorkerGPUs: 1 + r.Intn(2), WorkerCPUs: 1 + r.Intn(4), PSCPUs: 1 + r.Intn(4)}}
		jobs[j].Done = jobs[j].Epochs * r.Float64()
	}
	return servers, jobs
}

// TestPolicyNeverOvercommits: random states (random clusters, jobs past
// the window, untrained networks of each architecture sampling their
// actions, so every kind of action is taken) never give an allocation over a server's capacity
// or a job's bounds. 10^4 states here; RONDO_DL2_STATES=1000000 (make
// test-long) runs 10^6.
func TestPolicyNeverOvercommits(t *testing.T) {
	n := 10000
	if os.Getenv("RONDO_DL2_STATES") != "" {
		n = 1000000
	}
	r := rand.New(rand.NewSource(1))
	var pols []*Policy // per architecture: sampling, greedy
	for _, arch := range Archs {
		m, err := NewArchModel(arch, 8, Table1().Names(), 2, []int{16}, 1)
		if err != nil {
			t.Fatal(err)
		}
		m.Checksum = m.sum()
		pol := NewPolicy(m, t.Logf)
		pol.Rand = r
		pol.Explore = &Exploration{Epsilon: 0.3, Ratio: 3, Rand: r}
		pols = append(pols, pol, NewPolicy(m, t.Logf))
	}
	for i := 0; i < n; i++ {
		servers, jobs := randomSlotJobs(r)
		p := pols[i%len(pols)]
		s := NewSlot(servers, jobs, Table1().Speed())
		p.Decide(s)
		if err := Check(servers, s); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		if p.Fallbacks > 0 {
			t.Fatalf("state %d: the policy fell back to DRF", i)
		}
	}
}

func drfDecisions(servers []Server, jobs []Job) []Alloc {
	s := NewSlot(servers, jobs, Table1().Speed())
	DRF{}.Decide(s)
	return s.Alloc
}

// TestBadModelDecidesAsDRF: a missing, corrupt or mismatched model, and a
// network that outputs NaN, give exactly DRF's decisions, logged once.
func TestBadModelDecidesAsDRF(t *testing.T) {
	good := NewModel(4, Table1().Names(), 2, []int{8}, 3)
	var buf bytes.Buffer
	if err := good.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadModel("good.json", bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("a saved model does not read back: %v", err)
	}
	corrupt := strings.Replace(buf.String(), `"w":[[`, `"w":[[1e-3,`, 1)
	flipped := []byte(buf.String())
	for i := len(flipped) / 2; i < len(flipped); i++ { // change one weight digit
		if flipped[i] >= '1' && flipped[i] <= '8' {
			flipped[i]++
			break
		}
	}
	cases := map[string]string{
		"truncated": buf.String()[:buf.Len()/2],
		"corrupt":   corrupt,
		"flipped":   string(flipped),
		"schema":    strings.Replace(buf.String(), Schema, "other", 1),
		"version":   strings.Replace(buf.String(), `"version":1`, `"version":7`, 1),
		"window":    strings.Replace(buf.String(), `"window":4`, `"window":5`, 1),
	}
	for name, src := range cases {
		if _, err := ReadModel(name, strings.NewReader(src)); err == nil {
			t.Errorf("%s: model accepted", name)
		}
	}
	nan := good.Clone()
	nanNet := nan.Policy.(*mlpNet)
	nanNet.B[len(nanNet.B)-1][0] = math.NaN()
	nanValid := good.Clone() // NaN only at run time: huge weights overflow
	for _, w := range nanValid.Policy.(*mlpNet).W {
		for i := range w {
			w[i] = 1e300
		}
	}
	nanValid.Policy.(*mlpNet).Changed()
	nanValid.Checksum = nanValid.sum()
	r := rand.New(rand.NewSource(5))
	for name, m := range map[string]*Model{"missing": nil, "nan": nan, "overflow": nanValid} {
		var logs []string
		p := NewPolicy(m, func(f string, a ...any) { logs = append(logs, f) })
		for i := 0; i < 200; i++ {
			servers, jobs := randomSlotJobs(r)
			s := NewSlot(servers, jobs, Table1().Speed())
			p.Decide(s)
			if want := drfDecisions(servers, jobs); !reflect.DeepEqual(s.Alloc, want) {
				t.Fatalf("%s: state %d decided otherwise than DRF", name, i)
			}
		}
		if len(logs) != 1 {
			t.Errorf("%s: %d log lines, want 1: %q", name, len(logs), logs)
		}
	}
}

// TestNewTypesTakeSpareSlots: an unknown type takes a spare one-hot slot
// and keeps it; when none is left it gets none.
func TestNewTypesTakeSpareSlots(t *testing.T) {
	m := NewModel(2, []string{"a", "b"}, 1, []int{4}, 1)
	if m.TypeIndex("b") != 1 || m.TypeIndex("c") != 2 || m.TypeIndex("c") != 2 || m.TypeIndex("d") != -1 {
		t.Fatalf("types %q", m.Types)
	}
}

// TestIncrementalEncoding: the policy's incremental inference equals a
// fresh encoding and a whole forward pass after every action, for each
// architecture.
func TestIncrementalEncoding(t *testing.T) {
	for _, arch := range Archs {
		r := rand.New(rand.NewSource(2))
		m, err := NewArchModel(arch, 40, Table1().Names(), 2, []int{32, 32}, 1)
		if err != nil {
			t.Fatal(err)
		}
		m.Checksum = m.sum()
		p := NewPolicy(m, nil)
		l := m.Layout()
		tape := m.Policy.newTape()
		steps := 0
		var cur *Slot
		enc := make([]float64, l.Inputs())
		p.Record = func(_ *Slot, x []float64, mask []bool, a int) {
			steps++
			l.Encode(cur, 0, func(j *Job) int { return m.TypeIndex(j.Model) }, enc)
			for i := range x {
				if x[i] != enc[i] {
					t.Fatalf("%s step %d: input %d is %g, a fresh encoding gives %g", arch, steps, i, x[i], enc[i])
				}
			}
			want := m.Policy.Forward(enc, tape)
			got := p.inc.logits()
			for i := range want {
				if math.Abs(want[i]-got[i]) > 1e-9 {
					t.Fatalf("%s step %d: logit %d drifted: %g vs %g", arch, steps, i, got[i], want[i])
				}
			}
		}
		p.Rand = r
		for i := 0; i < 50; i++ {
			servers, jobs := randomSlotJobs(r)
			cur = NewSlot(servers, jobs[:min(len(jobs), l.Window)], nil)
			p.Decide(cur)
		}
		if steps == 0 {
			t.Fatal("no decisions")
		}
	}
}

package agent

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/telemetry"
	"github.com/rondo-sched/rondo/policies"
)

// viewCluster: nodes n0 (2 V100) and n1 (2 V100, one failed, 1 K80), and a
// K80 on a server no node names; the jobs are the test's.
type viewCluster struct {
	jobs []engine.Job
}

func (c *viewCluster) Observe() (*engine.Snapshot, error) {
	return &engine.Snapshot{
		GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "n0", Cell: "0/0"}, {ID: "g1", Type: "v100", Server: "n0", Cell: "0/1"},
			{ID: "g2", Type: "v100", Server: "n1"}, {ID: "g3", Type: "v100", Server: "n1", Failed: true}, {ID: "k0", Type: "k80", Server: "n1"},
			{ID: "s0", Type: "k80", Server: "sim-9"}},
		Nodes: []engine.Node{{ID: "n1", Name: "node-b", Pool: "rondo", Class: "big", Ready: true}, {ID: "n0", Name: "node-a", Pool: "rondo", Ready: true}},
		Jobs:  c.jobs,
	}, nil
}

func (c *viewCluster) Enforce(*engine.Plan) error { return nil }

// fixedDecider returns the same plan every round.
type fixedDecider struct{ p engine.Plan }

func (d *fixedDecider) Round(*engine.Snapshot) (*engine.Plan, error) { p := d.p; return &p, nil }

func viewJobs() []engine.Job {
	j := func(id, vc string, sf int) engine.Job {
		return engine.Job{ID: id, VC: vc, ScaleFactor: sf, Throughput: map[string]float64{"v100": 1, "k80": 0.5}, TotalSteps: 10, RemainingSteps: 10}
	}
	return []engine.Job{j("a1", "a", 2), j("a2", "a", 1), j("b1", "b", 1), j("b2", "b", 1), j("x", "nowhere", 1)}
}

// viewPlan: a1 holds two V100s (g0, g1), a2 one K80 beyond a's share of
// none, b1 and b2 share g2 (a pair); x (an undeclared VC) holds s0.
func viewPlan() engine.Plan {
	return engine.Plan{
		Assignments: []engine.Assignment{
			{Jobs: []string{"a1"}, Type: "v100", GPUs: []string{"g0", "g1"}},
			{Jobs: []string{"a2"}, Type: "k80", GPUs: []string{"k0"}},
			{Jobs: []string{"b1", "b2"}, Type: "v100", GPUs: []string{"g2"}},
			{Jobs: []string{"x"}, Type: "k80", GPUs: []string{"s0"}},
		},
		Allocation: &policies.Allocation{Types: []string{"v100", "k80"}, JobIDs: []string{"a1", "a2", "b1", "b2"},
			X: [][]float64{{0.5, 0}, {0, 1}, {0.25, 0}, {0.25, 0}}},
	}
}

// Quota-only VCs: a (one V100) runs a 2-GPU job on two V100s and a job
// on a K80, so it borrows one of each; b (two V100s, one K80) uses one
// V100 (a pair), so it lends one V100 and the K80. GPU time accumulates
// each round: entitled Σ X × scale × round, received Σ GPUs × round (a
// pair's GPUs split between its two jobs).
func TestVCViewQuotaOnly(t *testing.T) {
	vcs := []VC{{Name: "a", Policy: "fifo", GPUs: map[string]int{"v100": 1}},
		{Name: "b", Policy: "las", GPUs: map[string]int{"v100": 2, "k80": 1}}}
	a := New(Config{Backend: &viewCluster{jobs: viewJobs()}, Engine: &fixedDecider{p: viewPlan()}, Round: 10 * time.Second, VCs: vcs})
	a.Step()
	a.Step()
	st := a.Status()
	if len(st.VCs) != 2 {
		t.Fatalf("VCs %+v", st.VCs)
	}
	va, vb := st.VCs[0], st.VCs[1]
	eq := func(what string, got, want map[string]int) {
		t.Helper()
		if !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	eq("a quota", va.Quota, map[string]int{"v100": 1})
	eq("a used", va.Used, map[string]int{"v100": 2, "k80": 1})
	eq("a borrowed", va.Borrowed, map[string]int{"v100": 1, "k80": 1})
	eq("a lent", va.Lent, nil)
	eq("b quota", vb.Quota, map[string]int{"v100": 2, "k80": 1})
	eq("b used", vb.Used, map[string]int{"v100": 1})
	eq("b borrowed", vb.Borrowed, nil)
	eq("b lent", vb.Lent, map[string]int{"v100": 1, "k80": 1})
	// a: entitled (0.5×2 + 1×1) × 10 s = 20 per round, received (2 + 1)
	// × 10 = 30; b: entitled (0.25 + 0.25) × 10 = 5, received 2 × ½ × 10 = 10.
	if va.EntitledGPUS != 40 || va.ReceivedGPUS != 60 || vb.EntitledGPUS != 10 || vb.ReceivedGPUS != 20 {
		t.Errorf("GPU time after two rounds: a %g/%g, b %g/%g; want 40/60, 10/20", va.EntitledGPUS, va.ReceivedGPUS, vb.EntitledGPUS, vb.ReceivedGPUS)
	}
	if va.Running != 2 || va.Pending != 0 || vb.Running != 2 {
		t.Errorf("counts: a %d/%d, b %d/%d", va.Running, va.Pending, vb.Running, vb.Pending)
	}
	// The config's VCs are not written to (the status holds copies).
	if a.cfg.VCs[0].Quota != nil || a.cfg.VCs[0].Used != nil {
		t.Errorf("config VCs changed: %+v", a.cfg.VCs[0])
	}
}

// A cell VC's quota is what the command derived from its cells (Quota);
// a VC whose quota is unknown borrows nothing. Pending counts its jobs
// not running.
func TestVCViewCellsAndPending(t *testing.T) {
	vcs := []VC{{Name: "a", Cells: map[string]int{"v100-node": 1}, Quota: map[string]int{"v100": 2}},
		{Name: "b", Cells: map[string]int{"derived": 1}}}
	p := viewPlan()
	p.Assignments = p.Assignments[:2] // b's pair waits
	a := New(Config{Backend: &viewCluster{jobs: viewJobs()}, Engine: &fixedDecider{p: p}, Round: time.Second, VCs: vcs})
	a.Step()
	st := a.Status()
	va, vb := st.VCs[0], st.VCs[1]
	if !maps.Equal(va.Quota, map[string]int{"v100": 2}) || !maps.Equal(va.Borrowed, map[string]int{"k80": 1}) || va.Lent != nil {
		t.Errorf("a: %+v", va)
	}
	if vb.Quota != nil || vb.Borrowed != nil || vb.Used != nil || vb.Running != 0 || vb.Pending != 2 {
		t.Errorf("b: %+v", vb)
	}
}

// One VC without a share or cells: one engine runs every job on the whole
// cluster: its quota is the healthy GPUs.
func TestVCViewImplicit(t *testing.T) {
	jobs := viewJobs()
	for i := range jobs {
		jobs[i].VC = "research"
	}
	a := New(Config{Backend: &viewCluster{jobs: jobs}, Engine: &fixedDecider{p: viewPlan()}, Round: time.Second,
		VCs: []VC{{Name: "research", Policy: "max_min_fairness_perf"}}})
	a.Step()
	v := a.Status().VCs[0]
	if !maps.Equal(v.Quota, map[string]int{"v100": 3, "k80": 2}) || !maps.Equal(v.Used, map[string]int{"v100": 3, "k80": 2}) ||
		v.Borrowed != nil || v.Lent != nil || v.Running != 5 {
		t.Errorf("implicit VC: %+v", v)
	}
}

// Nodes: the snapshot's nodes by name with their GPUs (health, type,
// cell), the plan's jobs on each GPU and the share each gets; GPUs of a
// server no node names get a node of their own; /v1/status carries them.
func TestNodeView(t *testing.T) {
	a := New(Config{Backend: &viewCluster{jobs: viewJobs()}, Engine: &fixedDecider{p: viewPlan()}, Round: time.Second})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	a.Step()
	resp, err := srv.Client().Get(srv.URL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 || st.Nodes[0].Name != "node-a" || st.Nodes[1].Name != "node-b" || st.Nodes[2].Name != "sim-9" {
		t.Fatalf("nodes %+v", st.Nodes)
	}
	na, nb := st.Nodes[0], st.Nodes[1]
	if na.Pool != "rondo" || !na.Ready || len(na.GPUs) != 2 || na.GPUs[0].ID != "g0" || na.GPUs[0].Cell != "0/0" ||
		na.GPUs[0].Share != 1 || len(na.GPUs[0].Jobs) != 1 || na.GPUs[0].Jobs[0] != "a1" {
		t.Errorf("node-a %+v", na)
	}
	if nb.Class != "big" || len(nb.GPUs) != 3 {
		t.Fatalf("node-b %+v", nb)
	}
	if g := nb.GPUs[0]; g.ID != "g2" || g.Share != 0.5 || len(g.Jobs) != 2 {
		t.Errorf("shared GPU %+v", g)
	}
	if g := nb.GPUs[1]; g.ID != "g3" || g.Healthy || g.Jobs != nil || g.Share != 0 {
		t.Errorf("failed GPU %+v", g)
	}
	if g := nb.GPUs[2]; g.Type != "k80" || !g.Healthy || g.Jobs[0] != "a2" {
		t.Errorf("k80 %+v", g)
	}
}

// TestVCViewMetrics: rondo_vc_{quota,used,borrowed}_gpus are the VC view
// `rondo vc status` shows (TestVCViewQuotaOnly's cluster and plan).
func TestVCViewMetrics(t *testing.T) {
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	vcs := []VC{{Name: "a", Policy: "fifo", GPUs: map[string]int{"v100": 1}},
		{Name: "b", Policy: "las", GPUs: map[string]int{"v100": 2, "k80": 1}}}
	a := New(Config{Backend: &viewCluster{jobs: viewJobs()}, Engine: &fixedDecider{p: viewPlan()}, Round: 10 * time.Second, VCs: vcs, Telemetry: tel})
	a.Step()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`rondo_vc_quota_gpus{type="v100",vc="a"} 1`,
		`rondo_vc_used_gpus{type="v100",vc="a"} 2`,
		`rondo_vc_used_gpus{type="k80",vc="a"} 1`,
		`rondo_vc_borrowed_gpus{type="v100",vc="a"} 1`,
		`rondo_vc_borrowed_gpus{type="k80",vc="a"} 1`,
		`rondo_vc_quota_gpus{type="k80",vc="b"} 1`,
		`rondo_vc_used_gpus{type="v100",vc="b"} 1`,
		`rondo_vc_used_gpus{type="k80",vc="b"} 0`,
		`rondo_vc_borrowed_gpus{type="v100",vc="b"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

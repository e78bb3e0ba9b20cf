package agent

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// The timeline's samples: GPUs in use and healthy per type, per VC (a
// shared GPU split between its two jobs), jobs running and waiting, jobs
// finished and their mean JCT (the snapshot's time when a job is first
// gone, minus its arrival), utilisation.
func TestTimelineSamples(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}, {ID: "g1", Type: "v100", Server: "n"},
		{ID: "g2", Type: "k80", Server: "m"}, {ID: "g3", Type: "k80", Server: "m", Failed: true}}
	job := func(id, vc string, arrival float64) engine.Job {
		return engine.Job{ID: id, VC: vc, ScaleFactor: 1, ArrivalS: arrival, TotalSteps: 100, RemainingSteps: 50,
			Throughput: map[string]float64{"v100": 1, "k80": 1}}
	}
	// Round 1: a alone on g0 (research), b and c share g1 (research and
	// prod), d waits.
	s1 := &engine.Snapshot{TimeS: 10, GPUs: gpus, Jobs: []engine.Job{job("a", "research", 0), job("b", "research", 2),
		job("c", "prod", 4), job("d", "prod", 6)}}
	p1 := &engine.Plan{Assignments: []engine.Assignment{
		{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}},
		{Jobs: []string{"b", "c"}, Type: "v100", GPUs: []string{"g1"}},
	}}
	a.record(s1, p1, 1)
	// Round 2: a and b finished (gone at t=40), d runs on the K80.
	s2 := &engine.Snapshot{TimeS: 40, GPUs: gpus, Jobs: []engine.Job{job("c", "prod", 4), job("d", "prod", 6)}}
	p2 := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"d"}, Type: "k80", GPUs: []string{"g2"}}}}
	a.record(s2, p2, 2)

	tl := a.Timeline(0)
	if len(tl) != 2 {
		t.Fatalf("%d samples, want 2", len(tl))
	}
	r1, r2 := tl[0], tl[1]
	if r1.Round != 1 || r1.Used["v100"] != 2 || r1.Used["k80"] != 0 || r1.Healthy["v100"] != 2 || r1.Healthy["k80"] != 1 {
		t.Errorf("round 1 GPUs: %+v", r1)
	}
	// g1 is shared: research gets it through b (the first of the pair),
	// prod's c a part of 0 GPUs; together they hold 2.
	if r1.VCUsed["research"] != 2 || r1.VCUsed["prod"] != 0 {
		t.Errorf("round 1 per VC: %v", r1.VCUsed)
	}
	if r1.Running != 3 || r1.Waiting != 1 || r1.Finished != 0 || r1.AvgJCTS != 0 {
		t.Errorf("round 1 jobs: %+v", r1)
	}
	if math.Abs(r1.Utilization-2.0/3) > 1e-9 {
		t.Errorf("round 1 utilisation %g, want 2/3", r1.Utilization)
	}
	// a: 40 − 0, b: 40 − 2: mean 39.
	if r2.Finished != 2 || math.Abs(r2.AvgJCTS-39) > 1e-9 || r2.Running != 1 || r2.Waiting != 1 {
		t.Errorf("round 2 jobs: %+v", r2)
	}
	if r2.VCUsed["prod"] != 1 || r2.VCUsed["research"] != 0 || r2.Used["k80"] != 1 || math.Abs(r2.Utilization-1.0/3) > 1e-9 {
		t.Errorf("round 2 GPUs: %+v", r2)
	}
	if got := a.Timeline(1); len(got) != 1 || got[0].Round != 2 {
		t.Errorf("Timeline(1): %+v", got)
	}
}

// The ring keeps the last TimelineLen rounds, oldest first.
func TestTimelineRing(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}}
	const n = TimelineLen + 5
	for r := 1; r <= n; r++ {
		a.record(&engine.Snapshot{TimeS: float64(r), GPUs: gpus, Jobs: []engine.Job{{ID: "a", ScaleFactor: 1}}}, &engine.Plan{}, r)
	}
	tl := a.Timeline(0)
	if len(tl) != TimelineLen || tl[0].Round != 6 || tl[len(tl)-1].Round != n {
		t.Fatalf("%d samples, rounds %d..%d; want %d, 6..%d", len(tl), tl[0].Round, tl[len(tl)-1].Round, TimelineLen, n)
	}
	for i := 1; i < len(tl); i++ {
		if tl[i].Round != tl[i-1].Round+1 {
			t.Fatalf("sample %d: round %d after %d", i, tl[i].Round, tl[i-1].Round)
		}
	}
	if got := a.Timeline(n - 3); len(got) != 3 || got[0].Round != n-2 {
		t.Errorf("Timeline(%d): %d samples from round %d", n-3, len(got), got[0].Round)
	}
	if got := a.Timeline(n); got == nil || len(got) != 0 {
		t.Errorf("Timeline(%d): %v, want empty (not null)", n, got)
	}
}

// GET /v1/timeline (and ?since=), the page under /ui/, /ui redirected
// with its query (a ?token= survives).
func TestTimelineAndPageHandlers(t *testing.T) {
	a := New(Config{Cluster: "test"})
	gpus := []engine.GPU{{ID: "g0", Type: "v100", Server: "n"}}
	for r := 1; r <= 3; r++ {
		a.record(&engine.Snapshot{TimeS: float64(r), GPUs: gpus, Jobs: []engine.Job{{ID: "a", ScaleFactor: 1}}},
			&engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"a"}, Type: "v100", GPUs: []string{"g0"}}}}, r)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		c := srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/v1/timeline?since=1")
	var got []Sample
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("timeline: %s %v: %s", resp.Status, err, body)
	}
	if len(got) != 2 || got[0].Round != 2 || got[1].Used["v100"] != 1 || got[1].Utilization != 1 || got[1].Running != 1 {
		t.Errorf("timeline since 1: %+v", got)
	}
	if resp, _ := get("/v1/timeline?since=x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("since=x: %s, want 400", resp.Status)
	}
	if resp, _ := get("/ui?token=abc"); resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/ui/?token=abc" {
		t.Errorf("/ui: %s to %q, want a redirect to /ui/?token=abc", resp.Status, resp.Header.Get("Location"))
	}
	resp, body = get("/ui/")
	if resp.StatusCode != 200 || !strings.Contains(body, `<table id="jobs"`) || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/ui/: %s %q: %.200s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	if resp, _ := get("/ui/app.js"); resp.StatusCode != 200 {
		t.Errorf("/ui/app.js: %s", resp.Status)
	}
}

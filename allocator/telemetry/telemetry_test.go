package telemetry

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
)

func snapshotAndPlan() (*engine.Snapshot, *engine.Plan) {
	s := &engine.Snapshot{
		GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "a"}, {ID: "g1", Type: "v100", Server: "a"},
			{ID: "g2", Type: "k80", Server: "b"}, {ID: "g3", Type: "k80", Server: "b", Failed: true}},
		Jobs: []engine.Job{{ID: "j1"}, {ID: "j2"}, {ID: "j3"}, {ID: "j4"}},
	}
	p := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"j1"}, Type: "v100", GPUs: []string{"g0"}},
		{Jobs: []string{"j2"}, Type: "k80", GPUs: []string{"g2"}}},
		Suspend: []string{"j3"}, Recomputed: true, SolveMS: 4.5}
	return s, p
}

func TestSummarize(t *testing.T) {
	s, p := snapshotAndPlan()
	u := Summarize(s, p)
	if u.Jobs["running"] != 2 || u.Jobs["suspended"] != 1 || u.Jobs["queued"] != 1 {
		t.Fatalf("jobs %v", u.Jobs)
	}
	// One of two V100s; the one healthy K80 of two.
	if u.Utilization["v100"] != 0.5 || u.Utilization["k80"] != 1 {
		t.Fatalf("utilization %v", u.Utilization)
	}
}

func TestPrometheusEndpoint(t *testing.T) {
	tel, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s, p := snapshotAndPlan()
	tel.Round(120*time.Millisecond, s, p)
	tel.Decision("admit")
	tel.Decision("preempt")
	tel.Decision("retune")
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`rondo_round_duration_ms_count 1`,
		`rondo_policy_solve_ms_sum 4.5`,
		`rondo_jobs{state="running"} 2`,
		`rondo_gpu_utilization{type="v100"} 0.5`,
		`rondo_decisions{kind="admit"} 1`,
		`rondo_decisions{kind="retune"} 1`,
		`rondo_preemptions 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

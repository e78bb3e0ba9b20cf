package telemetry

import (
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// snapshotAndPlan: 2 V100 + 2 K80 (one failed); j1 (VC a) runs on a V100,
// j2 (VC b, arrived at 10, admitted now at 100) on the K80, j3 suspended,
// j4 queued behind a gang; one rejected job.
func snapshotAndPlan() (*engine.Snapshot, *engine.Plan) {
	s := &engine.Snapshot{
		TimeS: 100,
		GPUs: []engine.GPU{{ID: "g0", Type: "v100", Server: "a"}, {ID: "g1", Type: "v100", Server: "a"},
			{ID: "g2", Type: "k80", Server: "b"}, {ID: "g3", Type: "k80", Server: "b", Failed: true}},
		Jobs:     []engine.Job{{ID: "j1", VC: "a", Started: true}, {ID: "j2", VC: "b", ArrivalS: 10}, {ID: "j3", VC: "a"}, {ID: "j4", VC: "a"}},
		Rejected: []engine.Rejection{{Job: "bad", Reason: "rondo.vc: unknown VC"}},
	}
	p := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"j1"}, Type: "v100", GPUs: []string{"g0"}, Action: engine.Keep},
		{Jobs: []string{"j2"}, Type: "k80", GPUs: []string{"g2"}, Action: engine.Start}},
		Suspend: []string{"j3"}, Recomputed: true, SolveMS: 4.5,
		Waiting: []engine.Waiting{{Job: "j4", VC: "a", Reason: engine.Reason{Kind: engine.WaitsForGang, Need: 2, Free: 1}, Position: 1}}}
	return s, p
}

func TestSummarize(t *testing.T) {
	s, p := snapshotAndPlan()
	u := Summarize(s, p)
	if u.Jobs["running"] != 2 || u.Jobs["suspended"] != 1 || u.Jobs["queued"] != 1 {
		t.Fatalf("jobs %v", u.Jobs)
	}
	if u.State["j3"] != "suspended" || u.State["j4"] != "queued" {
		t.Fatalf("states %v", u.State)
	}
	// One of two V100s; the one healthy K80 of two.
	if u.Utilization["v100"] != 0.5 || u.Utilization["k80"] != 1 {
		t.Fatalf("utilization %v", u.Utilization)
	}
}

func scrape(t *testing.T, tel *Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestPrometheusEndpoint(t *testing.T) {
	tel, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	tel.SetVCs([]VCQuota{{Name: "a", GPUs: map[string]int{"v100": 0, "k80": 1}}, {Name: "b", GPUs: map[string]int{"v100": 1}}})
	// The agent's VC view of snapshotAndPlan (allocator/agent/vcview.go).
	tel.SetVCUsage([]VCUsage{
		{Name: "a", Quota: map[string]int{"v100": 0, "k80": 1}, Used: map[string]int{"v100": 1}, Borrowed: map[string]int{"v100": 1}},
		{Name: "b", Quota: map[string]int{"v100": 1}, Used: map[string]int{"k80": 1}, Borrowed: map[string]int{"k80": 1}}})
	s, p := snapshotAndPlan()
	tel.Round(120*time.Millisecond, s, p)
	tel.RoundEnded(nil)
	tel.RoundEnded(errors.New("nomad away"))
	tel.Decision("admit")
	tel.Decision("preempt")
	tel.Decision("retune")
	tel.SetLeader(true)
	body := scrape(t, tel)
	for _, want := range []string{
		`rondo_round_duration_seconds_bucket{le="0.16"} 1`,
		`rondo_round_duration_seconds_count 1`,
		`rondo_policy_solve_seconds_sum 0.0045`,
		`rondo_admission_wait_seconds_count 1`,
		`rondo_admission_wait_seconds_sum 90`,
		`rondo_jobs{state="running",vc="a"} 1`,
		`rondo_jobs{state="running",vc="b"} 1`,
		`rondo_jobs{state="queued",vc="a"} 1`,
		`rondo_jobs{state="suspended",vc="a"} 1`,
		`rondo_gpu_utilization{type="v100"} 0.5`,
		`rondo_gpus_used{type="v100",vc="a"} 1`,
		`rondo_gpus_used{type="k80",vc="b"} 1`,
		`rondo_vc_quota_gpus{type="k80",vc="a"} 1`,
		`rondo_vc_used_gpus{type="v100",vc="a"} 1`,
		`rondo_vc_borrowed_gpus{type="v100",vc="a"} 1`,
		`rondo_vc_borrowed_gpus{type="k80",vc="b"} 1`,
		`rondo_vc_borrowed_gpus{type="v100",vc="b"} 0`,
		`rondo_jobs_pending{reason="gang"} 1`,
		`rondo_jobs_pending{reason="rejected"} 1`,
		`rondo_jobs_pending{reason="over_quota"} 0`,
		`rondo_decisions_total{kind="admit"} 1`,
		`rondo_decisions_total{kind="retune"} 1`,
		`rondo_decisions_total{kind="shrink"} 0`,
		`rondo_preemptions_total 2`,
		`rondo_rounds_total 2`,
		`rondo_rounds_failed_total 1`,
		`rondo_leader 1`,
		`rondo_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	// Nomad's and Prometheus' conventions: no unit suffix but _seconds,
	// counters end in _total.
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			f := strings.Fields(line)
			if strings.Contains(f[2], "_ms") {
				t.Errorf("metric in milliseconds: %s", line)
			}
			if f[3] == "counter" && !strings.HasSuffix(f[2], "_total") {
				t.Errorf("counter without _total: %s", line)
			}
		}
	}
	// The next round runs nothing: last round's series drop to 0, the
	// admitted job is not observed again.
	s.Jobs, s.Rejected = s.Jobs[:1], nil
	tel.Round(time.Second, s, &engine.Plan{})
	body = scrape(t, tel)
	for _, want := range []string{
		`rondo_jobs{state="running",vc="b"} 0`,
		`rondo_jobs{state="queued",vc="a"} 1`,
		`rondo_gpus_used{type="k80",vc="b"} 0`,
		`rondo_jobs_pending{reason="gang"} 0`,
		`rondo_jobs_pending{reason="rejected"} 0`,
		`rondo_admission_wait_seconds_count 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("second round: metrics lack %q:\n%s", want, body)
		}
	}
}

// TestStatsd sends the metrics to a real UDP listener through a go-metrics
// statsd sink.
func TestStatsd(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sink, err := metrics.NewStatsdSink(pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Shutdown()
	tel, err := NewWith(Options{Sinks: []metrics.MetricSink{sink}, DisableHostname: true, CollectionInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close() // before the sink's Shutdown (deferred earlier)
	s, p := snapshotAndPlan()
	tel.Round(200*time.Millisecond, s, p)
	tel.Decision("admit")
	// Gauges re-sent every collection interval; timers in milliseconds.
	want := []string{"rondo.decisions.total.admit:1.000000|c", "rondo.round.duration:200.000000|ms",
		"rondo.jobs.running.a:1.000000|g", "rondo.jobs.pending.gang:1.000000|g", "rondo.admission.wait:90000.000000|ms"}
	var got strings.Builder
	buf := make([]byte, 65536)
	deadline := time.Now().Add(5 * time.Second)
	for {
		missing := ""
		for _, w := range want {
			if !strings.Contains(got.String(), w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statsd never got %q; got:\n%s", missing, got.String())
		}
		pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if n, _, err := pc.ReadFrom(buf); err == nil {
			got.Write(buf[:n])
		}
	}
	if strings.Contains(got.String(), "rondo."+hostname()) {
		t.Errorf("disable_hostname: the host name is in the keys:\n%s", got.String())
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

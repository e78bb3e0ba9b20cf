package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

func statusServer(t *testing.T) *httptest.Server {
	eta := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	st := agent.Status{Cluster: "http://nomad:4646", Policy: "max_min_fairness_perf", Round: 7, RoundSeconds: 10,
		NextRound: time.Now().Add(5 * time.Second), VCs: []agent.VC{{Name: "research", Policy: "max_min_fairness_perf"}},
		Types: map[string]agent.TypeUsage{"v100": {Total: 4, Used: 3, Failed: 1}},
		Jobs: []agent.JobStatus{{ID: "lm", VC: "research", State: "running", Type: "v100", GPUs: []string{"GPU-0"}, ScaleFactor: 1,
			RemainingSteps: 40, TotalSteps: 100, Rounds: 3, Throughput: 2.5, ETA: &eta,
			Throughputs: map[string]agent.TypeThroughput{"v100": {Value: 2.5, Source: "measured"}, "h100-80gb": {Value: 7.25, Source: "estimated"}}},
			{ID: "cyclegan", State: "queued", ScaleFactor: 2, RemainingSteps: 10, TotalSteps: 10,
				Throughputs: map[string]agent.TypeThroughput{"v100": {Value: 1, Source: "defaulted"}}},
			{ID: "elastic", State: "running", Type: "v100", GPUs: []string{"GPU-1", "GPU-2", "GPU-3"}, ScaleFactor: 1,
				RemainingSteps: 10, TotalSteps: 10, Workers: 3, MinWorkers: 1, MaxWorkers: 4}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusAndJobCommands(t *testing.T) {
	srv := statusServer(t)
	code, out, errOut := runCaptured(t, "status", "-rondo-addr", srv.URL)
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	for _, want := range []string{"Round:      7 (every 10s)", "research (max_min_fairness_perf)", "v100  4     3     1       1 measured, 1 defaulted", "lm", "60/100"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ = runCaptured(t, "job", "list", "-rondo-addr", srv.URL); code != 0 || !strings.Contains(out, "cyclegan") {
		t.Errorf("job list: %d\n%s", code, out)
	}
	if code, out, _ = runCaptured(t, "job", "status", "-rondo-addr", srv.URL, "lm"); code != 0 {
		t.Errorf("job status: %d\n%s", code, out)
	}
	for _, want := range []string{"GPU-0", "VC:         research", "Rounds:     3", "Throughput: 2.50 steps/s", "ETA:        2026-11-23T",
		"Per type:   h100-80gb 7.25 estimated, v100 2.50 measured"} {
		if !strings.Contains(out, want) {
			t.Errorf("job status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Workers:") {
		t.Errorf("fixed-size job shows workers:\n%s", out)
	}
	if code, out, _ = runCaptured(t, "job", "status", "-rondo-addr", srv.URL, "elastic"); code != 0 || !strings.Contains(out, "Workers:    3 (elastic 1..4)") {
		t.Errorf("elastic job status: %d\n%s", code, out)
	}
	if code, _, errOut = runCaptured(t, "job", "status", "-rondo-addr", srv.URL, "nope"); code != 1 || !strings.Contains(errOut, "unknown to the agent") {
		t.Errorf("job status nope: %d %s", code, errOut)
	}
}

// A gandiva_fair VC's users, shares before and after trading, trades and
// a refused job show in `rondo status`.
func TestStatusGandivaFairUsers(t *testing.T) {
	st := agent.Status{Cluster: "c", Policy: "gandiva_fair", RoundSeconds: 360,
		VCs: []agent.VC{{Name: "lab", Policy: "gandiva_fair", Migrations: 2,
			Users: []engine.UserShare{
				{User: "alice", Tickets: 200, FairShare: map[string]float64{"v100": 2, "k80": 4}, Share: map[string]float64{"v100": 3, "k80": 1.5}},
				{User: "bob", Tickets: 100, FairShare: map[string]float64{"v100": 2, "k80": 4}, Share: map[string]float64{"v100": 1, "k80": 6.5}}},
			Trades: []fairshare.Trade{{Buyer: "alice", Seller: "bob", Fast: "v100", Slow: "k80", Price: 2.5, Amount: 1}}}},
		Types: map[string]agent.TypeUsage{"v100": {Total: 4}, "k80": {Total: 8}},
		Jobs:  []agent.JobStatus{{ID: "huge", VC: "lab", State: "queued", ScaleFactor: 16, Refused: "gang of 16 GPUs larger than any generation"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(st) }))
	defer srv.Close()
	code, out, errOut := runCaptured(t, "status", "-rondo-addr", srv.URL)
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	for _, want := range []string{"Users of VC lab", "migrations 2", "alice  200", "4.00 -> 1.50", "2.00 -> 3.00",
		"Trade: alice buys 1.00 v100 from bob at 2.50 k80 each", "gang of 16 GPUs larger than any generation", "refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}

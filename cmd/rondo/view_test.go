package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
)

// viewStatus is a realistic agent status: two VCs over cells (research
// borrows a K80 that prod lends), a running job, a gang waiting for GPUs
// on one node, a job of lower priority, a rejected job, a finished one,
// and three nodes.
func viewStatus() agent.Status {
	eta := time.Now().Add(10 * time.Minute)
	return agent.Status{Cluster: "http://127.0.0.1:4646", Policy: "max_min_fairness_perf", Round: 12, RoundSeconds: 20, Leader: true,
		VCs: []agent.VC{
			{Name: "research", Policy: "fifo_perf", Cells: map[string]int{"v100-node": 1}, Quota: map[string]int{"v100": 4},
				Used: map[string]int{"v100": 1, "k80": 1}, Borrowed: map[string]int{"k80": 1}, EntitledGPUS: 7200, ReceivedGPUS: 5400,
				Running: 2, Pending: 2},
			{Name: "prod", Policy: "max_min_fairness_perf", Cells: map[string]int{"k80-node": 1}, Quota: map[string]int{"k80": 4},
				Lent: map[string]int{"k80": 1}, Pending: 1}},
		Types: map[string]agent.TypeUsage{"v100": {Total: 4, Used: 1}, "k80": {Total: 4, Used: 1}},
		Jobs: []agent.JobStatus{
			{ID: "lm", User: "alice", Namespace: "default", VC: "research", State: "running", Type: "v100", GPUs: []string{"GPU-v100-0"},
				ScaleFactor: 1, RemainingSteps: 400, TotalSteps: 1000, Rounds: 9, Throughput: 1.5, ETA: &eta, Intent: "keep", Reason: "kept"},
			{ID: "opp", User: "bob", VC: "research", State: "running", Type: "k80", GPUs: []string{"GPU-k80-0"}, ScaleFactor: 1,
				RemainingSteps: 50, TotalSteps: 100},
			{ID: "gang", User: "alice", VC: "research", State: "queued", ScaleFactor: 4, RemainingSteps: 100, TotalSteps: 100,
				Pending: "waits for a gang of 4 GPUs on one server: the largest free set of v100 has 3", PendingKind: "gang",
				QueuePosition: 1, Priority: 2.5, WaitS: 95},
			{ID: "low", User: "carol", VC: "prod", State: "suspended", ScaleFactor: 1, RemainingSteps: 10, TotalSteps: 20,
				Pending: "lower priority than lm (1.2)", PendingKind: "priority", QueuePosition: 2, Priority: 0.4, WaitS: 3700},
			{ID: "bad", User: "dave", VC: "research", State: "rejected", Pending: `meta rondo.steps = "abc": not a number`,
				PendingKind: "rejected"},
			{ID: "old", VC: "prod", State: "done", TotalSteps: 10}},
		Nodes: []agent.NodeStatus{
			{ID: "0f3e9a7c-1111", Name: "k80-0", Pool: "rondo", Ready: true, GPUs: []agent.GPUStatus{
				{ID: "GPU-k80-0", Type: "k80", Healthy: true, Jobs: []string{"opp"}, Share: 1},
				{ID: "GPU-k80-1", Type: "k80", Healthy: false}}},
			{ID: "5c1d2e3f-2222", Name: "v100-0", Pool: "rondo", Class: "dgx", Ready: true, GPUs: []agent.GPUStatus{
				{ID: "GPU-v100-0", Type: "v100", Healthy: true, Cell: "0/0", Jobs: []string{"lm"}, Share: 1},
				{ID: "GPU-v100-1", Type: "v100", Healthy: true, Cell: "0/1", Jobs: []string{"a", "b"}, Share: 0.5}}}},
	}
}

// lmHistory is lm's history as GET /v1/jobs/lm gives it.
func lmHistory() []agent.RoundEvent {
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	return []agent.RoundEvent{
		{Round: 2, Time: t0, Intent: "admit", Type: "v100", GPUs: 1, Reason: "placed in its VC's share"},
		{Round: 5, Time: t0.Add(time.Minute), Intent: "suspend", Reason: "preempted for gang"},
		{Round: 7, Time: t0.Add(2 * time.Minute), Intent: "migrate", Type: "v100", GPUs: 1, Reason: "moved to free a node"}}
}

// viewServer serves viewStatus at /v1/status and GET /v1/jobs/lm (with
// its history); other jobs are 404 there. It counts the status requests
// and checks the token when one is given.
func viewServer(t *testing.T, token string) (*httptest.Server, *atomic.Int32) {
	st := viewStatus()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("X-Nomad-Token") != token {
			http.Error(w, "Permission denied", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/v1/status":
			n.Add(1)
			json.NewEncoder(w).Encode(st)
		case "/v1/jobs/lm":
			j := st.Jobs[0]
			j.History = lmHistory()
			json.NewEncoder(w).Encode(j)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCaptured(t, args...)
	if code != 0 {
		t.Fatalf("rondo %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// lineWith returns the output's line that contains key (fails without one).
func lineWith(t *testing.T, out, key string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, key) {
			return strings.Fields(l)
		}
	}
	t.Fatalf("no line with %q in:\n%s", key, out)
	return nil
}

func TestJobListView(t *testing.T) {
	srv, _ := viewServer(t, "")
	out := mustRun(t, "job", "list", "-rondo-addr", srv.URL)
	if h := lineWith(t, out, "Job"); strings.Join(h, " ") != "Job User VC State GPUs Queue Priority Waiting Progress ETA Reason" {
		t.Errorf("header %v", h)
	}
	for key, want := range map[string]string{
		"lm ":   "lm alice research running 1 v100 - - - 600/1000 (60%) in",
		"gang ": "gang alice research queued 4 #1 2.5 1m35s 0/100 (0%) - waits for a gang of 4 GPUs on one server",
		"low ":  "low carol prod suspended 1 #2 0.4 1h2m 10/20 (50%) - lower priority than lm (1.2)",
		"bad ":  `bad dave research rejected 0 - - - 0/0 - meta rondo.steps = "abc": not a number`,
	} {
		if got := strings.Join(lineWith(t, out, key), " "); !strings.HasPrefix(got, want) {
			t.Errorf("line %q\n got %s\nwant %s...", key, got, want)
		}
	}
	// Filters: -vc, -user, -state (pending: not running, not done).
	out = mustRun(t, "job", "list", "-rondo-addr", srv.URL, "-vc", "research", "-state", "pending")
	if !strings.Contains(out, "gang") || !strings.Contains(out, "bad") || strings.Contains(out, "lm ") || strings.Contains(out, "low") {
		t.Errorf("-vc research -state pending:\n%s", out)
	}
	out = mustRun(t, "job", "list", "-rondo-addr", srv.URL, "-user", "alice", "-state", "running,queued")
	if !strings.Contains(out, "lm ") || !strings.Contains(out, "gang") || strings.Contains(out, "opp") {
		t.Errorf("-user alice:\n%s", out)
	}
	if code, _, errOut := runCaptured(t, "job", "list", "-rondo-addr", srv.URL, "-state", "sleeping"); code != 1 || !strings.Contains(errOut, "want running, queued") {
		t.Errorf("bad -state: %d %s", code, errOut)
	}
	// -json round trips: exactly the filtered jobs of the status.
	var got []agent.JobStatus
	if err := json.Unmarshal([]byte(mustRun(t, "job", "list", "-rondo-addr", srv.URL, "-json", "-state", "done")), &got); err != nil {
		t.Fatal(err)
	}
	if want := viewStatus().Jobs[5:]; !reflect.DeepEqual(got, want) {
		t.Errorf("-json: %+v, want %+v", got, want)
	}
	// -t: a Go template over the JSON, by JSON names.
	out = mustRun(t, "job", "list", "-rondo-addr", srv.URL, "-state", "pending", "-t",
		`{{range .}}{{.id}}:{{.queue_position}}:{{.pending_kind}};{{end}}`)
	if out != "gang:1:gang;low:2:priority;bad:<no value>:rejected;" {
		t.Errorf("-t: %q", out)
	}
}

func TestJobStatusView(t *testing.T) {
	srv, _ := viewServer(t, "")
	// From GET /v1/jobs/lm: the history with its reasons.
	out := mustRun(t, "job", "status", "-rondo-addr", srv.URL, "lm")
	for _, want := range []string{"ID:         lm", "User:       alice", "Namespace:  default", "State:      running",
		"Progress:   600/1000 steps", "Last plan:  keep: kept", "History", "Round  Time", "admit", "placed in its VC's share",
		"suspend", "preempted for gang", "migrate"} {
		if !strings.Contains(out, want) {
			t.Errorf("job status lm lacks %q:\n%s", want, out)
		}
	}
	// Not at /v1/jobs/{id}: from the status, with why it waits.
	out = mustRun(t, "job", "status", "-rondo-addr", srv.URL, "gang")
	for _, want := range []string{"State:      queued", "Pending:    waits for a gang of 4 GPUs on one server: the largest free set of v100 has 3 (gang)",
		"Queue:      #1 in research, priority 2.5", "Waiting:    1m35s"} {
		if !strings.Contains(out, want) {
			t.Errorf("job status gang lacks %q:\n%s", want, out)
		}
	}
	// A rejected job is listed as such, never "unknown to the agent".
	out = mustRun(t, "job", "status", "-rondo-addr", srv.URL, "bad")
	if !strings.Contains(out, "State:      rejected") || !strings.Contains(out, `Pending:    meta rondo.steps = "abc": not a number`) {
		t.Errorf("rejected job:\n%s", out)
	}
	var j agent.JobStatus
	if err := json.Unmarshal([]byte(mustRun(t, "job", "status", "-rondo-addr", srv.URL, "-json", "lm")), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.History) != 3 || j.History[1].Reason != "preempted for gang" {
		t.Errorf("-json history %+v", j.History)
	}
	if out = mustRun(t, "job", "status", "-rondo-addr", srv.URL, "-t", `{{.state}} {{(index .history 0).intent}}`, "lm"); out != "running admit" {
		t.Errorf("-t: %q", out)
	}
	if code, _, errOut := runCaptured(t, "job", "status", "-rondo-addr", srv.URL, "nope"); code != 1 || !strings.Contains(errOut, "unknown to the agent") {
		t.Errorf("unknown job: %d %s", code, errOut)
	}
	if code, _, errOut := runCaptured(t, "job", "status", "-rondo-addr", srv.URL); code != 1 || !strings.Contains(errOut, "want 1 arguments") {
		t.Errorf("no JOB: %d %s", code, errOut)
	}
}

func TestVCStatusView(t *testing.T) {
	srv, _ := viewServer(t, "")
	out := mustRun(t, "vc", "status", "-rondo-addr", srv.URL)
	if got := strings.Join(lineWith(t, out, "fifo_perf"), " "); got != "research fifo_perf 2 2 2.00 1.50 0.75" {
		t.Errorf("research: %s\n%s", got, out)
	}
	if got := strings.Join(lineWith(t, out, "max_min_fairness_perf"), " "); got != "prod max_min_fairness_perf 0 1 0 0 -" {
		t.Errorf("prod: %s", got)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		rows[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{"research k80 0 1 1 0", "research v100 4 1 0 0", "prod k80 4 0 0 1"} {
		if !rows[want] {
			t.Errorf("vc status lacks row %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "vc", "status", "-rondo-addr", srv.URL, "research")
	for _, want := range []string{"VC:       research", "Cells:    v100-node=1", "Jobs:     2 running, 2 pending",
		"GPU time: entitled 2.00 GPU-h, received 1.50 GPU-h (received/entitled 0.75)"} {
		if !strings.Contains(out, want) {
			t.Errorf("vc status research lacks %q:\n%s", want, out)
		}
	}
	var v agent.VC
	if err := json.Unmarshal([]byte(mustRun(t, "vc", "status", "-rondo-addr", srv.URL, "-json", "prod")), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, viewStatus().VCs[1]) {
		t.Errorf("-json prod: %+v", v)
	}
	var vs []agent.VC
	if err := json.Unmarshal([]byte(mustRun(t, "vc", "status", "-rondo-addr", srv.URL, "-json", "-vc", "research")), &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Name != "research" {
		t.Errorf("-json -vc research: %+v", vs)
	}
	if out = mustRun(t, "vc", "status", "-rondo-addr", srv.URL, "-t", `{{range .}}{{.name}} borrowed {{json .borrowed}} lent {{json .lent}}
{{end}}`); out != "research borrowed {\"k80\":1} lent null\nprod borrowed null lent {\"k80\":1}\n" {
		t.Errorf("-t: %q", out)
	}
	if code, _, errOut := runCaptured(t, "vc", "status", "-rondo-addr", srv.URL, "dev"); code != 1 || !strings.Contains(errOut, "its VCs: research, prod") {
		t.Errorf("unknown VC: %d %s", code, errOut)
	}
}

func TestNodeStatusView(t *testing.T) {
	srv, _ := viewServer(t, "")
	out := mustRun(t, "node", "status", "-rondo-addr", srv.URL)
	if got := strings.Join(lineWith(t, out, "5c1d2e3f "), " "); got != "v100-0 5c1d2e3f rondo dgx yes 2 2 2" {
		t.Errorf("node line %s\n%s", got, out)
	}
	for key, want := range map[string]string{
		"GPU-v100-0": "v100-0 GPU-v100-0 v100 healthy 0/0 1 lm",
		"GPU-v100-1": "v100-0 GPU-v100-1 v100 healthy 0/1 0.5 a, b",
		"GPU-k80-1":  "k80-0 GPU-k80-1 k80 unhealthy - - -",
	} {
		if got := strings.Join(lineWith(t, out, key), " "); got != want {
			t.Errorf("GPU %s: %s, want %s", key, got, want)
		}
	}
	// One node by name or id prefix; -vc keeps the GPUs running its jobs.
	out = mustRun(t, "node", "status", "-rondo-addr", srv.URL, "0f3e")
	if !strings.Contains(out, "Node:     k80-0") || !strings.Contains(out, "GPU-k80-0") {
		t.Errorf("node 0f3e:\n%s", out)
	}
	var ns []agent.NodeStatus
	if err := json.Unmarshal([]byte(mustRun(t, "node", "status", "-rondo-addr", srv.URL, "-json", "-vc", "research")), &ns); err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || len(ns[0].GPUs) != 1 || ns[0].GPUs[0].ID != "GPU-k80-0" || len(ns[1].GPUs) != 1 || ns[1].GPUs[0].ID != "GPU-v100-0" {
		t.Errorf("-json -vc research: %+v", ns)
	}
	if out = mustRun(t, "node", "status", "-rondo-addr", srv.URL, "-t", `{{.name}}:{{len .gpus}}`, "v100-0"); out != "v100-0:2" {
		t.Errorf("-t: %q", out)
	}
	if code, _, errOut := runCaptured(t, "node", "status", "-rondo-addr", srv.URL, "nope"); code != 1 || !strings.Contains(errOut, "its nodes: k80-0, v100-0") {
		t.Errorf("unknown node: %d %s", code, errOut)
	}
}

// Every view: the token from -token or NOMAD_TOKEN as X-Nomad-Token, the
// address from RONDO_ADDR when -addr is not given, -watch-count renders
// as many times, a refused token is one line naming the flag.
func TestViewsTokenAddrWatch(t *testing.T) {
	srv, n := viewServer(t, "s3cret")
	t.Setenv("RONDO_ADDR", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("NOMAD_TOKEN", "s3cret")
	for _, args := range [][]string{{"status"}, {"job", "list"}, {"job", "status", "gang"}, {"vc", "status"}, {"node", "status"}} {
		if code, out, errOut := runCaptured(t, args...); code != 0 || out == "" {
			t.Errorf("%v with RONDO_ADDR and NOMAD_TOKEN: %d %s", args, code, errOut)
		}
		n.Store(0)
		code, out, errOut := runCaptured(t, append(args, "-watch-count", "2", "-watch-interval", "10ms")...)
		if code != 0 || n.Load() != 2 {
			t.Errorf("%v -watch-count 2: exit %d, %d fetches: %s", args, code, n.Load(), errOut)
		}
		header := strings.SplitN(out, "\n", 2)[0]
		if c := strings.Count(out, header+"\n"); c != 2 {
			t.Errorf("%v -watch-count 2: %d renders of %q:\n%s", args, c, header, out)
		}
		code, _, errOut = runCaptured(t, append(args, "-token", "wrong")...)
		if code != 1 || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "-token or NOMAD_TOKEN") {
			t.Errorf("%v -token wrong: %d %s", args, code, errOut)
		}
	}
	// -json under -watch: one document per round.
	_, out, _ := runCaptured(t, "vc", "status", "-json", "-watch", "-watch-count", "2", "-watch-interval", "1ms")
	dec := json.NewDecoder(strings.NewReader(out))
	for i := 0; i < 2; i++ {
		var vs []agent.VC
		if err := dec.Decode(&vs); err != nil || len(vs) != 2 {
			t.Fatalf("-json -watch document %d: %v %v\n%s", i, err, vs, out)
		}
	}
	if code, _, errOut := runCaptured(t, "status", "-json", "-t", "{{.round}}"); code != 1 || !strings.Contains(errOut, "exclude each other") {
		t.Errorf("-json -t: %d %s", code, errOut)
	}
}

// -watch renders just after the agent's next round, else every round.
func TestNextRender(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		st   *agent.Status
		want time.Duration
	}{
		{nil, 10 * time.Second},
		{&agent.Status{RoundSeconds: 20}, 20 * time.Second},
		{&agent.Status{RoundSeconds: 20, NextRound: now.Add(2 * time.Second)}, 2500 * time.Millisecond},
		{&agent.Status{RoundSeconds: 20, NextRound: now.Add(-time.Second)}, 20 * time.Second},
		{&agent.Status{RoundSeconds: 20, NextRound: now.Add(time.Hour)}, 20 * time.Second},
	} {
		if got := nextRender(c.st, now); got != c.want {
			t.Errorf("nextRender(%+v): %v, want %v", c.st, got, c.want)
		}
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestWhyWaitingOnNomad (#19): what a user sees of jobs that do not run,
// read as they would, through GET /v1/status and GET /v1/jobs/{id}. One
// client of 2 fake V100s, one VC under FIFO, 2 s rounds:
//
//   - a job with rondo.steps = "abc" is rejected, its reason naming the key
//     and the value (the Nomad backend's rejection);
//   - a job naming a VC the config does not declare is rejected, naming
//     the VC and the declared ones (the agent's);
//   - a 4-GPU job on the 2-GPU cluster is unschedulable, with the largest
//     gang it can ever hold;
//   - a 2-GPU gang submitted while two 1-GPU jobs hold both GPUs waits with
//     the round's own reason (FIFO keeps the older jobs): the gang reason
//     or the priority reason, naming the gang's size or a job ahead; its
//     history has the wait event; no history in /v1/status; an unknown job
//     is a 404 with a JSON error.
func TestWhyWaitingOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	cfg := `round_seconds = 2
vc "research" {
  policy = "fifo"
}
`
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2)}, cfg)
	const model = "ResNet-18 (batch size 64)"
	for _, id := range []string{"one-a", "one-b"} {
		s.submit(id, model, 1000000000, 1)
		time.Sleep(1100 * time.Millisecond) // FIFO's order
	}
	s.submitSpec("bad-steps", strings.Replace(s.jobHCL("bad-steps", model, 1000, 1), `"rondo.steps" = "1000"`, `"rondo.steps" = "abc"`, 1))
	s.submitSpec("lost-vc", strings.Replace(s.jobHCL("lost-vc", model, 1000, 1), `"rondo.vc"    = "research"`, `"rondo.vc"    = "nowhere"`, 1))
	s.submitSpec("huge", strings.Replace(s.jobHCL("huge", model, 1000, 1), "count = 1", "count = 4", 1))
	a := s.startAgent("2s")
	t0 := time.Now()

	byID := func(st agent.Status) map[string]agent.JobStatus {
		out := map[string]agent.JobStatus{}
		for _, j := range st.Jobs {
			out[j.ID] = j
		}
		return out
	}
	var st agent.Status
	s.waitFor(60*time.Second, "one-a and one-b running, the others rejected or unschedulable", func() (bool, error) {
		st = s.status(a)
		js := byID(st)
		return js["one-a"].State == "running" && js["one-b"].State == "running" && js["bad-steps"].State == "rejected" &&
			js["lost-vc"].State == "rejected" && js["huge"].State == "unschedulable", nil
	})
	t.Logf("%.1fs: round %d, the two 1-GPU jobs run", time.Since(t0).Seconds(), st.Round)
	js := byID(st)
	if j := js["bad-steps"]; j.PendingKind != "rejected" || !strings.Contains(j.Pending, `rondo.steps = "abc"`) || j.VC != "research" {
		t.Errorf("bad-steps: %+v", j)
	}
	if j := js["lost-vc"]; j.PendingKind != "rejected" || j.Pending != `VC "nowhere" is not declared (declared: research)` {
		t.Errorf("lost-vc: %+v", j)
	}
	if j := js["huge"]; j.PendingKind != "unschedulable" ||
		!strings.Contains(j.Pending, "a gang of 4 GPUs, the most it can ever hold is 2 (v100)") || j.QueuePosition != 0 {
		t.Errorf("huge: %+v", j)
	}
	for _, id := range []string{"bad-steps", "lost-vc", "huge"} {
		t.Logf("%s: %s: %s", id, js[id].State, js[id].Pending)
	}

	s.submitSpec("gang", strings.Replace(s.jobHCL("gang", model, 1000000000, 1), "count = 1", "count = 2", 1))
	var gang agent.JobStatus
	s.waitFor(30*time.Second, "the gang waiting with a reason", func() (bool, error) {
		st = s.status(a)
		gang = byID(st)["gang"]
		return gang.PendingKind != "", nil
	})
	t.Logf("%.1fs: round %d: gang %s (%s), position %d, priority %g, waited %.1fs", time.Since(t0).Seconds(), st.Round,
		gang.Pending, gang.PendingKind, gang.QueuePosition, gang.Priority, gang.WaitS)
	switch gang.PendingKind {
	case "gang":
		if !strings.Contains(gang.Pending, "a gang of 2 GPUs") {
			t.Errorf("gang reason without the gang's size: %q", gang.Pending)
		}
	case "priority":
		if !strings.Contains(gang.Pending, "one-a") && !strings.Contains(gang.Pending, "one-b") {
			t.Errorf("priority reason naming no job ahead: %q", gang.Pending)
		}
	default:
		t.Errorf("gang: kind %q (%q), want gang or priority", gang.PendingKind, gang.Pending)
	}
	if gang.State != "queued" || gang.QueuePosition != 1 {
		t.Errorf("gang: state %q, position %d", gang.State, gang.QueuePosition)
	}
	for _, id := range []string{"one-a", "one-b"} {
		if j := byID(st)[id]; j.State != "running" || j.Pending != "" || j.WaitS != 0 {
			t.Errorf("%s: %+v", id, j)
		}
	}

	// /v1/status carries no history; /v1/jobs/{id} does.
	if raw := s.get(a, "/v1/status"); strings.Contains(raw, `"history"`) {
		t.Errorf("/v1/status carries histories")
	}
	var one agent.JobStatus
	if err := json.Unmarshal([]byte(s.get(a, "/v1/jobs/gang")), &one); err != nil {
		t.Fatal(err)
	}
	if one.ID != "gang" || len(one.History) == 0 || one.History[0].Intent != "wait" || one.History[0].Reason == "" {
		t.Errorf("/v1/jobs/gang: %+v", one)
	}
	if err := json.Unmarshal([]byte(s.get(a, "/v1/jobs/bad-steps")), &one); err != nil {
		t.Fatal(err)
	}
	if one.State != "rejected" || len(one.History) != 1 || one.History[0].Intent != "reject" {
		t.Errorf("/v1/jobs/bad-steps: %+v", one)
	}
	if err := json.Unmarshal([]byte(s.get(a, "/v1/jobs/one-a")), &one); err != nil {
		t.Fatal(err)
	}
	if one.State != "running" || len(one.History) == 0 || one.History[0].Intent != "admit" {
		t.Errorf("/v1/jobs/one-a: %+v", one)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/v1/jobs/nope", a.addr), nil)
	req.Header.Set("X-Nomad-Token", s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg map[string]string
	if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &msg) != nil || msg["error"] == "" {
		t.Errorf("/v1/jobs/nope: %s %s", resp.Status, body)
	}
	// The agent's one-time warning for the bad meta is still there.
	if !strings.Contains(a.logs(), "job ignored: bad rondo meta") {
		t.Errorf("no warning for bad-steps in the agent's log")
	}
}

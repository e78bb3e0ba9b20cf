package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
)

// TestStatusAPIOnNomad (#19): the status API of `rondo agent` on the cells
// cluster with ACLs on. Without a token GET /v1/status is 401, with a
// token Nomad does not know 403 (JSON errors), with the allocator's own
// client token (header, bearer or ?token=) 200 and leader=true; /metrics
// and /v1/health are open, and after a few rounds /metrics has the new
// names. A second agent on the same cluster waits for the leader lock,
// keeps serving its status API with leader=false and the leader's address;
// when the leader stops it takes over.
func TestStatusAPIOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStack(t)
	a := s.startStatusAgent("-lease-addr", s.leaseAddr)
	base := "http://" + a.addr

	// Authentication.
	waitHTTP(t, base+"/v1/health", 30*time.Second)
	for _, c := range []struct {
		name, query string
		hdr         []string
		code        int
	}{
		{"no token", "", nil, 401},
		{"unknown token", "", []string{"X-Nomad-Token", "00000000-0000-0000-0000-000000000000"}, 403},
		{"header", "", []string{"X-Nomad-Token", s.token}, 200},
		{"bearer", "", []string{"Authorization", "Bearer " + s.c.ManagementToken}, 200},
		{"query", "?token=" + s.token, nil, 200},
	} {
		code, body := fetch(t, base+"/v1/status"+c.query, c.hdr...)
		if code != c.code {
			t.Errorf("%s: GET /v1/status: %d, want %d: %s", c.name, code, c.code, body)
			continue
		}
		if code != 200 {
			var e map[string]string
			if json.Unmarshal([]byte(body), &e) != nil || e["error"] == "" {
				t.Errorf("%s: not a JSON error: %s", c.name, body)
			}
		}
	}
	for _, open := range []string{"/metrics", "/v1/health"} {
		if code, body := fetch(t, base+open); code != 200 {
			t.Errorf("GET %s without a token: %d %s", open, code, body)
		}
	}

	// Leader, version, and the metrics after a few rounds.
	s.submit("statusapi-1", "LM (batch size 20)", 100000, 1)
	var st agent.Status
	s.waitFor(60*time.Second, "three rounds", func() (bool, error) {
		st = statusWithToken(t, base, s.token)
		return st.Round >= 3, nil
	})
	if !st.Leader || st.LeaderAddr != "" || st.Version == "" {
		t.Errorf("leader status: leader=%v leader_addr=%q version=%q", st.Leader, st.LeaderAddr, st.Version)
	}
	_, metrics := fetch(t, base+"/metrics")
	for _, want := range []string{"rondo_round_duration_seconds_bucket{le=", `rondo_jobs_pending{reason="over_quota"}`,
		"rondo_build_info{goversion=", "rondo_leader 1", "rondo_rounds_total", `rondo_jobs{state="running",vc="research"}`,
		`rondo_vc_quota_gpus{type="v100",vc="research"} 2`, `rondo_decisions_total{kind="admit"} 1`,
		"rondo_admission_wait_seconds_count 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, tail(metrics, 4000))
		}
	}
	if strings.Contains(metrics, "_ms") {
		t.Errorf("/metrics has a metric in milliseconds:\n%s", tail(metrics, 4000))
	}

	// A standby: its own status API, leader=false, the leader's address.
	b := s.startStatusAgent()
	bbase := "http://" + b.addr
	waitHTTP(t, bbase+"/v1/health", 30*time.Second)
	s.waitFor(30*time.Second, "the standby names the leader", func() (bool, error) {
		st = statusWithToken(t, bbase, s.token)
		return st.LeaderAddr != "", nil
	})
	if st.Leader || st.LeaderAddr != base {
		t.Errorf("standby: leader=%v leader_addr=%q, want false and %q", st.Leader, st.LeaderAddr, base)
	}
	if _, m := fetch(t, bbase+"/metrics"); !strings.Contains(m, "rondo_leader 0") {
		t.Errorf("standby /metrics lacks rondo_leader 0")
	}
	if st := statusWithToken(t, base, s.token); !st.Leader {
		t.Errorf("the leader says leader=false")
	}

	// The leader stops (releasing the lock): the standby takes over.
	a.stop()
	s.waitFor(40*time.Second, "the standby takes over", func() (bool, error) {
		st = statusWithToken(t, bbase, s.token)
		return st.Leader, nil
	})
	if st.LeaderAddr != "" {
		t.Errorf("new leader: leader_addr %q", st.LeaderAddr)
	}
	if _, m := fetch(t, bbase+"/metrics"); !strings.Contains(m, "rondo_leader 1") {
		t.Errorf("new leader's /metrics lacks rondo_leader 1")
	}
	b.stop()
}

// startStatusAgent starts `rondo agent` with the stack's config and token
// on a free status port, 2 s rounds and no lease API (two of them run on
// one stack); extra flags follow.
func (s *stack) startStatusAgent(extra ...string) *agentProc {
	s.t.Helper()
	return s.runAgent(append([]string{"-round", "2s"}, extra...)...)
}

// fetch GETs url with header pairs; it returns the status code and body.
func fetch(t *testing.T, url string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func statusWithToken(t *testing.T, base, token string) agent.Status {
	t.Helper()
	code, body := fetch(t, base+"/v1/status", "X-Nomad-Token", token)
	var st agent.Status
	if code != 200 {
		t.Fatalf("GET %s/v1/status: %d %s", base, code, body)
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitHTTP waits until url answers at all (the agent is listening).
func waitHTTP(t *testing.T, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestStatusAPITokensOnNomad: the Authorizer against a real Nomad agent,
// with ACLs off (as in `make run`'s demo: every request allowed, with or
// without a token; Nomad answers token/self with its "ACLs disabled"
// token) and on (no token 401, an unknown token 403, the management
// token allowed).
func TestStatusAPITokensOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	if testing.Short() {
		t.Skip("e2e: starts Nomad agents")
	}
	ctx := context.Background()
	code := func(err error) int {
		var ae *agent.AuthError
		if errors.As(err, &ae) {
			return ae.Code
		}
		if err != nil {
			return -1
		}
		return 200
	}
	off := StartAgent(t, AgentOptions{Name: "acl-off"})
	auth := &rnomad.Authorizer{Client: off.Client()}
	for _, tok := range []string{"", "00000000-0000-0000-0000-000000000000"} {
		if err := auth.Authorize(ctx, tok); err != nil {
			t.Errorf("ACLs off, token %q: %v, want allowed", tok, err)
		}
	}
	off.Stop()

	on := StartAgent(t, AgentOptions{Name: "acl-on", ACL: true})
	auth = &rnomad.Authorizer{Client: on.Client()}
	for tok, want := range map[string]int{"": 401, "00000000-0000-0000-0000-000000000000": 403, on.ManagementToken: 200} {
		if got := code(auth.Authorize(ctx, tok)); got != want {
			t.Errorf("ACLs on, token %q: %d, want %d", tok, got, want)
		}
	}
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rondo-sched/rondo/allocator/telemetry"
)

// TestStatusAuth: the guard's routing of tokens and refusals (the Nomad
// Authorizer itself runs against real Nomad in e2e/statusapi_test.go).
func TestStatusAuth(t *testing.T) {
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	auth := func(_ context.Context, token string) error {
		switch token {
		case "":
			return &AuthError{Code: 401, Msg: "a Nomad ACL token is required"}
		case "good":
			return nil
		case "down":
			return errors.New("nomad unreachable")
		}
		return &AuthError{Code: 403, Msg: "token not accepted"}
	}
	a := New(Config{Cluster: "test", Telemetry: tel, Authorizer: auth})
	a.SetLeader(false, "http://10.0.0.1:4700")
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(path string, hdr ...string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if path != "/metrics" {
			json.NewDecoder(resp.Body).Decode(&m)
		}
		return resp.StatusCode, m
	}
	for _, c := range []struct {
		path string
		hdr  []string
		code int
	}{
		{"/metrics", nil, 200},
		{"/v1/health", nil, 200},
		{"/v1/health?leader", nil, 503}, // a standby
		{"/v1/status", nil, 401},
		{"/v1/status", []string{"X-Nomad-Token", "bad"}, 403},
		{"/v1/status", []string{"X-Nomad-Token", "down"}, 503},
		{"/v1/status", []string{"X-Nomad-Token", "good"}, 200},
		{"/v1/status", []string{"Authorization", "Bearer good"}, 200},
		{"/v1/status?token=good", nil, 200},
		{"/v1/timeline", nil, 401},
		{"/v1/jobs/a", nil, 401},
		// The page's files hold no data: open, as Nomad's UI (withPage);
		// the page sends its token with each API request.
		{"/ui", nil, 200}, // redirected to /ui/
		{"/ui/app.js", nil, 200},
	} {
		code, body := get(c.path, c.hdr...)
		if code != c.code {
			t.Errorf("GET %s %v: %d, want %d (%v)", c.path, c.hdr, code, c.code, body)
		}
		if code >= 400 && body["error"] == nil {
			t.Errorf("GET %s %v: no JSON error: %v", c.path, c.hdr, body)
		}
		if c.path == "/v1/status" && code == 200 && (body["leader"] != false || body["leader_addr"] != "http://10.0.0.1:4700" || body["version"] == "") {
			t.Errorf("status: leader %v at %v, version %v", body["leader"], body["leader_addr"], body["version"])
		}
	}
	// Without an Authorizer everything is open; an agent leads until told.
	b := New(Config{Cluster: "test"})
	if !b.Status().Leader {
		t.Error("a new agent is not the leader")
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/status", nil))
	if rec.Code != 200 {
		t.Errorf("no Authorizer: %d", rec.Code)
	}
	// The leader passes the leader-only health check.
	rec = httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/health?leader", nil))
	if rec.Code != 200 {
		t.Errorf("health?leader on the leader: %d", rec.Code)
	}
}

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLeaseFront: a standby forwards lease calls (token and body included)
// to the leader it last read, answers 503 while it knows none or when the
// call was forwarded already (no circles), and the leader answers itself.
func TestLeaseFront(t *testing.T) {
	var got atomic.Value
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization") + " " + string(b) + " " + r.Header.Get(forwardedHeader))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer leader.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	var leads atomic.Bool
	f := &leaseFront{self: "http://10.0.0.2:4701", local: local, leads: leads.Load}
	srv := httptest.NewServer(f)
	defer srv.Close()
	post := func(hdr ...string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/jobs/j/progress", strings.NewReader(`{"steps_done":5}`))
		req.Header.Set("Authorization", "Bearer jwt")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(); c != http.StatusServiceUnavailable {
		t.Errorf("standby without a leader: %d, want 503", c)
	}
	f.follow(f.self) // its own stale info: never forward to itself
	if c := post(); c != http.StatusServiceUnavailable {
		t.Errorf("standby following itself: %d, want 503", c)
	}
	f.follow(leader.URL)
	if c := post(); c != http.StatusNoContent {
		t.Errorf("forwarded: %d, want 204", c)
	}
	if g, want := got.Load(), `POST /v1/jobs/j/progress Bearer jwt {"steps_done":5} http://10.0.0.2:4701`; g != want {
		t.Errorf("the leader got %q, want %q", g, want)
	}
	if c := post(forwardedHeader, "http://10.0.0.3:4701"); c != http.StatusServiceUnavailable {
		t.Errorf("forwarded twice: %d, want 503", c)
	}
	leads.Store(true)
	if c := post(); c != http.StatusTeapot {
		t.Errorf("leader: %d, want its own answer", c)
	}
}

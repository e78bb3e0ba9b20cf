package main

import (
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// forwardedHeader marks a lease call a standby forwarded, so that two
// standbys with stale leader info never forward it in a circle.
const forwardedHeader = "X-Rondo-Forwarded"

// leaseFront serves the lease API: the leader answers itself, a standby
// forwards to the leader's lease API (published in the leader info,
// state.LeaderInfo.LeaseAddr). Only the leader decides leases, and
// Nomad's service discovery hands tasks every instance, healthy or not
// (jobs/deploy/rondo-agent.nomad.hcl), so any instance must lead them there.
type leaseFront struct {
	self  string // this agent's lease URL, as published
	local http.Handler
	leads func() bool
	// transport calls the leader (nil: the default; listenerTLS.transport
	// under tls {}).
	transport http.RoundTripper
	leader    atomic.Pointer[url.URL]
}

// url is this agent's lease URL ("" without a lease API).
func (f *leaseFront) url() string {
	if f == nil {
		return ""
	}
	return f.self
}

// follow records the leader's lease URL (from the leader info).
func (f *leaseFront) follow(leaseURL string) {
	if f == nil {
		return
	}
	u, err := url.Parse(leaseURL)
	if leaseURL == "" || leaseURL == f.self || err != nil || u.Host == "" {
		f.leader.Store(nil)
		return
	}
	f.leader.Store(u)
}

func (f *leaseFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.leads() {
		f.local.ServeHTTP(w, r)
		return
	}
	target := f.leader.Load()
	if target == nil || r.Header.Get(forwardedHeader) != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": "this agent is a standby and knows no leader yet; retry"})
		return
	}
	p := &httputil.ReverseProxy{
		Transport: f.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, f.self)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			json.NewEncoder(w).Encode(map[string]string{"error": "forwarding to the leader: " + err.Error()})
		},
	}
	p.ServeHTTP(w, r)
}

package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	rhcl "github.com/rondo-sched/rondo/hcl"
)

// One precedence for every Nomad connection setting: a flag beats Nomad's
// environment variable, which beats the config file's nomad {} block.
func TestNomadConnPrecedence(t *testing.T) {
	for _, k := range []string{"NOMAD_ADDR", "NOMAD_TOKEN", "NOMAD_NAMESPACE", "NOMAD_REGION", "NOMAD_CACERT", "NOMAD_CLIENT_CERT",
		"NOMAD_CLIENT_KEY", "NOMAD_TLS_SERVER_NAME", "NOMAD_SKIP_VERIFY", "NOMAD_CAPATH"} {
		t.Setenv(k, "")
	}
	file := rhcl.Nomad{Address: "https://file:4646", Token: "file-token", Namespace: "file-ns", Region: "file-region",
		CAFile: "/file/ca.pem", CertFile: "/file/cert.pem", KeyFile: "/file/key.pem", TLSServerName: "file.nomad"}
	type got struct{ addr, token, ns, region, ca, cert, key, name string }
	conf := func(t *testing.T, args ...string) got {
		t.Helper()
		var n nomadFlags
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := n.config(file)
		if err != nil {
			t.Fatal(err)
		}
		tc := c.TLSConfig
		return got{c.Address, c.SecretID, c.Namespace, c.Region, tc.CACert, tc.ClientCert, tc.ClientKey, tc.TLSServerName}
	}
	if g := conf(t); g != (got{"https://file:4646", "file-token", "file-ns", "file-region", "/file/ca.pem", "/file/cert.pem", "/file/key.pem", "file.nomad"}) {
		t.Fatalf("file only: %+v", g)
	}
	env := map[string]string{"NOMAD_ADDR": "https://env:4646", "NOMAD_TOKEN": "env-token", "NOMAD_NAMESPACE": "env-ns",
		"NOMAD_REGION": "env-region", "NOMAD_CACERT": "/env/ca.pem", "NOMAD_CLIENT_CERT": "/env/cert.pem",
		"NOMAD_CLIENT_KEY": "/env/key.pem", "NOMAD_TLS_SERVER_NAME": "env.nomad"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	if g := conf(t); g != (got{"https://env:4646", "env-token", "env-ns", "env-region", "/env/ca.pem", "/env/cert.pem", "/env/key.pem", "env.nomad"}) {
		t.Fatalf("env over file: %+v", g)
	}
	g := conf(t, "-address", "https://flag:4646", "-token", "flag-token", "-namespace", "flag-ns", "-region", "flag-region",
		"-ca-cert", "/flag/ca.pem", "-client-cert", "/flag/cert.pem", "-client-key", "/flag/key.pem", "-tls-server-name", "flag.nomad")
	if g != (got{"https://flag:4646", "flag-token", "flag-ns", "flag-region", "/flag/ca.pem", "/flag/cert.pem", "/flag/key.pem", "flag.nomad"}) {
		t.Fatalf("flags over env: %+v", g)
	}
	// Field by field: a flag for one setting leaves the others to the env.
	if g := conf(t, "-ca-cert", "/flag/ca.pem"); g.ca != "/flag/ca.pem" || g.addr != "https://env:4646" || g.cert != "/env/cert.pem" {
		t.Fatalf("one flag: %+v", g)
	}
}

// The event stream's client is the agent's, less the per-request bound
// (-nomad-timeout would cut the hours-long stream): same transport (TLS,
// connections), token and address.
func TestStreamConfigDropsRequestTimeout(t *testing.T) {
	nc := &api.Config{Address: "https://nomad:4646", SecretID: "tok", TLSConfig: &api.TLSConfig{}}
	if err := withTimeout(nc, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	s := streamConfig(nc)
	if s.HttpClient == nc.HttpClient || s.HttpClient.Timeout != 0 || nc.HttpClient.Timeout != 15*time.Second {
		t.Fatalf("stream client timeout %v, agent's %v", s.HttpClient.Timeout, nc.HttpClient.Timeout)
	}
	if s.HttpClient.Transport != nc.HttpClient.Transport || s.Address != nc.Address || s.SecretID != nc.SecretID {
		t.Fatalf("stream config differs beyond the timeout: %+v", s)
	}
}

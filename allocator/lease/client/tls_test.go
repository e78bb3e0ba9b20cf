package client

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/internal/testca"
)

// An https lease API with a private CA: trusted through RONDO_CACERT,
// refused without it.
func TestClientFromEnvTLS(t *testing.T) {
	ca, err := testca.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := ca.Issue("agent", "localhost", nil, testca.Localhost)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	r := &rec{}
	srv := httptest.NewUnstartedServer((&lease.Server{Verifier: fakeVerifier{}, Decider: r, Sink: r}).Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	t.Setenv("RONDO_LEASE_ADDR", srv.URL)
	t.Setenv("NOMAD_JOB_ID", "train")
	t.Setenv("NOMAD_ALLOC_ID", "a1")
	t.Setenv("NOMAD_TOKEN_rondo", "train:a1")
	t.Setenv("RONDO_IDENTITY_FILE", "")
	t.Setenv("RONDO_CLIENT_CERT", "")
	t.Setenv("RONDO_CLIENT_KEY", "")

	t.Setenv("RONDO_CACERT", "")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Report(context.Background(), 10, 1, "v100"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without RONDO_CACERT: %v, want a certificate error", err)
	}
	t.Setenv("RONDO_CACERT", ca.CertFile)
	if c, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	if err := c.Report(context.Background(), 10, 1, "v100"); err != nil {
		t.Fatalf("with RONDO_CACERT: %v", err)
	}
	t.Setenv("RONDO_CACERT", ca.CertFile+".missing")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "CA certificate") {
		t.Fatalf("a missing RONDO_CACERT file: %v", err)
	}
}

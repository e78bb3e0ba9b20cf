package rondotls

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/internal/testca"
)

func TestHTTPClientPrivateCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, sk, err := ca.Issue("server", "localhost", nil, testca.Localhost)
	if err != nil {
		t.Fatal(err)
	}
	cc, ck, err := ca.Issue("client", "client", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(sc, sk)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca.CertFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	var wantCert atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantCert.Load() && len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusForbidden)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()

	get := func(f Files) error {
		hc, err := f.HTTPClient(5 * time.Second)
		if err != nil {
			return err
		}
		resp, err := hc.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(Files{CACert: ca.CertFile}); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if err := get(Files{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	// RONDO_CACERT when no file is given; a given one wins.
	t.Setenv(EnvCACert, ca.CertFile)
	if err := get(Files{}.FromEnv()); err != nil {
		t.Fatalf("with RONDO_CACERT: %v", err)
	}
	if f := (Files{CACert: "/flag.pem"}).FromEnv(); f.CACert != "/flag.pem" {
		t.Fatalf("the flag's CA lost to the environment: %+v", f)
	}
	// A client certificate is presented when asked for.
	wantCert.Store(true)
	hc, err := Files{CACert: ca.CertFile, ClientCert: cc, ClientKey: ck}.HTTPClient(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("with a client certificate: %v %v", resp, err)
	}
	resp.Body.Close()

	for _, f := range []Files{{CACert: dir + "/none.pem"}, {CACert: sk}, {ClientCert: cc}, {ClientCert: cc, ClientKey: dir + "/none.pem"}} {
		if _, err := f.Config(); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}

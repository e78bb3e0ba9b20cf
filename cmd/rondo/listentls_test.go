package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/internal/rondotls"
	"github.com/rondo-sched/rondo/internal/testca"
)

// The listeners under tls {}: HTTPS with the block's certificate, client
// certificates required with verify_https_client, a renewed certificate
// at the same paths served after a reload.
func TestListenerTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := ca.Issue("agent", "localhost", nil, testca.Localhost)
	if err != nil {
		t.Fatal(err)
	}
	ccf, ckf, err := ca.Issue("client", "client", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(cfg rhcl.TLS) (*listenerTLS, string) {
		l, err := newListenerTLS(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, scheme, err := l.listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return l, scheme + "://" + ln.Addr().String()
	}
	get := func(url string, f rondotls.Files) (*http.Response, error) {
		hc, err := f.HTTPClient(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	l, url := serve(rhcl.TLS{CertFile: cf, KeyFile: kf})
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("url %s", url)
	}
	resp, err := get(url, rondotls.Files{CACert: ca.CertFile})
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	serial := resp.TLS.PeerCertificates[0].SerialNumber
	if _, err := get(url, rondotls.Files{}); err == nil {
		t.Fatal("a certificate of a private CA was trusted without it")
	}
	// A renewed certificate at the same paths: served after reload.
	if _, _, err := ca.Issue("agent", "localhost", nil, testca.Localhost); err != nil {
		t.Fatal(err)
	}
	if err := l.reload(rhcl.TLS{CertFile: cf, KeyFile: kf}); err != nil {
		t.Fatal(err)
	}
	if resp, err = get(url, rondotls.Files{CACert: ca.CertFile}); err != nil || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(serial) == 0 {
		t.Fatalf("after a reload: %v, the old certificate still served", err)
	}
	// A broken file on reload keeps the certificate in force.
	other, err := os.ReadFile(ckf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.reload(rhcl.TLS{CertFile: cf, KeyFile: kf}); err == nil {
		t.Fatal("a mismatched key was loaded")
	}
	if _, err = get(url, rondotls.Files{CACert: ca.CertFile}); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}

	if _, _, err := ca.Issue("agent", "localhost", nil, testca.Localhost); err != nil {
		t.Fatal(err)
	}
	// verify_https_client: no client certificate, no answer.
	_, url = serve(rhcl.TLS{CertFile: cf, KeyFile: kf, CAFile: ca.CertFile, VerifyHTTPSClient: true})
	if _, err := get(url, rondotls.Files{CACert: ca.CertFile}); err == nil {
		t.Fatal("verify_https_client: a client without a certificate was served")
	}
	if _, err := get(url, rondotls.Files{CACert: ca.CertFile, ClientCert: ccf, ClientKey: ckf}); err != nil {
		t.Fatalf("verify_https_client with a client certificate: %v", err)
	}
	// No block: plain http.
	if l, err := newListenerTLS(rhcl.TLS{}); err != nil || l != nil {
		t.Fatalf("no tls block: %v %v", l, err)
	}
	var nl *listenerTLS
	ln, scheme, err := nl.listen("127.0.0.1:0")
	if err != nil || scheme != "http" {
		t.Fatalf("plain listen: %s %v", scheme, err)
	}
	ln.Close()
	if _, err := newListenerTLS(rhcl.TLS{CertFile: cf, KeyFile: dir + "/none.pem"}); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Fatalf("missing key: %v", err)
	}
}

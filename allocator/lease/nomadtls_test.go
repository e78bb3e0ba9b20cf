package lease

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/hashicorp/nomad/api"
)

// tlsJWKS serves a key set over HTTPS with httptest's own CA (a private
// CA, as a Nomad with TLS has) and returns it with that CA's PEM file.
func tlsJWKS(t *testing.T) (*jwks, string) {
	j := &jwks{}
	j.add("k1", rsaKeys()[0].Public(), jose.RS256)
	j.srv = httptest.NewTLSServer(j.handler())
	t.Cleanup(j.srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: j.srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return j, ca
}

func TestNomadJWKSVerifierTLS(t *testing.T) {
	j, ca := tlsJWKS(t)
	tok := signer{kid: "k1", alg: jose.RS256, key: rsaKeys()[0]}.token(t, claims("train", "a1"))

	// The agent's Nomad config with the CA: the JWKS comes over TLS.
	v, err := NewNomadJWKSVerifier(&api.Config{Address: j.srv.URL, TLSConfig: &api.TLSConfig{CACert: ca}}, "rondo-lease")
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(context.Background(), tok)
	if err != nil || id.Job != "train" || id.Alloc != "a1" {
		t.Fatalf("verify over TLS: %+v, %v", id, err)
	}

	// Without the CA (the bare client of before): the certificate is
	// refused, and the failure is the keys', not the caller's token.
	v, err = NewNomadJWKSVerifier(&api.Config{Address: j.srv.URL, TLSConfig: &api.TLSConfig{}}, "rondo-lease")
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(context.Background(), tok)
	if err == nil || !errors.Is(err, errKeyUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("verify without the CA: %v, want a certificate error", err)
	}

	// A CA file that does not exist fails at construction.
	if _, err := NewNomadJWKSVerifier(&api.Config{Address: j.srv.URL, TLSConfig: &api.TLSConfig{CACert: ca + ".missing"}}); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}

// The Task API: Nomad's API on a unix socket in the task's secrets dir.
func TestNomadJWKSVerifierUnixSocket(t *testing.T) {
	j := &jwks{}
	j.add("k1", rsaKeys()[0].Public(), jose.RS256)
	dir, err := os.MkdirTemp("", "jwks") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the handler runs on the server's goroutine
	var paths []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.Header.Get("X-Nomad-Token") != "wi-token" { // as the Task API: every request authenticated
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		j.handler().ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	v, err := NewNomadJWKSVerifier(&api.Config{Address: "unix://" + sock, SecretID: "wi-token", TLSConfig: &api.TLSConfig{}}, "rondo-lease")
	if err != nil {
		t.Fatal(err)
	}
	tok := signer{kid: "k1", alg: jose.RS256, key: rsaKeys()[0]}.token(t, claims("train", "a1"))
	id, err := v.Verify(context.Background(), tok)
	if err != nil || id.Job != "train" {
		t.Fatalf("verify over the socket: %+v, %v", id, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "/.well-known/jwks.json" {
		t.Fatalf("socket requests %v, want one GET /.well-known/jwks.json", paths)
	}
}

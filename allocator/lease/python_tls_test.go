package lease

import (
	"crypto/tls"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rondo-sched/rondo/internal/testca"
)

// TestPythonClientTLS: the Python client (jobs/python/rondo, stdlib only)
// reaches an https lease API with a private CA through RONDO_CACERT and
// fails on the certificate without it.
func TestPythonClientTLS(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("no python3")
		}
	}
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
	j := newJWKS(t)
	j.add("py", rsaKeys()[0].Public(), jose.RS256)
	rec := &recorder{}
	srv := httptest.NewUnstartedServer((&Server{Verifier: &JWKSVerifier{URL: j.srv.URL, Audiences: []string{"rondo-lease"}},
		Decider: rec, Sink: rec, Logf: t.Logf}).Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	tok := signer{kid: "py", alg: jose.RS256, key: rsaKeys()[0]}.token(t, claims("train", "a1"))

	dir, err := filepath.Abs("../../jobs/python")
	if err != nil {
		t.Fatal(err)
	}
	script := `
import sys
from rondo.client import Client, LeaseAPIError
c = Client.from_env()
try:
    c.report(steps_done=5, steps_per_s=1.0, gpu_type="v100")
    print("ok", c.lease().continue_)
except LeaseAPIError as e:
    print("error", e)
`
	run := func(cacert string) string {
		env := []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1", "RONDO_LEASE_ADDR=" + srv.URL,
			"NOMAD_JOB_ID=train", "NOMAD_ALLOC_ID=a1", "NOMAD_NAMESPACE=default", "NOMAD_TOKEN_rondo=" + tok,
			"PATH=" + os.Getenv("PATH")}
		if cacert != "" {
			env = append(env, "RONDO_CACERT="+cacert)
		}
		cmd := exec.Command(py, "-c", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("python: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run(ca.CertFile); out != "ok True" {
		t.Fatalf("with RONDO_CACERT: %q", out)
	}
	rec.mu.Lock()
	n := len(rec.reports)
	rec.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d reports over TLS, want 1", n)
	}
	if out := run(""); !strings.HasPrefix(out, "error") || !strings.Contains(out, "CERTIFICATE_VERIFY_FAILED") {
		t.Fatalf("without RONDO_CACERT: %q, want a certificate error", out)
	}
}

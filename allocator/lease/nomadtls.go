package lease

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// NewNomadJWKSVerifier returns a verifier that fetches the JWKS from the
// Nomad agent nc names, the way the agent's own Nomad client talks to it:
// with nc's TLS settings (CA, client certificate, server name, skip
// verify) for an https address, or through the socket for a unix:// one
// (the Task API). nc must be the config before api.NewClient, which
// rewrites a unix:// address to http://127.0.0.1.
func NewNomadJWKSVerifier(nc *api.Config, audiences ...string) (*JWKSVerifier, error) {
	u, err := url.Parse(nc.Address)
	if err != nil {
		return nil, fmt.Errorf("nomad address %q: %w", nc.Address, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	base := strings.TrimRight(nc.Address, "/")
	if u.Scheme == "unix" {
		sock := u.Path
		if sock == "" {
			return nil, fmt.Errorf("nomad address %q: no socket path", nc.Address)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		base = "http://127.0.0.1" // the host is ignored; the dialer picks the socket
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// As api.NewClient: the TLS settings apply to every address but the
	// socket (a bad CA file fails here, not at the first token).
	if u.Scheme != "unix" {
		if err := api.ConfigureTLS(hc, nc.TLSConfig); err != nil {
			return nil, fmt.Errorf("nomad TLS: %w", err)
		}
	}
	if u.Scheme == "unix" && nc.SecretID != "" {
		// The Task API authenticates every request, the public JWKS
		// included: the agent's own token (its workload identity).
		hc.Transport = withToken{next: tr, token: nc.SecretID}
	}
	v := NewJWKSVerifier(base, audiences...)
	v.HTTPClient = hc
	return v, nil
}

// withToken sends a Nomad token with each request.
type withToken struct {
	next  http.RoundTripper
	token string
}

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Nomad-Token", t.token)
	return t.next.RoundTrip(r)
}

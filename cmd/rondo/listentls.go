package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	rhcl "github.com/rondo-sched/rondo/hcl"
)

// listenerTLS serves the agent's status and lease APIs over HTTPS as the
// config's tls {} block says. The certificate is read again on a reload
// (a renewed certificate at the same paths takes effect without a
// restart); the block's other settings take a restart.
type listenerTLS struct {
	cfg  rhcl.TLS
	cert atomic.Pointer[tls.Certificate]
}

// newListenerTLS loads the block's files; nil when the block is absent.
func newListenerTLS(t rhcl.TLS) (*listenerTLS, error) {
	if !t.Enabled() {
		return nil, nil
	}
	l := &listenerTLS{cfg: t}
	if err := l.reload(t); err != nil {
		return nil, err
	}
	return l, nil
}

// reload reads the certificate and key again (the same paths as at start:
// others take a restart) and serves them.
func (l *listenerTLS) reload(t rhcl.TLS) error {
	cert, err := l.load(t)
	if err != nil {
		return err
	}
	l.use(cert)
	return nil
}

// load reads the certificate and key at t's paths without serving them
// (use does, once a SIGHUP reload is accepted); nil, nil when the paths
// are not those at start (a restart takes them) or l is nil (no tls {}).
func (l *listenerTLS) load(t rhcl.TLS) (*tls.Certificate, error) {
	if l == nil || t.CertFile != l.cfg.CertFile || t.KeyFile != l.cfg.KeyFile {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s, key_file %s: %w", t.CertFile, t.KeyFile, err)
	}
	return &cert, nil
}

// use serves cert from now on (nil: keep the one in force).
func (l *listenerTLS) use(cert *tls.Certificate) {
	if l != nil && cert != nil {
		l.cert.Store(cert)
	}
}

// config is the listeners' TLS configuration: with ca_file, clients'
// certificates are verified when given, and required with
// verify_https_client.
func (l *listenerTLS) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.cert.Load(), nil }}
	if l.cfg.CAFile != "" {
		pem, err := os.ReadFile(l.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s: no PEM certificate in it", l.cfg.CAFile)
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.VerifyClientCertIfGiven
		if l.cfg.VerifyHTTPSClient {
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return c, nil
}

// listen listens on addr, with TLS when l is set; scheme is the URLs'.
func (l *listenerTLS) listen(addr string) (ln net.Listener, scheme string, err error) {
	ln, err = net.Listen("tcp", addr)
	if err != nil || l == nil {
		return ln, "http", err
	}
	c, err := l.config()
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return tls.NewListener(ln, c), "https", nil
}

// transport is how one agent calls another's listener (a standby forwarding
// lease calls to the leader, leaseproxy.go): nil (the default transport)
// without TLS; with it, the leader's certificate is checked against
// ca_file (else the system's roots) and this agent's own certificate is its
// client certificate, for a leader that verifies clients.
func (l *listenerTLS) transport() (http.RoundTripper, error) {
	if l == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return l.cert.Load(), nil }}
	if l.cfg.CAFile != "" {
		pem, err := os.ReadFile(l.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s: no PEM certificate in it", l.cfg.CAFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c
	return tr, nil
}

// Package rondotls holds the client side of Rondo's own TLS (the agent's
// tls {} block): the HTTP client that the views (`rondo status`, ...)
// and the lease clients use to reach an agent whose listeners serve HTTPS
// with a private CA.
package rondotls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Environment variables of Rondo's API clients, beside RONDO_ADDR (the
// views) and RONDO_LEASE_ADDR (tasks).
const (
	EnvCACert     = "RONDO_CACERT"      // PEM CA that signed the agent's certificate
	EnvClientCert = "RONDO_CLIENT_CERT" // client certificate (tls { verify_https_client = true })
	EnvClientKey  = "RONDO_CLIENT_KEY"  // its key
)

// Files names the client's TLS files; empty fields are unset.
type Files struct {
	CACert, ClientCert, ClientKey string
}

// FromEnv fills the fields left empty from RONDO_CACERT, RONDO_CLIENT_CERT
// and RONDO_CLIENT_KEY (a flag beats the environment).
func (f Files) FromEnv() Files {
	set := func(v *string, env string) {
		if *v == "" {
			*v = os.Getenv(env)
		}
	}
	set(&f.CACert, EnvCACert)
	set(&f.ClientCert, EnvClientCert)
	set(&f.ClientKey, EnvClientKey)
	return f
}

// Config is the client TLS configuration for the files: the system's
// roots, or only the CA when one is given; the client certificate when
// given (with its key).
func (f Files) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CACert != "" {
		pem, err := os.ReadFile(f.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate in it", f.CACert)
		}
		c.RootCAs = pool
	}
	if (f.ClientCert == "") != (f.ClientKey == "") {
		return nil, errors.New("a client certificate needs its key (" + EnvClientCert + " and " + EnvClientKey + ")")
	}
	if f.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// HTTPClient is an HTTP client with the files' TLS and the timeout.
func (f Files) HTTPClient(timeout time.Duration) (*http.Client, error) {
	tc, err := f.Config()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

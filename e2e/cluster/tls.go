package cluster

import (
	"fmt"
	"net/url"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/internal/testca"
)

// TLS runs a cluster's agents with TLS on HTTP and RPC (Options.TLS):
// Nomad's tls {} block with verify_server_hostname, the HTTP API over
// https; client certificates are asked for only with VerifyHTTPSClient.
type TLS struct {
	CAFile                string
	ServerCert, ServerKey string // for server.global.nomad, 127.0.0.1, localhost
	ClientCert, ClientKey string // for client.global.nomad, 127.0.0.1, localhost
	// CLICert and CLIKey (cli.global.nomad) are what the harness presents
	// to Nomad's HTTP API: its API client and, through CLIEnv, the nomad
	// binary.
	CLICert, CLIKey string
	// VerifyHTTPSClient runs every agent with verify_https_client = true:
	// the HTTP API refuses a request without a client certificate from
	// the CA (the harness presents CLICert; the agents' own HTTP clients
	// their tls {} pair).
	VerifyHTTPSClient bool
}

// NewTLS makes a private CA in dir, the servers' and clients'
// certificates Nomad's verify_server_hostname expects (region global) and
// the harness's own client certificate (CLICert).
func NewTLS(dir string) (*TLS, *testca.CA, error) {
	ca, err := testca.New(dir)
	if err != nil {
		return nil, nil, err
	}
	t := &TLS{CAFile: ca.CertFile}
	if t.ServerCert, t.ServerKey, err = ca.Issue("server", "server.global.nomad", []string{"localhost"}, testca.Localhost); err != nil {
		return nil, nil, err
	}
	if t.ClientCert, t.ClientKey, err = ca.Issue("client", "client.global.nomad", []string{"localhost"}, testca.Localhost); err != nil {
		return nil, nil, err
	}
	if t.CLICert, t.CLIKey, err = ca.Issue("cli", "cli.global.nomad", nil, nil); err != nil {
		return nil, nil, err
	}
	return t, ca, nil
}

// hcl is the agent's tls {} block with the server's or a client's pair.
func (t *TLS) hcl(server bool) string {
	cert, key := t.ClientCert, t.ClientKey
	if server {
		cert, key = t.ServerCert, t.ServerKey
	}
	return fmt.Sprintf("tls {\n  http = true\n  rpc = true\n  ca_file = %s\n  cert_file = %s\n  key_file = %s\n"+
		"  verify_server_hostname = true\n  verify_https_client = %t\n}\n", quote(t.CAFile), quote(cert), quote(key), t.VerifyHTTPSClient)
}

// apiConfig is the Go client's config for an https address: the CA, and
// the harness's client certificate when Nomad asks for one.
func (t *TLS) apiConfig(addr string) *api.Config {
	c := &api.Config{Address: addr}
	if t != nil {
		c.TLSConfig = &api.TLSConfig{CACert: t.CAFile}
		if t.VerifyHTTPSClient {
			c.TLSConfig.ClientCert, c.TLSConfig.ClientKey = t.CLICert, t.CLIKey
		}
	}
	return c
}

// httpsAddr turns an agent's http:// address into https://.
func httpsAddr(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return addr
	}
	u.Scheme = "https"
	return u.String()
}

// CLIEnv is the environment for the nomad binary against the cluster:
// NOMAD_ADDR, NOMAD_CACERT with TLS, NOMAD_CLIENT_CERT and
// NOMAD_CLIENT_KEY (CLICert) with VerifyHTTPSClient, NOMAD_TOKEN with
// ACLs (the management token); env is the base (e.g. os.Environ()), the
// same variables dropped from it.
func (c *Cluster) CLIEnv(env []string) []string {
	for _, k := range []string{"NOMAD_ADDR", "NOMAD_CACERT", "NOMAD_CLIENT_CERT", "NOMAD_CLIENT_KEY", "NOMAD_TOKEN", "NOMAD_TLS_SERVER_NAME"} {
		env = WithoutEnv(env, k)
	}
	env = append(env, "NOMAD_ADDR="+c.Address)
	if c.TLS != nil {
		env = append(env, "NOMAD_CACERT="+c.TLS.CAFile)
		if c.TLS.VerifyHTTPSClient {
			env = append(env, "NOMAD_CLIENT_CERT="+c.TLS.CLICert, "NOMAD_CLIENT_KEY="+c.TLS.CLIKey)
		}
	}
	if c.ManagementToken != "" {
		env = append(env, "NOMAD_TOKEN="+c.ManagementToken)
	}
	return env
}

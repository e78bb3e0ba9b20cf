package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// nomadFlags are the Nomad connection flags of every command that talks to
// Nomad, named as the nomad CLI names them (-address, -token, -namespace,
// -region, -ca-cert, -client-cert, -client-key, -tls-server-name,
// -tls-skip-verify). One precedence everywhere: a flag beats Nomad's
// environment variable (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_NAMESPACE,
// NOMAD_REGION, NOMAD_CACERT, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY,
// NOMAD_TLS_SERVER_NAME, NOMAD_SKIP_VERIFY), which beats the config
// file's nomad {} block.
type nomadFlags struct {
	address, token, namespace, region         string
	caCert, clientCert, clientKey, serverName string
	skipVerify                                bool
}

// register adds the flags to fs. Old names (e.g. the agent's -nomad-addr)
// are registered by their command as aliases of the same variables.
func (n *nomadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.address, "address", "", "Nomad HTTP address (default $NOMAD_ADDR, else the config's nomad { address }, else http://127.0.0.1:4646)")
	fs.StringVar(&n.token, "token", "", "Nomad ACL token (default $NOMAD_TOKEN, else the config's nomad { token })")
	fs.StringVar(&n.namespace, "namespace", "", "Nomad namespace (default $NOMAD_NAMESPACE, else the config's nomad { namespace })")
	fs.StringVar(&n.region, "region", "", "Nomad region (default $NOMAD_REGION, else the config's nomad { region })")
	fs.StringVar(&n.caCert, "ca-cert", "", "CA certificate of Nomad's TLS (default $NOMAD_CACERT, else nomad { ca_file })")
	fs.StringVar(&n.clientCert, "client-cert", "", "client certificate for Nomad's TLS (default $NOMAD_CLIENT_CERT, else nomad { cert_file })")
	fs.StringVar(&n.clientKey, "client-key", "", "client key for Nomad's TLS (default $NOMAD_CLIENT_KEY, else nomad { key_file })")
	fs.StringVar(&n.serverName, "tls-server-name", "", "server name to verify Nomad's certificate against (default $NOMAD_TLS_SERVER_NAME, else nomad { tls_server_name })")
	fs.BoolVar(&n.skipVerify, "tls-skip-verify", false, "do not verify Nomad's TLS certificate (default $NOMAD_SKIP_VERIFY); for tests only")
}

// config is the Nomad client configuration: flag > env > file (file may be
// the zero block). It fails on a client certificate without its key.
func (n *nomadFlags) config(file rhcl.Nomad) (*api.Config, error) {
	c := api.DefaultConfig() // reads the environment; its defaults below
	pick := func(flagV, envName, fileV string) (string, bool) {
		if flagV != "" {
			return flagV, true
		}
		if v := os.Getenv(envName); v != "" {
			return v, true
		}
		return fileV, fileV != ""
	}
	if v, ok := pick(n.address, "NOMAD_ADDR", file.Address); ok {
		c.Address = v
	}
	if v, ok := pick(n.token, "NOMAD_TOKEN", file.Token); ok {
		c.SecretID = v
	}
	if v, ok := pick(n.namespace, "NOMAD_NAMESPACE", file.Namespace); ok {
		c.Namespace = v
	}
	if v, ok := pick(n.region, "NOMAD_REGION", file.Region); ok {
		c.Region = v
	}
	if c.TLSConfig == nil {
		c.TLSConfig = &api.TLSConfig{}
	}
	t := c.TLSConfig
	if v, ok := pick(n.caCert, "NOMAD_CACERT", file.CAFile); ok {
		t.CACert = v
	}
	if v, ok := pick(n.clientCert, "NOMAD_CLIENT_CERT", file.CertFile); ok {
		t.ClientCert = v
	}
	if v, ok := pick(n.clientKey, "NOMAD_CLIENT_KEY", file.KeyFile); ok {
		t.ClientKey = v
	}
	if v, ok := pick(n.serverName, "NOMAD_TLS_SERVER_NAME", file.TLSServerName); ok {
		t.TLSServerName = v
	}
	if n.skipVerify {
		t.Insecure = true
	}
	if (t.ClientCert == "") != (t.ClientKey == "") {
		return nil, fmt.Errorf("nomad TLS: a client certificate needs its key (-client-cert and -client-key, NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY, or nomad { cert_file key_file })")
	}
	if !strings.Contains(c.Address, "://") {
		return nil, fmt.Errorf("nomad address %q: want http(s)://host:port or unix:///path", c.Address)
	}
	return c, nil
}

// deprecatedFlag registers old as an alias of a string flag already
// registered as name; using it warns once on stderr (printed by warnDeprecated).
type deprecatedFlag struct {
	target *string
	old    string
	name   string
	used   *bool
}

func (d deprecatedFlag) String() string {
	if d.target == nil {
		return ""
	}
	return *d.target
}
func (d deprecatedFlag) Set(v string) error { *d.target = v; *d.used = true; return nil }

// aliasFlag registers old as a deprecated alias of the string flag name
// (whose value lives in target) and returns a function that prints the
// deprecation warning when the alias was used.
func aliasFlag(fs *flag.FlagSet, old, name string, target *string, warn func(string)) func() {
	used := false
	fs.Var(deprecatedFlag{target: target, old: old, name: name, used: &used}, old, "deprecated: use -"+name)
	return func() {
		if used {
			warn(fmt.Sprintf("-%s is deprecated; use -%s", old, name))
		}
	}
}

package hcl

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
)

// Agent is the agent {} block, the agent's own settings (issue #18). A
// command-line flag wins over the block:
//
//	agent {
//	  bind_addr  = "0.0.0.0:4700"       # status API, web UI, /metrics (-bind-addr)
//	  lease_addr = "0.0.0.0:4701"       # lease/progress API for tasks (-lease-addr; empty: off)
//	  advertise  = "http://10.0.0.5:4700" # the status API as other hosts reach it (-advertise)
//	  pool       = "rondo"              # node pool of the GPU clients (-pool)
//	  log_level  = "info"               # trace|debug|info|warn|error (-log-level)
//	  log_json   = false                # JSON log lines (-log-json)
//	  round      = "6m"                 # round length (-round); replaces round_seconds
//	}
type Agent struct {
	BindAddr, LeaseAddr, Advertise, Pool, LogLevel string
	LogJSON                                        bool
	// LogJSONSet: log_json is written (false can then override nothing
	// but is still the file's word).
	LogJSONSet bool
	// Round is the round length (whole seconds, >= 1s); zero when unset.
	Round time.Duration
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

// TLS is the tls {} block: Rondo's own listeners (status and lease APIs)
// serve HTTPS with this certificate. With ca_file set, the listeners also
// ask for client certificates signed by that CA (verify_https_client):
//
//	tls {
//	  cert_file           = "/etc/rondo/agent.pem"
//	  key_file            = "/etc/rondo/agent-key.pem"
//	  ca_file             = "/etc/rondo/ca.pem"  # optional
//	  verify_https_client = false                # optional; needs ca_file
//	}
type TLS struct {
	CertFile, KeyFile, CAFile string
	VerifyHTTPSClient         bool
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

// Enabled reports whether the listeners serve TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// HighAvailability is the high_availability {} block: the leader lock that
// lets several agents run with one acting (a Nomad variable lock):
//
//	high_availability {
//	  lock_path  = "rondo/state-leader"   # default <state path>-leader
//	  lock_ttl   = "15s"                  # 10s to 24h
//	  lease_file = "/var/lib/rondo/leader-lease"
//	}
//
// lease_file keeps the lock's lease ID on this host, so that the agent
// restarted after a crash takes its lease back at once rather than after
// Nomad expires it (state.LeaseFile).
type HighAvailability struct {
	LockPath  string
	LockTTL   time.Duration // zero when unset
	LeaseFile string        // "" when unset
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

func decodeAgent(b *hcl.Block, ag *Agent) hcl.Diagnostics {
	ag.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "bind_addr"}, {Name: "lease_addr"}, {Name: "advertise"}, {Name: "pool"},
		{Name: "log_level"}, {Name: "log_json"}, {Name: "round"}}})
	for _, f := range []struct {
		name string
		dst  *string
	}{{"bind_addr", &ag.BindAddr}, {"lease_addr", &ag.LeaseAddr}, {"advertise", &ag.Advertise},
		{"pool", &ag.Pool}, {"log_level", &ag.LogLevel}} {
		a, ok := content.Attributes[f.name]
		if !ok {
			continue
		}
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		*f.dst = v
		var err error
		switch f.name {
		case "bind_addr", "lease_addr":
			err = CheckListenAddress(f.name, v)
		case "advertise":
			err = checkURL(f.name, v)
		case "pool":
			if v == "" {
				err = fmt.Errorf("pool: want a node pool name")
			}
		case "log_level":
			if hclog.LevelFromString(v) == hclog.NoLevel {
				err = fmt.Errorf("log_level = %q: want trace, debug, info, warn or error", v)
			}
		}
		if err != nil {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid "+f.name, err.Error()))
		}
	}
	if a, ok := content.Attributes["log_json"]; ok {
		v, d := boolAttr(a)
		diags = append(diags, d...)
		ag.LogJSON, ag.LogJSONSet = v, !d.HasErrors()
	}
	if a, ok := content.Attributes["round"]; ok {
		d, dd := durationAttr(a)
		diags = append(diags, dd...)
		if !dd.HasErrors() {
			if d < time.Second || d%time.Second != 0 {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid round",
					fmt.Sprintf("round = %s must be a whole number of seconds, at least 1s (e.g. \"6m\")", d)))
			}
			ag.Round = d
		}
	}
	return diags
}

func decodeTLS(b *hcl.Block, t *TLS) hcl.Diagnostics {
	t.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "cert_file"}, {Name: "key_file"}, {Name: "ca_file"}, {Name: "verify_https_client"}}})
	for _, f := range []struct {
		name string
		dst  *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}, {"ca_file", &t.CAFile}} {
		if a, ok := content.Attributes[f.name]; ok {
			v, d := stringAttr(a)
			diags = append(diags, d...)
			if !d.HasErrors() {
				v, d = fileAttr(a, v)
				diags = append(diags, d...)
			}
			*f.dst = v
		}
	}
	if a, ok := content.Attributes["verify_https_client"]; ok {
		v, d := boolAttr(a)
		diags = append(diags, d...)
		t.VerifyHTTPSClient = v
		if v && t.CAFile == "" && !d.HasErrors() {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid verify_https_client",
				"tls: verify_https_client = true needs ca_file (the CA that signs the clients' certificates)"))
		}
	}
	if !diags.HasErrors() && (t.CertFile == "" || t.KeyFile == "") {
		diags = append(diags, errAt(b.DefRange, "Incomplete tls block",
			"tls: cert_file and key_file are both required (the listeners' certificate and its key)"))
	}
	return diags
}

func decodeHA(b *hcl.Block, h *HighAvailability) hcl.Diagnostics {
	h.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "lock_path"}, {Name: "lock_ttl"}, {Name: "lease_file"}}})
	if a, ok := content.Attributes["lock_path"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && (v == "" || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "nomad/")) {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid lock_path",
				fmt.Sprintf("lock_path = %q must be a Nomad variable path, not empty, not starting with / or nomad/", v)))
		}
		h.LockPath = v
	}
	if a, ok := content.Attributes["lock_ttl"]; ok {
		d, dd := durationAttr(a)
		diags = append(diags, dd...)
		if !dd.HasErrors() && (d < 10*time.Second || d > 24*time.Hour) {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid lock_ttl",
				fmt.Sprintf("lock_ttl = %s: Nomad's variable locks take 10s to 24h", d)))
		}
		h.LockTTL = d
	}
	if a, ok := content.Attributes["lease_file"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v, d = fileAttr(a, strings.TrimSpace(v))
			diags = append(diags, d...)
		}
		h.LeaseFile = v
	}
	return diags
}

// durationAttr reads a duration string ("6m", "90s").
func durationAttr(a *hcl.Attribute) (time.Duration, hcl.Diagnostics) {
	v, d := stringAttr(a)
	if d.HasErrors() {
		return 0, d
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, hcl.Diagnostics{errAt(a.Expr.Range(), "Invalid "+a.Name,
			fmt.Sprintf("%s = %q must be a positive duration such as \"90s\" or \"6m\"", a.Name, v))}
	}
	return dur, nil
}

// fileAttr makes a file name relative to the config file's directory
// absolute; an empty name is an error.
func fileAttr(a *hcl.Attribute, v string) (string, hcl.Diagnostics) {
	if v == "" {
		return "", hcl.Diagnostics{errAt(a.Expr.Range(), "Invalid "+a.Name, a.Name+": want a file name")}
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(filepath.Dir(a.NameRange.Filename), v)
	}
	return v, nil
}

// CheckListenAddress checks a listen address: host:port (host may be empty
// or 0.0.0.0 for every address).
func CheckListenAddress(name, v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil || port == "" {
		return fmt.Errorf("%s = %q must be host:port (e.g. \"0.0.0.0:4700\")", name, v)
	}
	return nil
}

func checkURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s = %q must be an http:// or https:// URL", name, v)
	}
	return nil
}

// checkNomadAddress checks a Nomad address: http(s)://host[:port] or
// unix:///path (the Task API's socket).
func checkNomadAddress(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("address = %q: %v", v, err)
	}
	switch {
	case u.Scheme == "unix" && u.Path != "":
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
	default:
		return fmt.Errorf("address = %q must be http(s)://host:port or unix:///path/to/api.sock", v)
	}
	return nil
}

// applyAgentRound resolves the round length after every file is read:
// agent { round } wins; round_seconds still works but is deprecated (a
// warning); both set is an error.
func applyAgentRound(cfg *Config, roundSeconds *hcl.Attribute) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if roundSeconds != nil {
		if cfg.Agent.Round > 0 {
			return hcl.Diagnostics{errAt(roundSeconds.NameRange, "Conflicting round",
				fmt.Sprintf("round_seconds and agent { round } are both set (the agent block at %s); keep round", pos(cfg.Agent.Range)))}
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Deprecated round_seconds",
			Detail:  fmt.Sprintf("round_seconds is deprecated; write agent { round = %q }", shortDuration(time.Duration(cfg.RoundSeconds)*time.Second)),
			Subject: roundSeconds.NameRange.Ptr()})
	}
	if cfg.Agent.Round > 0 {
		cfg.RoundSeconds = int(cfg.Agent.Round / time.Second)
	}
	return diags
}

package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/rondo-sched/rondo/allocator/state"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// The agent's settings come from its flags and the config's agent {} and
// high_availability {} blocks with one rule: a flag given on the command
// line wins over the block, and the block wins over the flag's default.

// setFlags names the flags given on the command line, deprecated aliases
// under the name they stand for (-addr is -bind-addr).
func setFlags(fs *flag.FlagSet) map[string]bool {
	alias := map[string]string{"addr": "bind-addr", "nomad-addr": "address"}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if a, ok := alias[name]; ok {
			name = a
		}
		set[name] = true
	})
	return set
}

// applyAgentBlock gives the agent block's values to the flags not given
// on the command line (set, from setFlags).
func (c *agentCmd) applyAgentBlock(set map[string]bool, a rhcl.Agent) {
	for _, f := range []struct {
		flag string
		dst  *string
		v    string
	}{{"bind-addr", &c.addr, a.BindAddr}, {"lease-addr", &c.leaseAddr, a.LeaseAddr}, {"advertise", &c.advertise, a.Advertise},
		{"pool", &c.pool, a.Pool}, {"log-level", &c.logLevel, a.LogLevel}} {
		if f.v != "" && !set[f.flag] {
			*f.dst = f.v
		}
	}
	if a.LogJSONSet && !set["log-json"] {
		c.logJSON = a.LogJSON
	}
	// The round: load takes -round when given, else the file's (agent {
	// round }, else round_seconds).
}

// leaderOptions is the leader lock: high_availability { lock_path } else
// <state path>-leader; -leader-ttl given on the command line, else
// lock_ttl, else -leader-ttl's default.
func (c *agentCmd) leaderOptions(set map[string]bool, ha rhcl.HighAvailability, namespace string) state.LeaderOptions {
	o := state.LeaderOptions{Namespace: namespace, Path: c.statePath + "-leader", TTL: c.leaderTTL}
	if ha.LockPath != "" {
		o.Path = ha.LockPath
	}
	if ha.LockTTL > 0 && !set["leader-ttl"] {
		o.TTL = ha.LockTTL
	}
	return o
}

// newLogger is the agent's logger: its level, JSON lines with -log-json.
func (c *agentCmd) newLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "rondo", Level: hclog.LevelFromString(c.logLevel), Output: c.stderr,
		JSONFormat: c.logJSON})
}

// configWarnings renders a loaded config's warnings (e.g. the deprecated
// round_seconds) as "warning: file:line:col: ..." lines.
func configWarnings(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			out = append(out, "warning: "+rhcl.FormatDiagnostic(d))
		}
	}
	return out
}

// needRestart lists what a reload read but cannot apply to a running
// agent: its listeners (addresses, TLS), the pool, logging, the leader
// lock and the Nomad connection.
func needRestart(old, cur *rhcl.Config) []string {
	var out []string
	add := func(changed bool, what string) {
		if changed {
			out = append(out, what)
		}
	}
	oa, na := old.Agent, cur.Agent
	add(oa.BindAddr != na.BindAddr, "agent.bind_addr")
	add(oa.LeaseAddr != na.LeaseAddr, "agent.lease_addr")
	add(oa.Advertise != na.Advertise, "agent.advertise")
	add(oa.Pool != na.Pool, "agent.pool")
	add(oa.LogLevel != na.LogLevel || oa.LogJSON != na.LogJSON, "agent.log_level/log_json")
	ot, nt := old.TLS, cur.TLS
	add(ot.CertFile != nt.CertFile || ot.KeyFile != nt.KeyFile || ot.CAFile != nt.CAFile || ot.VerifyHTTPSClient != nt.VerifyHTTPSClient, "tls")
	add(old.HA.LockPath != cur.HA.LockPath || old.HA.LockTTL != cur.HA.LockTTL || old.HA.LeaseFile != cur.HA.LeaseFile, "high_availability")
	on, nn := old.Nomad, cur.Nomad
	on.Range, nn.Range = hcl.Range{}, hcl.Range{}
	add(fmt.Sprint(on) != fmt.Sprint(nn), "nomad")
	return out
}

// restartNote is the reload's log line for what it did not apply.
func restartNote(what []string) string {
	return "config reload: listener, pool and high_availability changes need a restart; not applied: " + strings.Join(what, ", ")
}

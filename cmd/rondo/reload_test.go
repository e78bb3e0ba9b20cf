package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/internal/testca"
)

// TestDeciderKeyChanges: every kind of config change a reload must act on
// (cells, selectors, quotas, quota-only shares, any VC's policy, entity
// weights, the round length) changes the key the agent rebuilds its
// decider on; a change of comments or layout does not.
func TestDeciderKeyChanges(t *testing.T) {
	cellsCfg := `round_seconds = 20
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 2
  node  = true
}
cell "v100-node" "a" {
  nomad_node = "n0"
}
cell "v100-node" "b" {
  nomad_node = "n1"
}
vc "x" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_perf"
}
vc "y" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e" {
    weight = 2
  }
}
`
	quotaCfg := `vc "x" {
  gpus   = { v100 = 2, k80 = 1 }
  policy = "fifo_perf"
}
vc "y" {
  gpus   = { v100 = 1 }
}
`
	key := func(t *testing.T, cfg string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "c.hcl")
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newAgentCmd()
		c.config = p
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		return deciderKey(s)
	}
	for _, base := range []string{cellsCfg, quotaCfg} {
		k0 := key(t, base)
		if k := key(t, "# a comment\n\n"+strings.ReplaceAll(base, "  ", "    ")); k != k0 {
			t.Errorf("layout changed the key:\n%s\n%s", k0, k)
		}
	}
	for name, c := range map[string][2]string{
		"cells":          {cellsCfg, strings.Replace(cellsCfg, `nomad_node = "n1"`, "nomad_node = \"n1\"\n  bad = [\"1\"]", 1)},
		"selectors":      {cellsCfg, strings.Replace(cellsCfg, `nomad_node = "n1"`, `node_pool = "gpu"`, 1)},
		"quotas":         {cellsCfg, strings.Replace(cellsCfg, "vc \"y\" {\n  quota  = { \"v100-node\" = 1 }", "vc \"y\" {\n  quota  = { \"v100\" = 1 }", 1)},
		"second policy":  {cellsCfg, strings.Replace(cellsCfg, `policy = "max_min_fairness_water_filling_perf"`, `policy = "max_min_fairness_water_filling"`, 1)},
		"entity weights": {cellsCfg, strings.Replace(cellsCfg, "weight = 2", "weight = 3", 1)},
		"round":          {cellsCfg, strings.Replace(cellsCfg, "round_seconds = 20", "round_seconds = 30", 1)},
		"shares":         {quotaCfg, strings.Replace(quotaCfg, "v100 = 2, k80 = 1", "v100 = 1, k80 = 2", 1)},
		"VC policy":      {quotaCfg, strings.Replace(quotaCfg, `policy = "fifo_perf"`, `policy = "fifo"`, 1)},
		"gpu_type":       {quotaCfg, quotaCfg + "gpu_type \"v100\" {\n  models = [\"Tesla V100-PCIE-32GB\"]\n}\n"},
	} {
		if c[0] == c[1] {
			t.Fatalf("%s: the variant is the base config", name)
		}
		if key(t, c[0]) == key(t, c[1]) {
			t.Errorf("%s: a change that the decider is built from left the key unchanged", name)
		}
	}
}

// A SIGHUP reload checks the whole new config before applying any of it:
// a config the decider refuses keeps the old certificate in force though
// the new one at the same paths is fine; a certificate that does not load
// refuses the reload before the decider is built; an accepted reload
// serves the new certificate only when applied (listenerTLS.use).
func TestReloadCertificateAfterValidation(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := ca.Issue("agent", "localhost", nil, testca.Localhost)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "cluster.hcl")
	load := func(round string) *agentSettings {
		t.Helper()
		cfg := fmt.Sprintf("agent {\n  round = %q\n}\ntls {\n  cert_file = %q\n  key_file  = %q\n}\nvc \"r\" {\n  policy = \"max_min_fairness_perf\"\n}\n", round, cf, kf)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newAgentCmd()
		c.config = cfgPath
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := load("20s")
	l, err := newListenerTLS(old.cfg.TLS)
	if err != nil {
		t.Fatal(err)
	}
	inForce := l.cert.Load()
	// The certificate is renewed at the same paths.
	if _, _, err := ca.Issue("agent", "localhost", nil, testca.Localhost); err != nil {
		t.Fatal(err)
	}
	calls := 0
	refuse := func(*agentSettings, bool) (agent.Decider, error) { calls++; return nil, errors.New("refused") }
	build := func(s *agentSettings, reset bool) (agent.Decider, error) {
		calls++
		return newDecider(s, hclog.NewNullLogger(), reset)
	}

	// The round changed: the decider is rebuilt, and refuses.
	ns := load("30s")
	if _, err := prepareReload(old, ns, l, refuse); err == nil || calls != 1 {
		t.Fatalf("a refused decider: err %v, %d decide calls", err, calls)
	}
	if l.cert.Load() != inForce {
		t.Fatal("a refused reload put the new certificate in force")
	}

	// Accepted: the plan holds the new certificate; served once applied.
	r, err := prepareReload(old, ns, l, build)
	if err != nil || !r.rebuilt || r.decider == nil || r.cert == nil {
		t.Fatalf("an accepted reload: %+v, %v", r, err)
	}
	if l.cert.Load() != inForce {
		t.Fatal("the certificate was served before the reload was applied")
	}
	l.use(r.cert)
	if got := l.cert.Load(); got == inForce || got != r.cert {
		t.Fatal("the applied reload did not serve the new certificate")
	}
	inForce = l.cert.Load()

	// Nothing the decider is built from changed: no new decider.
	calls = 0
	if r, err := prepareReload(ns, load("30s"), l, refuse); err != nil || r.rebuilt || r.decider != nil || calls != 0 || r.cert == nil {
		t.Fatalf("an unchanged decider: %+v, %v, %d decide calls", r, err, calls)
	}

	// A key that does not match the certificate: refused before the
	// decider is built; the certificate in force stays.
	_, okf, err := ca.Issue("other", "other", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(okf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareReload(ns, load("40s"), l, build); err == nil || !strings.Contains(err.Error(), "tls: cert_file") || calls != 0 {
		t.Fatalf("a broken certificate: err %v, %d decide calls", err, calls)
	}
	if l.cert.Load() != inForce {
		t.Fatal("a refused reload changed the certificate in force")
	}

	// Without tls {}: nothing to read, nothing to serve.
	var none *listenerTLS
	if r, err := prepareReload(ns, ns, none, refuse); err != nil || r.cert != nil {
		t.Fatalf("no tls {}: %+v, %v", r, err)
	}
	none.use(nil)
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

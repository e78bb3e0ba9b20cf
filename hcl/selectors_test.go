package hcl

import (
	"strings"
	"testing"
)

func TestCellSelectors(t *testing.T) {
	cfg, diags := LoadPath("testdata/selectors.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	want := map[string][2]string{"east": {"gpu-east", ""}, "big": {"gpu-west", "dgx"}, "any-dgx": {"", "dgx"}}
	for _, c := range cfg.Cells {
		if w := want[c.Name]; c.NodePool != w[0] || c.NodeClass != w[1] || c.NomadNode != "" {
			t.Errorf("cell %s: pool %q class %q", c.Name, c.NodePool, c.NodeClass)
		}
	}
	for file, prefix := range map[string]string{
		"testdata/selector_conflict.hcl":       "testdata/selector_conflict.hcl:11:3: Conflicting fields; cell \"n0\": node_class selects nodes, nomad_node names them",
		"testdata/selector_conflict_nodes.hcl": "testdata/selector_conflict_nodes.hcl:15:3: Conflicting fields; cell \"r0\": node_pool selects nodes, nomad_nodes names them",
		"testdata/selector_empty.hcl":          "testdata/selector_empty.hcl:10:15: Invalid node_pool",
	} {
		_, diags := LoadPath(file)
		if msg := FormatDiagnostics(diags); !diags.HasErrors() || !strings.HasPrefix(msg, prefix) {
			t.Errorf("%s: %q, want prefix %q", file, msg, prefix)
		}
	}
}

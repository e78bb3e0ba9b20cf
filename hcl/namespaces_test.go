package hcl

import (
	"slices"
	"testing"
)

func TestVCNamespaces(t *testing.T) {
	src := `
vc "a" {
  gpus       = { v100 = 2 }
  namespaces = ["team-a", "shared"]
}
vc "b" {
  gpus       = { v100 = 2 }
  namespaces = ["team-b", "shared"]
}
vc "open" {
  gpus = { v100 = 1 }
}
nomad { namespace = "*" }
`
	cfg, diags := Parse(Source{Name: "f.hcl", Src: []byte(src)})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	a, b, open := cfg.VCs[0], cfg.VCs[1], cfg.VCs[2]
	if !slices.Equal(a.Namespaces, []string{"team-a", "shared"}) || a.NamespacesRange.Start.Line != 4 {
		t.Errorf("vc a: namespaces %v at line %d", a.Namespaces, a.NamespacesRange.Start.Line)
	}
	if open.Namespaces != nil {
		t.Errorf("vc open: namespaces %v, want none", open.Namespaces)
	}
	for _, c := range []struct {
		vc   VC
		ns   string
		want bool
	}{{a, "team-a", true}, {a, "team-b", false}, {b, "team-b", true}, {a, "shared", true}, {b, "shared", true},
		{open, "team-a", true}, {open, "anything", true}, {a, "default", false}} {
		if got := c.vc.Admits(c.ns); got != c.want {
			t.Errorf("vc %q admits %q: %v, want %v", c.vc.Name, c.ns, got, c.want)
		}
	}
	if got := cfg.Namespaces(); !slices.Equal(got, []string{"shared", "team-a", "team-b"}) {
		t.Errorf("Namespaces() = %v", got)
	}
}

func TestVCNamespacesMalformed(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`vc "a" { namespaces = [] }`, `f.hcl:1:23: Invalid namespaces; vc "a": namespaces: list at least one namespace`},
		{`vc "a" { namespaces = ["team-a", "team-a"] }`, `f.hcl:1:34: Duplicate namespace; vc "a": namespaces: "team-a" is listed twice`},
		{`vc "a" { namespaces = ["team_a"] }`, `f.hcl:1:24: Invalid namespaces; vc "a": namespaces: "team_a" is not a Nomad namespace name`},
		{`vc "a" { namespaces = [""] }`, `f.hcl:1:24: Invalid namespaces; vc "a": namespaces: "" is not a Nomad namespace name`},
		{`vc "a" { namespaces = ["*"] }`, `f.hcl:1:24: Invalid namespaces; vc "a": namespaces: "*" is not a namespace`},
		{`vc "a" { namespaces = "team-a" }`, `f.hcl:1:23: Invalid value for namespaces; namespaces must be a list of string`},
		{`vc "a" { namespaces = ["a", 1 + {}] }`, `f.hcl:1:33: Invalid operand`},
		{"nomad { namespace = \"team a\" }\nvc \"a\" {}", `f.hcl:1:1: Invalid namespace; nomad: namespace: "team a" is not a Nomad namespace name`},
	} {
		wantOneError(t, c.src, c.want)
	}
}

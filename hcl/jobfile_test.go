package hcl

import (
	"strings"
	"testing"
)

func TestSplitJobFile(t *testing.T) {
	src := `job "train" {
  policy {
    vc    = "research"
    steps = 1000
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
    }
  }
}
`
	p, found, rest, diags := SplitJobFile("train.nomad.hcl", []byte(src))
	if diags.HasErrors() || !found {
		t.Fatalf("found=%v diags=%v", found, diags)
	}
	if p.VC != "research" || p.Steps != 1000 {
		t.Fatalf("policy %+v", p)
	}
	if strings.Contains(string(rest), "policy") || strings.Count(string(rest), "\n") != strings.Count(src, "\n") || len(rest) != len(src) {
		t.Fatalf("rest not blanked in place:\n%s", rest)
	}
	if !strings.Contains(string(rest), `group "g"`) {
		t.Fatalf("rest lost the job:\n%s", rest)
	}
	// No stanza: the file passes through untouched.
	_, found, rest, diags = SplitJobFile("plain.hcl", []byte(`job "x" {}`))
	if found || diags.HasErrors() || string(rest) != `job "x" {}` {
		t.Fatalf("plain file: found=%v diags=%v rest=%q", found, diags, rest)
	}
	// A bad stanza names the file, line and field.
	_, _, _, diags = SplitJobFile("bad.hcl", []byte("job \"x\" {\n  policy {\n    vc = \"a\"\n    weight = -1\n  }\n}\n"))
	if !diags.HasErrors() || !strings.Contains(FormatDiagnostics(diags), "bad.hcl:4:") || !strings.Contains(FormatDiagnostics(diags), "weight") {
		t.Fatalf("bad stanza: %s", FormatDiagnostics(diags))
	}
}

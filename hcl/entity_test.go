package hcl

import (
	"strings"
	"testing"
)

// TestJobPolicyEntity: `entity` in the policy stanza becomes meta
// rondo.entity and reads back the same; without it no meta key is written.
func TestJobPolicyEntity(t *testing.T) {
	src := "job \"x\" {\n  policy {\n    vc     = \"research\"\n    user   = \"alice\"\n    entity = \"team-a\"\n  }\n}\n"
	p, diags := ParseJobPolicy("e.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if p.Entity != "team-a" || p.User != "alice" {
		t.Fatalf("policy = %+v", p)
	}
	m := p.ToMeta()
	if m[MetaEntity] != "team-a" {
		t.Fatalf("meta = %v", m)
	}
	back, err := PolicyFromMeta(m)
	if err != nil || back != p {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	p.Entity = ""
	if _, ok := p.ToMeta()[MetaEntity]; ok {
		t.Errorf("no entity: meta %v", p.ToMeta())
	}
}

// TestJobPolicyEntityErrors: a bad entity is reported at file:line:col of
// its value in the stanza, and by key in meta.
func TestJobPolicyEntityErrors(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{`""`, "e.hcl:4:14: Invalid entity; entity = \"\" must not be empty"},
		{`" team-a"`, "e.hcl:4:14: Invalid entity; entity = \" team-a\" must not start or end with a space"},
		{`"a\tb"`, "e.hcl:4:14: Invalid entity; entity = \"a\\tb\" must be printable text"},
		{`"` + strings.Repeat("x", 129) + `"`, "e.hcl:4:14: Invalid entity; entity = \"xxx"},
		{`["a"]`, "e.hcl:4:14: "},
	} {
		src := "job \"x\" {\n  policy {\n    vc     = \"research\"\n    entity = " + c.value + "\n  }\n}\n"
		_, diags := ParseJobPolicy("e.hcl", []byte(src))
		if !diags.HasErrors() {
			t.Errorf("entity = %s accepted", c.value)
			continue
		}
		if msg := FormatDiagnostic(diags[0]); !strings.HasPrefix(msg, c.want) {
			t.Errorf("entity = %s: %q, want %q...", c.value, msg, c.want)
		}
	}
	for _, v := range []string{"", " a", "a\n", strings.Repeat("x", 129), "\xff"} {
		_, err := PolicyFromMeta(map[string]string{MetaVC: "a", MetaEntity: v})
		if err == nil || !strings.Contains(err.Error(), MetaEntity) {
			t.Errorf("meta entity %q: error %v", v, err)
		}
	}
	if err := CheckEntityName(strings.Repeat("x", 128)); err != nil {
		t.Errorf("128 bytes refused: %v", err)
	}
}

package hcl

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestJobPolicyElastic(t *testing.T) {
	src, err := os.ReadFile("testdata/job_elastic.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := ParseJobPolicy("testdata/job_elastic.hcl", src)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if !p.Elastic() || p.ElasticMin != 1 || p.ElasticMax != 4 {
		t.Fatalf("%+v", p)
	}
	m := p.ToMeta()
	if m[MetaElastic] != "1:4" {
		t.Fatalf("meta %v", m)
	}
	back, err := PolicyFromMeta(m)
	if err != nil || back.ElasticMin != 1 || back.ElasticMax != 4 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	// The stanza is blanked out of what Nomad parses, elastic block included.
	_, found, rest, diags := SplitJobFile("testdata/job_elastic.hcl", src)
	if !found || diags.HasErrors() || strings.Contains(string(rest), "elastic") {
		t.Fatalf("split: found=%v %s\n%s", found, FormatDiagnostics(diags), rest)
	}
}

func TestJobPolicyElasticErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"job_elastic_min_gt_max.hcl", "testdata/job_elastic_min_gt_max.hcl:5:11: Invalid elastic max"},
		{"job_elastic_zero_min.hcl", "testdata/job_elastic_zero_min.hcl:4:11: Invalid elastic min"},
		{"job_elastic_fraction.hcl", "testdata/job_elastic_fraction.hcl:5:11: Invalid value for max"},
		{"job_elastic_missing_max.hcl", "testdata/job_elastic_missing_max.hcl:3:"},
	} {
		path := "testdata/" + c.file
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, diags := ParseJobPolicy(path, src)
		if !diags.HasErrors() {
			t.Fatalf("%s: accepted", c.file)
		}
		if msg := FormatDiagnostics(diags); !strings.HasPrefix(msg, c.want) {
			t.Fatalf("%s: %s, want prefix %q", c.file, msg, c.want)
		}
		// rondo job run reports the same through SplitJobFile.
		if _, _, _, d := SplitJobFile(path, src); !d.HasErrors() || !strings.HasPrefix(FormatDiagnostics(d), c.want) {
			t.Fatalf("%s via SplitJobFile: %s", c.file, FormatDiagnostics(d))
		}
	}
}

func TestElasticMeta(t *testing.T) {
	for v, ok := range map[string]bool{"1:4": true, " 2 : 2 ": true, "0:4": false, "3:2": false, "1.5:4": false,
		"4": false, "a:b": false, "1:": false, "1:99999999": false} {
		_, err := PolicyFromMeta(map[string]string{MetaVC: "r", MetaElastic: v})
		if (err == nil) != ok {
			t.Fatalf("%q: err=%v", v, err)
		}
		var me *MetaError
		if err != nil && (!errors.As(err, &me) || me.Key != MetaElastic) {
			t.Fatalf("%q: %v does not name the key", v, err)
		}
	}
}

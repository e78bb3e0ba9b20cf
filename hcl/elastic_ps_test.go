package hcl

import (
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
)

// TestJobPolicyElasticPS: the full two-role example reads into every field,
// converts to meta and back to the same policy, and is blanked out of what
// Nomad parses.
func TestJobPolicyElasticPS(t *testing.T) {
	const path = "testdata/job_elastic_ps.hcl"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := ParseJobPolicy(path, src)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	want := JobPolicy{VC: "research", Class: Guaranteed, Weight: 1, Model: "resnet-50",
		ElasticMin: 1, ElasticMax: 8, PSGroup: "ps", PSMin: 1, PSMax: 8, Epochs: 30, BatchSize: 256, Scaling: ScalingLive}
	if p != want {
		t.Fatalf("policy\n %+v\nwant\n %+v", p, want)
	}
	if !p.Elastic() || !p.TwoRole() || p.ScalingMode() != ScalingLive {
		t.Fatalf("Elastic %v TwoRole %v ScalingMode %q", p.Elastic(), p.TwoRole(), p.ScalingMode())
	}
	m := p.ToMeta()
	wantMeta := map[string]string{MetaVC: "research", MetaPriority: "guaranteed", MetaWeight: "1", MetaModel: "resnet-50",
		MetaElastic: "1:8", MetaPS: "1:8", MetaPSGroup: "ps", MetaEpochs: "30", MetaBatchSize: "256", MetaScaling: "live"}
	if !maps.Equal(m, wantMeta) {
		t.Fatalf("meta\n %v\nwant\n %v", m, wantMeta)
	}
	if back, err := PolicyFromMeta(m); err != nil || back != p {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	sp, found, rest, diags := SplitJobFile(path, src)
	if !found || diags.HasErrors() || sp != p {
		t.Fatalf("split: found=%v %+v %s", found, sp, FormatDiagnostics(diags))
	}
	for _, w := range []string{"epochs", "batch_size", "scaling", "ps {", `group = "ps"`} {
		if strings.Contains(string(rest), w) {
			t.Fatalf("split left %q in\n%s", w, rest)
		}
	}
	if !strings.Contains(string(rest), `group "ps" {`) {
		t.Fatalf("split removed the job's own ps group:\n%s", rest)
	}
}

// TestJobPolicyElasticOptional: today's elastic block sets none of the new
// fields and writes none of the new keys; each new attribute also stands on
// its own, and an unset scaling means live.
func TestJobPolicyElasticOptional(t *testing.T) {
	src, err := os.ReadFile("testdata/job_elastic.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := ParseJobPolicy("testdata/job_elastic.hcl", src)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if p.TwoRole() || p.PSGroup != "" || p.PSMin != 0 || p.Epochs != 0 || p.BatchSize != 0 || p.Scaling != "" ||
		p.ScalingMode() != ScalingLive {
		t.Fatalf("%+v", p)
	}
	for _, k := range []string{MetaPS, MetaPSGroup, MetaEpochs, MetaBatchSize, MetaScaling} {
		if v, ok := p.ToMeta()[k]; ok {
			t.Errorf("meta %s = %q for a one-role job", k, v)
		}
	}
	for body, want := range map[string]JobPolicy{
		`epochs = 2.5`:           {Epochs: 2.5},
		`batch_size = 4`:         {BatchSize: 4},
		`scaling = "checkpoint"`: {Scaling: ScalingCheckpoint},
		`ps {
  group = "param-servers"
  min = 2
  max = 2
}`: {PSGroup: "param-servers", PSMin: 2, PSMax: 2},
	} {
		src := "policy {\n  vc = \"r\"\n  elastic {\n    min = 2\n    max = 4\n" + body + "\n  }\n}\n"
		p, diags := ParseJobPolicy("o.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatalf("%s: %s", body, FormatDiagnostics(diags))
		}
		want.VC, want.Class, want.Weight, want.ElasticMin, want.ElasticMax = "r", Guaranteed, 1, 2, 4
		if p != want {
			t.Fatalf("%s: %+v, want %+v", body, p, want)
		}
		if back, err := PolicyFromMeta(p.ToMeta()); err != nil || back != p {
			t.Fatalf("%s: round trip %+v %v", body, back, err)
		}
	}
}

// TestJobPolicyElasticPSErrors: each bad file is reported at file:line:col
// of the offending value (or block) with a summary naming the field, the same
// through SplitJobFile, and with no other error.
func TestJobPolicyElasticPSErrors(t *testing.T) {
	for _, c := range []struct {
		file, want string
		n          int // errors reported
	}{
		{"epochs_zero", "6:14: Invalid elastic epochs; elastic epochs = 0 must be positive", 1},
		{"epochs_string", "6:14: Invalid elastic epochs; elastic epochs must be a number", 1},
		{"epochs_huge", "6:14: Invalid elastic epochs; elastic epochs is out of range", 1},
		{"batch_below_max", "6:18: Invalid elastic batch_size; elastic batch_size = 4 is below max = 8: total batch below the maximum worker count", 1},
		{"batch_fraction", "6:18: Invalid elastic batch_size; elastic batch_size must be a whole number", 1},
		{"batch_zero", "6:18: Invalid elastic batch_size; elastic batch_size = 0 must be positive", 1},
		{"scaling", `6:15: Invalid elastic scaling; elastic scaling = "restart" must be "live" or "checkpoint"`, 1},
		{"scaling_number", `6:15: Invalid elastic scaling; elastic scaling = "2" must be "live" or "checkpoint"`, 1},
		{"min_zero", "8:15: Invalid ps min; ps min = 0 must be at least 1 parameter server", 1},
		{"inverted", "9:15: Invalid ps max; ps max = 2 is below min = 4", 1},
		{"fraction", "9:15: Invalid ps max; ps max must be a whole number", 1},
		{"max_range", "9:15: Invalid ps max; ps max = 100000 is out of range", 1},
		{"no_group", "6:5: Missing ps group", 1},
		{"empty_group", `7:15: Invalid ps group; ps group = "" must not be empty`, 1},
		{"missing_bounds", "6:5: Missing ps min", 2},
		{"duplicate", "11:5: Duplicate ps block", 1},
		// The new attributes belong to elastic: not at policy level, and
		// elastic's min and max stay required beside them.
		{"outside", `3:3: Unsupported argument; An argument named "epochs"`, 1},
		{"block_outside", `3:3: Unsupported block type; Blocks of type "ps"`, 1},
		{"without_workers", `3:11: Missing required argument; The argument "min"`, 2},
	} {
		path := "testdata/job_elastic_ps_" + c.file + ".hcl"
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := path + ":" + c.want
		_, diags := ParseJobPolicy(path, src)
		if msg := FormatDiagnostics(diags); !diags.HasErrors() || !strings.HasPrefix(msg, want) {
			t.Errorf("%s: %s\nwant prefix %q", c.file, msg, want)
		}
		if len(diags) != c.n {
			t.Errorf("%s: %d errors, want %d:\n%s", c.file, len(diags), c.n, FormatDiagnostics(diags))
		}
		if _, _, _, d := SplitJobFile(path, src); !d.HasErrors() || !strings.HasPrefix(FormatDiagnostics(d), want) {
			t.Errorf("%s via SplitJobFile: %s", c.file, FormatDiagnostics(d))
		}
	}
}

// TestElasticPSMeta: the same checks on meta give a *MetaError naming the
// key and its value.
func TestElasticPSMeta(t *testing.T) {
	full := map[string]string{MetaVC: "r", MetaElastic: "1:8", MetaPS: "1:8", MetaPSGroup: "ps",
		MetaEpochs: "30", MetaBatchSize: "256", MetaScaling: "live"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(full)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "-" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	p, err := PolicyFromMeta(full)
	if err != nil || !p.TwoRole() || p.PSGroup != "ps" || p.PSMin != 1 || p.PSMax != 8 || p.Epochs != 30 ||
		p.BatchSize != 256 || p.Scaling != ScalingLive {
		t.Fatalf("%+v %v", p, err)
	}
	for _, ok := range []map[string]string{
		with(MetaPS, " 2 : 4 ", MetaEpochs, "0.5", MetaBatchSize, "8", MetaScaling, "checkpoint"),
		with(MetaPS, "-", MetaPSGroup, "-"),
		with(MetaEpochs, "-", MetaBatchSize, "-", MetaScaling, "-"),
		{MetaVC: "r", MetaElastic: "1:4"},
	} {
		p, err := PolicyFromMeta(ok)
		if err != nil {
			t.Errorf("%v: %v", ok, err)
			continue
		}
		if back, err := PolicyFromMeta(p.ToMeta()); err != nil || back != p {
			t.Errorf("%v: round trip %+v %v", ok, back, err)
		}
	}
	for _, c := range []struct {
		meta          map[string]string
		key, value, r string // r: a piece of the reason
	}{
		{with(MetaEpochs, "0"), MetaEpochs, "0", "positive number"},
		{with(MetaEpochs, "-3"), MetaEpochs, "-3", "positive number"},
		{with(MetaEpochs, "thirty"), MetaEpochs, "thirty", "positive number"},
		{with(MetaEpochs, "NaN"), MetaEpochs, "NaN", "positive number"},
		{with(MetaEpochs, "+Inf"), MetaEpochs, "+Inf", "positive number"},
		{with(MetaEpochs, "1e400"), MetaEpochs, "1e400", "positive number"},
		{with(MetaBatchSize, "64.5"), MetaBatchSize, "64.5", "positive integer"},
		{with(MetaBatchSize, "0"), MetaBatchSize, "0", "positive integer"},
		{with(MetaBatchSize, "99999999999"), MetaBatchSize, "99999999999", "positive integer"},
		{with(MetaBatchSize, "4"), MetaBatchSize, "4", "total batch below the maximum worker count"},
		{with(MetaScaling, "restart"), MetaScaling, "restart", `"live" or "checkpoint"`},
		{with(MetaScaling, ""), MetaScaling, "", `"live" or "checkpoint"`},
		{with(MetaPS, "0:2"), MetaPS, "0:2", "at least 1 parameter server"},
		{with(MetaPS, "4:2"), MetaPS, "4:2", "max is below min"},
		{with(MetaPS, "1:1.5"), MetaPS, "1:1.5", "whole numbers"},
		{with(MetaPS, "2"), MetaPS, "2", "min:max"},
		{with(MetaPS, "1:99999999"), MetaPS, "1:99999999", "out of range"},
		{with(MetaPSGroup, ""), MetaPSGroup, "", "must not be empty"},
		{with(MetaPSGroup, " ps"), MetaPSGroup, " ps", "space"},
		{with(MetaPSGroup, "-"), MetaPSGroup, "", "missing"},
		{with(MetaPS, "-"), MetaPSGroup, "ps", "needs rondo.ps"},
		// Elastic attributes need rondo.elastic; the first in key order is named.
		{with(MetaElastic, "-"), MetaBatchSize, "256", "needs rondo.elastic"},
		{with(MetaElastic, "-", MetaBatchSize, "-"), MetaEpochs, "30", "needs rondo.elastic"},
		{map[string]string{MetaVC: "r", MetaScaling: "live"}, MetaScaling, "live", "needs rondo.elastic"},
		{map[string]string{MetaVC: "r", MetaPS: "1:2", MetaPSGroup: "ps"}, MetaPS, "1:2", "needs rondo.elastic"},
	} {
		_, err := PolicyFromMeta(c.meta)
		var me *MetaError
		if !errors.As(err, &me) || me.Key != c.key || me.Value != c.value || !strings.Contains(me.Reason, c.r) {
			t.Errorf("%v: %v, want %s = %q: ...%s...", c.meta, err, c.key, c.value, c.r)
		}
	}
}

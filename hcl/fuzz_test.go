package hcl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseConfig feeds arbitrary text to the config parser: it must return
// a config or error diagnostics, never panic, and every error must carry a
// printable message.
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.hcl")
	more, _ := filepath.Glob("testdata/dir/*.hcl")
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`vc "a" { quota = { x = 1e400 } }`))
	f.Add([]byte(`vc "a" { gpus = { x = 1e400, y = -1e-400 } }`))
	f.Add([]byte(`cell_type "a" { child = "a"
count = 2 }`))
	f.Add([]byte(`round_seconds = -1`))
	f.Add([]byte(`vc "f" {
policy = "gandiva_fair"
trading = true
quantum = "6m"
max_migrations = 2
trade_margin = 0.05
user "alice" { tickets = 200 }
user "bob" { tickets = 1e400 }
}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := Parse(Source{Name: "fuzz.hcl", Src: src})
		if diags.HasErrors() == (cfg != nil) {
			t.Fatalf("config %v with errors %v", cfg != nil, diags.HasErrors())
		}
		for _, d := range diags {
			if FormatDiagnostic(d) == "" {
				t.Fatal("empty diagnostic")
			}
		}
		_, _ = ParseJobPolicy("fuzz.hcl", src)
	})
}

// FuzzJobPolicy feeds arbitrary text to the job policy parser (seeded with
// every job file of testdata, the two-role ones included): it must not
// panic, its errors must carry a message, SplitJobFile must accept what
// ParseJobPolicy accepts with the same policy, and an accepted policy must
// convert to meta and back unchanged (every field, the elastic and
// parameter-server ones included).
func FuzzJobPolicy(f *testing.F) {
	files, _ := filepath.Glob("testdata/job*.hcl")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`policy {
vc = "r"
weight = 1e301
elastic {
min = 1
max = 70000
epochs = 1e-400
batch_size = 2147483648
scaling = "checkpoint"
ps {
group = " ps"
min = 65536
max = 65536
}
}
}`))
	f.Add([]byte(`policy {
vc = "r"
slo = "1.5h"
steps = 7
elastic {
min = 3
max = 3
epochs = 0.25
ps {
group = "p"
min = 1
max = 1
}
}
}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, diags := ParseJobPolicy("fuzz.hcl", src)
		for _, d := range diags {
			if FormatDiagnostic(d) == "" {
				t.Fatal("empty diagnostic")
			}
		}
		if diags.HasErrors() {
			return
		}
		if p.TwoRole() && (p.PSGroup == "" || p.PSMin < 1 || p.PSMax < p.PSMin) {
			t.Fatalf("accepted a bad ps group: %+v", p)
		}
		if (p.Epochs != 0 || p.BatchSize != 0 || p.Scaling != "" || p.PSGroup != "") && !p.Elastic() {
			t.Fatalf("elastic attributes without elastic: %+v", p)
		}
		back, err := PolicyFromMeta(p.ToMeta())
		if err != nil || back != p {
			t.Fatalf("meta round trip of %+v: %+v, %v", p, back, err)
		}
		if sp, found, _, d := SplitJobFile("fuzz.hcl", src); found && (d.HasErrors() || sp != p) {
			t.Fatalf("SplitJobFile: %+v %s, ParseJobPolicy: %+v", sp, FormatDiagnostics(d), p)
		}
	})
}

// FuzzPolicyMeta: meta values for the elastic keys that PolicyFromMeta
// accepts convert to meta and back unchanged; what it refuses is a
// *MetaError.
func FuzzPolicyMeta(f *testing.F) {
	f.Add("1:8", "1:8", "ps", "30", "256", "live")
	f.Add(" 2 : 4 ", "1:1", "p s", "0.5", "4", "checkpoint")
	f.Add("1:4", "", "", "1e-320", "", "")
	f.Add("", "0:1", "", "NaN", "-1", "x")
	f.Fuzz(func(t *testing.T, elastic, ps, group, epochs, batch, scaling string) {
		m := map[string]string{MetaVC: "r"}
		for k, v := range map[string]string{MetaElastic: elastic, MetaPS: ps, MetaPSGroup: group,
			MetaEpochs: epochs, MetaBatchSize: batch, MetaScaling: scaling} {
			if v != "" {
				m[k] = v
			}
		}
		p, err := PolicyFromMeta(m)
		if err != nil {
			var me *MetaError
			if !errors.As(err, &me) || me.Key == "" {
				t.Fatalf("%v: %v is not a MetaError naming a key", m, err)
			}
			return
		}
		back, err := PolicyFromMeta(p.ToMeta())
		if err != nil || back != p {
			t.Fatalf("%v: round trip of %+v: %+v, %v", m, p, back, err)
		}
	})
}

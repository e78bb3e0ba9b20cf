package hcl

import (
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

package hcl

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGPUTypes(t *testing.T) {
	src := `gpu_type "a100-80g" {
  models = ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"]
}
gpu_type "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
throughputs = "tput/fleet.json"
`
	cfg, diags := Parse(Source{Name: "/etc/rondo/cluster.hcl", Src: []byte(src)})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	want := map[string]string{"NVIDIA A100-SXM4-80GB": "a100-80g", "NVIDIA A100 80GB PCIe": "a100-80g", "NVIDIA H100 80GB HBM3": "h100"}
	if got := cfg.TypeNames(); !reflect.DeepEqual(got, want) {
		t.Errorf("TypeNames = %v, want %v", got, want)
	}
	if cfg.Throughputs != filepath.FromSlash("/etc/rondo/tput/fleet.json") {
		t.Errorf("Throughputs = %q, want it relative to the config's directory", cfg.Throughputs)
	}
	if r := cfg.ThroughputsRange; r.Filename != "/etc/rondo/cluster.hcl" || r.Start.Line != 7 {
		t.Errorf("ThroughputsRange = %v", r)
	}
	// Absolute paths stay; no block, no mapping.
	cfg, diags = Parse(Source{Name: "c.hcl", Src: []byte(`throughputs = "/data/t.json"`)})
	if diags.HasErrors() || cfg.Throughputs != "/data/t.json" || cfg.TypeNames() != nil {
		t.Errorf("absolute: %v %q %v", diags, cfg.Throughputs, cfg.TypeNames())
	}
}

// Each bad gpu_type or throughputs input is exactly one error at the field
// at fault (file:line:col), naming the first declaration for duplicates.
func TestGPUTypeErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"duplicate type", "gpu_type \"a\" {\n  models = [\"X\"]\n}\ngpu_type \"a\" {\n  models = [\"Y\"]\n}\n",
			`f.hcl:4:10: Duplicate gpu_type; gpu_type "a" is already declared at f.hcl:1:1`},
		{"model twice across types", "gpu_type \"a\" {\n  models = [\"X\"]\n}\ngpu_type \"b\" {\n  models = [\"Y\", \"X\"]\n}\n",
			`f.hcl:5:18: Duplicate model; gpu_type "b": model "X" is already mapped at f.hcl:2:13 (gpu_type "a")`},
		{"model twice in one type", "gpu_type \"a\" {\n  models = [\"X\", \"X\"]\n}\n",
			`f.hcl:2:18: Duplicate model; gpu_type "a": model "X" is already mapped at f.hcl:2:13 (gpu_type "a")`},
		{"empty models", "gpu_type \"a\" {\n  models = []\n}\n",
			`f.hcl:2:12: Invalid models; gpu_type "a": models is empty`},
		{"missing models", "gpu_type \"a\" {\n}\n", `f.hcl:1:14: Missing required argument; The argument "models" is required`},
		{"models not a list", "gpu_type \"a\" {\n  models = \"X\"\n}\n", `f.hcl:2:12: Invalid models; gpu_type "a": models must be a list`},
		{"empty model", "gpu_type \"a\" {\n  models = [\" \"]\n}\n", `f.hcl:2:13: Invalid models; gpu_type "a": model " "`},
		{"bad type name", "gpu_type \"A100\" {\n  models = [\"X\"]\n}\n", `f.hcl:1:10: Invalid gpu_type name; gpu_type "A100"`},
		{"unknown attribute", "gpu_type \"a\" {\n  models = [\"X\"]\n  memory = 80\n}\n", `f.hcl:3:3: Unsupported argument`},
		{"throughputs empty", `throughputs = ""`, `f.hcl:1:15: Invalid throughputs; throughputs: want a file name`},
		{"throughputs not a string", `throughputs = ["a"]`, `f.hcl:1:15: Invalid value for throughputs; throughputs must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) { wantOneError(t, tc.src, tc.want) })
	}
	// Across files: the second file's block names the first file's.
	_, diags := Parse(Source{Name: "a.hcl", Src: []byte("gpu_type \"x\" {\n  models = [\"M\"]\n}\nthroughputs = \"t.json\"\n")},
		Source{Name: "b.hcl", Src: []byte("gpu_type \"y\" {\n  models = [\"M\"]\n}\nthroughputs = \"u.json\"\n")})
	got := FormatDiagnostics(diags)
	for _, want := range []string{`b.hcl:2:13: Duplicate model; gpu_type "y": model "M" is already mapped at a.hcl:2:13 (gpu_type "x")`,
		`b.hcl:4:1: Duplicate throughputs; throughputs is already set at a.hcl:4:15`} {
		if !strings.Contains(got, want) {
			t.Errorf("two files:\n%s\nwant %s", got, want)
		}
	}
}

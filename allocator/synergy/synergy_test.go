package synergy

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultShape: the embedded file parses (every profile passes Validate),
// holds the four sets, and every matrix is normalised to the base share.
func TestDefaultShape(t *testing.T) {
	tab := Default()
	want := map[string]struct {
		cores float64
		n     int
	}{"models": {3, 33}, "models-4": {4, 12}, "models-5": {5, 12}, "models-6": {6, 12}}
	if len(tab.Sets) != len(want) {
		t.Fatalf("sets: got %d, want %d", len(tab.Sets), len(want))
	}
	for name, w := range want {
		s := tab.Sets[name]
		if s == nil {
			t.Fatalf("set %q missing", name)
		}
		if s.CoresPerGPU != w.cores || s.MemGBPerGPU != 62.5 || len(s.Profiles) != w.n {
			t.Errorf("set %q: cores %v mem %v profiles %d, want %v 62.5 %d", name, s.CoresPerGPU, s.MemGBPerGPU, len(s.Profiles), w.cores, w.n)
		}
		for key, p := range s.Profiles {
			if err := p.Validate(); err != nil {
				t.Errorf("%s/%s: %v", name, key, err)
			}
			if got := p.Throughput(BaseCoresPerGPU, BaseMemGBPerGPU); got != 1 {
				t.Errorf("%s/%s: at the base share %v, want 1", name, key, got)
			}
			if len(p.CoresAxis) != 9 || len(p.MemAxis) != len(p.Matrix[0]) {
				t.Errorf("%s/%s: axes %d x %d", name, key, len(p.CoresAxis), len(p.MemAxis))
			}
			if p.GPUs > 1 && len(p.MemAxis) != 4 {
				t.Errorf("%s/%s: multi-GPU memory columns %d, want 4", name, key, len(p.MemAxis))
			}
		}
	}
	// In the base set the speedup is the matrix value at the best demand.
	for key, p := range tab.Sets["models"].Profiles {
		mem := p.MemGBPerGPUBest
		if mem == 20 { // the reference writes 20 for the 20.83 GB column
			mem = MemAxis[0]
		}
		if got := p.Throughput(p.CoresPerGPUBest, mem); math.Abs(got-p.Speedup) > 1e-9 {
			t.Errorf("models/%s: at best (%v, %v) %v, speedup %v", key, p.CoresPerGPUBest, mem, got, p.Speedup)
		}
	}
}

func TestLookupSetByCoresPerGPU(t *testing.T) {
	tab := Default()
	for _, c := range []struct {
		cores float64
		set   string
	}{{3, "models"}, {1, "models"}, {3.4, "models"}, {3.5, "models"}, {3.6, "models-4"},
		{4, "models-4"}, {5, "models-5"}, {6, "models-6"}, {8, "models-6"}, {24, "models-6"}} {
		if got := tab.SetFor(c.cores).Name; got != c.set {
			t.Errorf("SetFor(%v) = %q, want %q", c.cores, got, c.set)
		}
	}
	// The set decides the speedup: alexnet at 4 cores per GPU.
	p, err := tab.Lookup("alexnet", 1, 4)
	if err != nil || p.Speedup != 2.352 {
		t.Errorf("alexnet on 4 cores/GPU: %v %v, want speedup 2.352", p, err)
	}
}

func TestLookupByGPUs(t *testing.T) {
	tab := Default()
	for _, c := range []struct {
		name  string
		gpus  int
		cores float64
		key   string
	}{
		{"res18", 1, 3, "res18_1"},
		{"res18", 2, 3, "res18_2"},
		{"res18", 3, 3, "res18_2"}, // largest below
		{"res18", 4, 3, "res18_4"},
		{"res18", 8, 3, "res18_4"}, // larger than every profile: the largest
		{"res18", 16, 3, "res18_4"},
		{"res18", 0, 3, "res18_1"}, // nothing below: the smallest
		{"res18", 4, 4, "res18_1"}, // models-4 holds single-GPU profiles only
		{"shufflenet", 8, 3, "shufflenet_4"},
		{"shufflenet", 16, 3, "shufflenet_12"},
		{"res18_2", 8, 3, "res18_2"}, // explicit key wins over the job's size
		{"vae", 4, 3, "vae_1"},
	} {
		p, err := tab.Lookup(c.name, c.gpus, c.cores)
		if err != nil {
			t.Errorf("Lookup(%q, %d, %v): %v", c.name, c.gpus, c.cores, err)
			continue
		}
		if p.Key() != c.key {
			t.Errorf("Lookup(%q, %d, %v) = %s, want %s", c.name, c.gpus, c.cores, p.Key(), c.key)
		}
	}
	// 8-GPU res18 is assumed to behave per GPU like res18_4: 1.75 at 6 cores,
	// infeasible at 9.
	p, _ := tab.Lookup("res18", 8, 3)
	if p.Throughput(6, 62.5) != 1.75 || p.Throughput(9, 62.5) != 0 {
		t.Errorf("8-GPU res18: %v at 6 cores, %v at 9", p.Throughput(6, 62.5), p.Throughput(9, 62.5))
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := Default().Lookup("resnet18", 1, 3)
	if err == nil || err.Error() != `embedded profiles.json: set "models": profile "resnet18": unknown model or key` {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := Default().Lookup("res18_8", 8, 3); err == nil {
		t.Error("res18_8: no error (an unknown explicit key must not fall back)")
	}
}

// file writes one profile (res18_1 of the embedded data, changed by edit)
// as a one-set file and parses it.
func parseEdited(t *testing.T, key string, edit func(m map[string]any)) error {
	t.Helper()
	var raw map[string]map[string]map[string]any
	if err := json.Unmarshal(profilesJSON, &raw); err != nil {
		t.Fatal(err)
	}
	p := raw["models"]["res18_1"]
	edit(p)
	b, err := json.Marshal(map[string]any{"ops": map[string]any{key: p}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(b, "ops.json")
	return err
}

func row(n int, v float64) []any {
	r := make([]any, n)
	for i := range r {
		r[i] = v
	}
	return r
}

func TestParseErrors(t *testing.T) {
	matrix := func(rows, cols int) []any {
		m := make([]any, rows)
		for i := range m {
			m[i] = row(cols, 1)
		}
		return m
	}
	for _, c := range []struct {
		what string
		key  string
		edit func(m map[string]any)
		want string
	}{
		{"too many rows", "res18_1", func(m map[string]any) { m["throughput_matrix"] = matrix(10, 5) },
			`ops.json: set "ops": profile "res18_1": throughput_matrix: 10 rows, the cores axis has 9`},
		{"too many columns", "res18_1", func(m map[string]any) { m["throughput_matrix"] = matrix(9, 6) },
			`ops.json: set "ops": profile "res18_1": throughput_matrix[0]: 6 columns, the memory axis has 5`},
		{"ragged", "res18_1", func(m map[string]any) {
			mm := matrix(9, 5)
			mm[3] = row(4, 1)
			m["throughput_matrix"] = mm
		}, `ops.json: set "ops": profile "res18_1": throughput_matrix[3]: 4 columns, row 0 has 5`},
		{"empty", "res18_1", func(m map[string]any) { m["throughput_matrix"] = []any{} },
			`ops.json: set "ops": profile "res18_1": throughput_matrix: empty (use null for none)`},
		{"negative", "res18_1", func(m map[string]any) {
			mm := matrix(9, 5)
			mm[2].([]any)[4] = -0.5
			m["throughput_matrix"] = mm
		}, `ops.json: set "ops": profile "res18_1": throughput_matrix[2][4]: -0.5, want >= 0 (0 = infeasible)`},
		{"cores best 0", "res18_1", func(m map[string]any) { m["cpus_per_gpu_best"] = 0 },
			`ops.json: set "ops": profile "res18_1": cpus_per_gpu_best: 0, want > 0`},
		{"mem best negative", "res18_1", func(m map[string]any) { m["mem_gb_per_gpu_best"] = -1 },
			`ops.json: set "ops": profile "res18_1": mem_gb_per_gpu_best: -1, want > 0`},
		{"speedup < 1", "res18_1", func(m map[string]any) { m["speedup_over_proportional"] = 0.9 },
			`ops.json: set "ops": profile "res18_1": speedup_over_proportional: 0.9, want >= 1`},
		{"gpus 0", "res18_1", func(m map[string]any) { m["gpus"] = 0 },
			`ops.json: set "ops": profile "res18_1": gpus: 0, want >= 1`},
		{"key mismatch", "res18_2", func(m map[string]any) {},
			`ops.json: set "ops": profile "res18_2": model/gpus: name it "res18_1"`},
	} {
		err := parseEdited(t, c.key, c.edit)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got  %v\n want %s", c.what, err, c.want)
		}
	}
	// 0.0 is allowed (infeasible).
	if err := parseEdited(t, "res18_1", func(m map[string]any) {
		mm := matrix(9, 5)
		mm[8] = row(5, 0)
		m["throughput_matrix"] = mm
	}); err != nil {
		t.Errorf("0.0 entries: %v", err)
	}
	// JSON has no NaN: Validate catches one built in Go.
	p := *Default().Sets["models"].Profiles["res18_1"]
	p.Matrix = [][]float64{{1, math.NaN()}}
	if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), "throughput_matrix[0][1]: NaN") {
		t.Errorf("NaN entry: %v", err)
	}
	p = *Default().Sets["models"].Profiles["res18_1"]
	p.Speedup = math.NaN()
	if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), "speedup_over_proportional: NaN") {
		t.Errorf("NaN speedup: %v", err)
	}
	if _, err := Parse([]byte(`{"ops": [1]}`), "ops.json"); err == nil || !strings.HasPrefix(err.Error(), "ops.json: ") {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := Parse([]byte(`{}`), "ops.json"); err == nil || err.Error() != "ops.json: no profile sets" {
		t.Errorf("empty file: %v", err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(path, profilesJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tab.Lookup("alexnet", 1, 3)
	if err != nil || p.Throughput(12, 125) != 2.94 {
		t.Errorf("loaded alexnet_1: %v %v", p, err)
	}
	if _, err := tab.Lookup("nope", 1, 3); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("unknown name in a loaded file must name the file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"s":{"x_1":{"model":"x","gpus":1,"cpus_per_gpu_best":1,"mem_gb_per_gpu_best":1,"speedup_over_proportional":0.5}}}`), 0o644)
	if _, err := Load(bad); err == nil || err.Error() != bad+`: set "s": profile "x_1": speedup_over_proportional: 0.5, want >= 1` {
		t.Errorf("bad file: %v", err)
	}
}

func TestKnown(t *testing.T) {
	tb := Default()
	for _, ok := range []string{"alexnet", "res18_2", "gnmt"} {
		if err := tb.Known(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err := tb.Known("alexnett")
	if err == nil || !strings.Contains(err.Error(), `unknown profile "alexnett" in embedded profiles.json (models: alexnet,`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("alexnett: %v", err)
	}
}

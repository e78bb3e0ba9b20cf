package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// TestDL2SizerNames: the sizers a dl2 block may name (hcl, which does not
// link policies/dl2) are the learned one and exactly dl2.Baselines().
func TestDL2SizerNames(t *testing.T) {
	want := []string{rhcl.DL2Learned}
	for n := range dl2.Baselines() {
		want = append(want, n)
	}
	got := slices.Clone(rhcl.DL2Sizers)
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("hcl.DL2Sizers %v, want %v (learned and dl2.Baselines())", rhcl.DL2Sizers, want)
	}
}

// writeDL2VC writes a config of one dl2 VC with the given dl2 block (""
// for none) to dir/c.hcl and returns its path.
func writeDL2VC(t *testing.T, dir, block string) string {
	t.Helper()
	p := filepath.Join(dir, "c.hcl")
	if err := os.WriteFile(p, []byte("vc \"ml\" {\n  policy = \"dl2\"\n"+block+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVCSizer: a dl2 VC's sizer is its dl2 block's: a baseline by name,
// the learned sizer with the block's model file (relative to the config's
// directory), or with the shipped model without a block or a model. A
// missing or corrupt model file is an error at the model value's
// file:line:col naming the file, from vcSizer, vcMechanism and
// checkVCSizers alike.
func TestVCSizer(t *testing.T) {
	dir := t.TempDir()
	model := dl2.NewModel(4, dl2.Table1().Names(), 1, []int{8}, 1)
	if err := model.Save(filepath.Join(dir, "m.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{\"schema\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(block string) rhcl.VC {
		t.Helper()
		cfg, diags := rhcl.LoadPath(writeDL2VC(t, dir, block))
		if diags.HasErrors() {
			t.Fatal(rhcl.FormatDiagnostics(diags))
		}
		return cfg.VCs[0]
	}
	for _, c := range []struct {
		block, name string
		window      int // the learned sizer's model's window; 0: a baseline
	}{
		{"", "dl2", 0},
		{"  dl2 {}\n", "dl2", 0},
		{"  dl2 {\n    sizer = \"optimus\"\n  }\n", "optimus", 0},
		{"  dl2 {\n    model = \"m.json\"\n  }\n", "dl2", 4},
	} {
		sz, err := vcSizer(load(c.block), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.block, err)
		}
		if sz.Name() != c.name {
			t.Errorf("%q: sizer %s, want %s", c.block, sz.Name(), c.name)
		}
		if c.name != "dl2" {
			continue
		}
		m := sz.(*dl2.Policy).Model()
		if m == nil {
			t.Fatalf("%q: the learned sizer has no model (it would decide with DRF)", c.block)
		}
		if c.window != 0 && m.Window != c.window {
			t.Errorf("%q: model window %d, want the file's %d", c.block, m.Window, c.window)
		}
		if def, _ := dl2.DefaultModel(); c.window == 0 && m.Window != def.Window {
			t.Errorf("%q: model window %d, want the shipped model's %d", c.block, m.Window, def.Window)
		}
	}
	cfgPath := filepath.Join(dir, "c.hcl")
	for file, want := range map[string]string{
		"missing.json": cfgPath + `:4:13: Invalid dl2 model; vc "ml": dl2: model: open ` + filepath.Join(dir, "missing.json") + ": no such file or directory",
		"bad.json":     cfgPath + `:4:13: Invalid dl2 model; vc "ml": dl2: model: ` + filepath.Join(dir, "bad.json") + ": ",
	} {
		v := load("  dl2 {\n    model = \"" + file + "\"\n  }\n")
		_, err := vcSizer(v, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: vcSizer: %v\nwant %q...", file, err, want)
		}
		if _, err2 := vcMechanism(v, 1200, false, func(string, ...any) {}); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: vcMechanism: %v", file, err2)
		}
		cfg := &rhcl.Config{VCs: []rhcl.VC{v, {Name: "other", Policy: "fifo"}}}
		if err2 := checkVCSizers(cfg); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: checkVCSizers: %v", file, err2)
		}
	}
}

// TestDL2ModelConfigErrors: a dl2 VC whose model file is missing fails
// `rondo config validate`, the agent's load (start and SIGHUP reload),
// and `rondo simulate --vc-config`, each naming the file.
func TestDL2ModelConfigErrors(t *testing.T) {
	dir := t.TempDir()
	p := writeDL2VC(t, dir, "  dl2 {\n    model = \"models/dl2.json\"\n  }\n")
	want := p + `:4:13: Invalid dl2 model; vc "ml": dl2: model: open ` + filepath.Join(dir, "models", "dl2.json") + ":"
	code, out, errOut := runCaptured(t, "config", "validate", p)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("config validate: code %d: %q%q\nwant %q", code, out, errOut, want)
	}
	c := newAgentCmd()
	c.config = p
	if _, err := c.load(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("agent load: %v\nwant %q", err, want)
	}
	code, _, errOut = runCaptured(t, "simulate", "--vc-config", p, "--trace", "continuous", "--jobs", "2", "--cluster", "v100=4")
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("simulate --vc-config: code %d: %q\nwant %q", code, errOut, want)
	}
	// With the file in place all three pass.
	if err := os.MkdirAll(filepath.Join(dir, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dl2.NewModel(4, dl2.Table1().Names(), 1, []int{8}, 1).Save(filepath.Join(dir, "models", "dl2.json")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCaptured(t, "config", "validate", p); code != 0 || errOut != "" {
		t.Errorf("config validate: code %d: %s%s", code, out, errOut)
	}
	if _, err := c.load(); err != nil {
		t.Errorf("agent load: %v", err)
	}
}

// TestDeciderKeyDL2: the agent rebuilds its decider when a dl2 VC's block
// or its model file's content changes.
func TestDeciderKeyDL2(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "m.json")
	if err := dl2.NewModel(4, dl2.Table1().Names(), 1, []int{8}, 1).Save(mp); err != nil {
		t.Fatal(err)
	}
	key := func(block string) string {
		t.Helper()
		c := newAgentCmd()
		c.config = writeDL2VC(t, dir, block)
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		return deciderKey(s)
	}
	withModel := "  dl2 {\n    model = \"m.json\"\n  }\n"
	none, drf, fifo, m0 := key(""), key("  dl2 {\n    sizer = \"drf\"\n  }\n"), key("  dl2 {\n    sizer = \"fifo\"\n  }\n"), key(withModel)
	if none == drf || drf == fifo || none == m0 {
		t.Errorf("the sizer or model changed, the key did not:\n%s\n%s\n%s\n%s", none, drf, fifo, m0)
	}
	if k := key("  dl2 {}\n"); k != none {
		t.Errorf("an empty dl2 block is no block, yet the key changed:\n%s\n%s", none, k)
	}
	if err := dl2.NewModel(4, dl2.Table1().Names(), 2, []int{8}, 1).Save(mp); err != nil {
		t.Fatal(err)
	}
	if k := key(withModel); k == m0 {
		t.Errorf("the model file changed, the key did not")
	}
}

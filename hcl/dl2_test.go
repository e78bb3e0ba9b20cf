package hcl

import (
	"path/filepath"
	"testing"
)

// TestDL2Config: testdata/dl2.hcl's dl2 blocks reach the VCs: a model file
// relative to the config's directory (the learned sizer by default), a
// baseline, and a dl2 VC without a block (nil: the learned sizer with the
// shipped model).
func TestDL2Config(t *testing.T) {
	cfg, diags := LoadPath("testdata/dl2.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	ml, base, plain := cfg.VCs[0], cfg.VCs[1], cfg.VCs[2]
	want := filepath.Join("testdata", "models", "dl2.json")
	if !ml.IsDL2() || ml.DL2 == nil || ml.DL2.Sizer != DL2Learned || ml.DL2.Model != want {
		t.Errorf("ml: %+v", ml.DL2)
	}
	if r := ml.DL2.ModelRange; r.Filename != "testdata/dl2.hcl" || r.Start.Line != 6 || r.Start.Column != 13 {
		t.Errorf("ml: model range %v", r)
	}
	if r := ml.DL2.Range; r.Filename != "testdata/dl2.hcl" || r.Start.Line != 5 || r.Start.Column != 3 {
		t.Errorf("ml: block range %v", r)
	}
	if s, m := ml.DL2Sizer(); s != DL2Learned || m != want {
		t.Errorf("ml: DL2Sizer() = %q, %q", s, m)
	}
	if base.DL2 == nil || base.DL2.Sizer != "optimus" || base.DL2.Model != "" {
		t.Errorf("base: %+v", base.DL2)
	}
	if s, m := base.DL2Sizer(); s != "optimus" || m != "" {
		t.Errorf("base: DL2Sizer() = %q, %q", s, m)
	}
	if !plain.IsDL2() || plain.DL2 != nil {
		t.Errorf("plain: %+v", plain.DL2)
	}
	if s, m := plain.DL2Sizer(); s != DL2Learned || m != "" {
		t.Errorf("plain: DL2Sizer() = %q, %q", s, m)
	}
}

// TestDL2Defaults: an empty dl2 block is the learned sizer with the shipped
// model; an absolute model path is kept as written; every sizer name is
// accepted.
func TestDL2Defaults(t *testing.T) {
	parse := func(block string) *DL2Config {
		t.Helper()
		cfg, diags := Parse(Source{Name: "d/f.hcl", Src: []byte("vc \"ml\" {\n  policy = \"dl2\"\n" + block + "}\n")})
		if diags.HasErrors() {
			t.Fatal(FormatDiagnostics(diags))
		}
		return cfg.VCs[0].DL2
	}
	if d := parse("  dl2 {}\n"); d == nil || d.Sizer != DL2Learned || d.Model != "" || d.ModelRange != (DL2Config{}).ModelRange {
		t.Errorf("empty block: %+v", d)
	}
	if d := parse("  dl2 {\n    model = \"/m/dl2.json\"\n  }\n"); d.Model != "/m/dl2.json" {
		t.Errorf("absolute model: %q", d.Model)
	}
	if d := parse("  dl2 {\n    sizer = \"learned\"\n    model = \"m.json\"\n  }\n"); d.Model != filepath.Join("d", "m.json") {
		t.Errorf("relative model: %q", d.Model)
	}
	for _, s := range DL2Sizers {
		if d := parse("  dl2 {\n    sizer = \"" + s + "\"\n  }\n"); d.Sizer != s {
			t.Errorf("sizer %q: %+v", s, d)
		}
	}
}

// TestDL2Errors: each bad dl2 block is exactly one error, at file:line:col,
// naming the field; no config comes back.
func TestDL2Errors(t *testing.T) {
	dl2 := func(body string) string { return "vc \"ml\" {\n  policy = \"dl2\"\n" + body + "}\n" }
	other := func(body string) string { return "vc \"ml\" {\n  policy = \"fifo\"\n" + body + "}\n" }
	for _, c := range []struct{ src, want string }{
		{dl2("  dl2 {\n    sizer = \"dl2\"\n  }\n"),
			`f.hcl:4:13: Unknown dl2 sizer; vc "ml": dl2: sizer "dl2": want one of learned, drf, fifo, optimus, srtf, tetris`},
		{dl2("  dl2 {\n    sizer = \"\"\n  }\n"),
			`f.hcl:4:13: Unknown dl2 sizer; vc "ml": dl2: sizer "": want one of learned, drf, fifo, optimus, srtf, tetris`},
		// A bad sizer is the only error, model or not.
		{dl2("  dl2 {\n    sizer = \"las\"\n    model = \"m.json\"\n  }\n"),
			`f.hcl:4:13: Unknown dl2 sizer; vc "ml": dl2: sizer "las": want one of`},
		{dl2("  dl2 {\n    sizer = 3\n  }\n"), `f.hcl:4:13: Unknown dl2 sizer; vc "ml": dl2: sizer "3": want one of`},
		{dl2("  dl2 {\n    sizer = [\"drf\"]\n  }\n"), `f.hcl:4:13: Invalid value for sizer; sizer must be a string`},
		{dl2("  dl2 {\n    sizer = \"drf\"\n    model = \"m.json\"\n  }\n"),
			`f.hcl:5:5: Model with a baseline sizer; vc "ml": dl2: model: only the learned sizer reads a model (sizer is "drf")`},
		{dl2("  dl2 {\n    model = \"\"\n  }\n"),
			`f.hcl:4:13: Invalid model; vc "ml": dl2: model: want a file name (leave model out for the shipped model)`},
		{dl2("  dl2 {\n    model = [\"m.json\"]\n  }\n"), `f.hcl:4:13: Invalid value for model; model must be a string`},
		{dl2("  dl2 {\n    models = \"m.json\"\n  }\n"), `f.hcl:4:5: Unsupported argument; An argument named "models" is not expected here.`},
		{dl2("  dl2 {\n    sizer = \"drf\"\n  }\n  dl2 {\n    sizer = \"fifo\"\n  }\n"),
			`f.hcl:6:3: Duplicate dl2 block; vc "ml": a dl2 block is already declared at f.hcl:3:3`},
		{dl2("  dl2 \"x\" {}\n"), `f.hcl:3:7: Extraneous label for dl2`},
		// Only a dl2 VC.
		{other("  dl2 {\n    sizer = \"drf\"\n  }\n"),
			`f.hcl:3:3: Not a dl2 VC; vc "ml": dl2: only a dl2 VC chooses its sizer (policy is "fifo")`},
		{"vc \"ml\" {\n  dl2 {}\n}\n",
			`f.hcl:2:3: Not a dl2 VC; vc "ml": dl2: only a dl2 VC chooses its sizer (policy is "max_min_fairness_perf")`},
		// A bad policy is the only error.
		{"vc \"ml\" {\n  policy = \"dl3\"\n  dl2 {}\n}\n", `f.hcl:2:12: Unknown VC policy; vc "ml": policy unknown policy "dl3"`},
	} {
		wantOneError(t, c.src, c.want)
	}
}

// TestDL2Files: the malformed testdata files, one check each.
func TestDL2Files(t *testing.T) {
	for file, want := range map[string]string{
		"dl2_unknown_sizer.hcl":  `testdata/dl2_unknown_sizer.hcl:4:13: Unknown dl2 sizer; vc "ml": dl2: sizer "dl2": want one of learned, drf, fifo, optimus, srtf, tetris`,
		"dl2_model_baseline.hcl": `testdata/dl2_model_baseline.hcl:5:5: Model with a baseline sizer; vc "ml": dl2: model: only the learned sizer reads a model (sizer is "drf")`,
		"dl2_not_dl2.hcl":        `testdata/dl2_not_dl2.hcl:3:3: Not a dl2 VC; vc "ml": dl2: only a dl2 VC chooses its sizer (policy is "fifo")`,
		"dl2_duplicate.hcl":      `testdata/dl2_duplicate.hcl:6:3: Duplicate dl2 block; vc "ml": a dl2 block is already declared at testdata/dl2_duplicate.hcl:3:3`,
	} {
		cfg, diags := LoadPath("testdata/" + file)
		if cfg != nil || len(diags) != 1 || FormatDiagnostic(diags[0]) != want {
			t.Errorf("%s: config %v, %q\nwant %q", file, cfg != nil, FormatDiagnostics(diags), want)
		}
	}
}

package hcl

import (
	"testing"
	"time"
)

// TestPreemptionConfig: testdata/preemption.hcl's top level and VCs, each
// VC's attributes over the top level's (PreemptionOf), with the ranges of
// the values in force.
func TestPreemptionConfig(t *testing.T) {
	cfg, diags := LoadPath("testdata/preemption.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	top := cfg.Preemption
	if top.MinRuntime != 30*time.Minute || !top.CheckpointAware || top.ReserveAfter != time.Hour || !top.IsSet() {
		t.Errorf("top level = %+v", top)
	}
	if r := top.MinRuntimeRange; r.Filename != "testdata/preemption.hcl" || r.Start.Line != 5 || r.Start.Column != 20 {
		t.Errorf("min_runtime range = %v", r)
	}
	type eff struct {
		min   time.Duration
		aware bool
		res   time.Duration
	}
	for vc, want := range map[string]eff{
		"research": {0, true, time.Hour},                        // own min_runtime "0s"
		"prod":     {30 * time.Minute, false, 20 * time.Minute}, // own checkpoint_aware and reserve_after
		"fair":     {30 * time.Minute, true, time.Hour},         // the top level's (its mechanism ignores them)
		"":         {30 * time.Minute, true, time.Hour},         // the opportunistic engine
		"nope":     {30 * time.Minute, true, time.Hour},
	} {
		p := cfg.PreemptionOf(vc)
		if got := (eff{p.MinRuntime, p.CheckpointAware, p.ReserveAfter}); got != want {
			t.Errorf("PreemptionOf(%q) = %+v, want %+v", vc, got, want)
		}
	}
	if r := cfg.PreemptionOf("research").MinRuntimeRange; r.Start.Line != 11 {
		t.Errorf("research's min_runtime is its own (line 11), range %v", r)
	}
	if r := cfg.PreemptionOf("research").ReserveAfterRange; r.Start.Line != 7 {
		t.Errorf("research's reserve_after is the top level's (line 7), range %v", r)
	}
	if cfg.VCs[2].Preemption.IsSet() {
		t.Errorf("fair sets nothing: %+v", cfg.VCs[2].Preemption)
	}
}

// TestPreemptionDefaults: unset everywhere, every engine runs Gavel's
// mechanism as it was.
func TestPreemptionDefaults(t *testing.T) {
	cfg, diags := Parse(Source{Name: "f.hcl", Src: []byte("vc \"a\" {\n  gpus = { v100 = 2 }\n}\n")})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if p := cfg.PreemptionOf("a"); p != (Preemption{}) || p.IsSet() {
		t.Errorf("defaults = %+v", p)
	}
}

// TestPreemptionErrors: each bad input is exactly one error at
// file:line:col naming the field; no config comes back.
func TestPreemptionErrors(t *testing.T) {
	vc := func(body string) string { return "vc \"a\" {\n  gpus = { v100 = 2 }\n" + body + "}\n" }
	for _, c := range []struct{ src, want string }{
		{vc("  min_runtime = \"thirty\"\n"), `f.hcl:3:17: Invalid min_runtime; vc "a": min_runtime: "thirty" is not a duration (e.g. "30m")`},
		{vc("  min_runtime = 30\n"), `f.hcl:3:17: Invalid min_runtime; vc "a": min_runtime: "30" is not a duration (e.g. "30m")`},
		{vc("  min_runtime = \"-1m\"\n"), `f.hcl:3:17: Invalid min_runtime; vc "a": min_runtime: -1m must be >= 0`},
		{vc("  reserve_after = \"-5s\"\n"), `f.hcl:3:19: Invalid reserve_after; vc "a": reserve_after: -5s must be >= 0`},
		{vc("  reserve_after = true\n"), `f.hcl:3:19: Invalid reserve_after; vc "a": reserve_after: "true" is not a duration (e.g. "30m")`},
		{vc("  checkpoint_aware = \"maybe\"\n"), `f.hcl:3:22: Invalid value for checkpoint_aware; checkpoint_aware must be a bool`},
		{vc("  min_runtime = [\"1m\"]\n"), `f.hcl:3:17: Invalid value for min_runtime; min_runtime must be a string`},
		{"min_runtime = \"-2h\"\n", `f.hcl:1:15: Invalid min_runtime; min_runtime: -2h must be >= 0`},
		{"reserve_after = \"soon\"\n", `f.hcl:1:17: Invalid reserve_after; reserve_after: "soon" is not a duration (e.g. "30m")`},
		{"checkpoint_aware = 1\n", `f.hcl:1:20: Invalid value for checkpoint_aware; checkpoint_aware must be a bool`},
		// Another mechanism than the engine's.
		{"vc \"f\" {\n  policy = \"gandiva_fair\"\n  min_runtime = \"10m\"\n}\n",
			`f.hcl:3:3: Not an engine VC; vc "f": min_runtime: a gandiva_fair VC's mechanism does not preempt by it (policy is "gandiva_fair")`},
		{"vc \"d\" {\n  policy = \"dl2\"\n  checkpoint_aware = true\n}\n",
			`f.hcl:3:3: Not an engine VC; vc "d": checkpoint_aware: a dl2 VC's mechanism does not preempt by it (policy is "dl2")`},
		// A bad policy is the only error.
		{"vc \"f\" {\n  policy = \"fiffo\"\n  min_runtime = \"-1m\"\n}\n", `f.hcl:2:12: Unknown VC policy; vc "f": policy unknown policy "fiffo"`},
	} {
		wantOneError(t, c.src, c.want)
	}
}

// TestPreemptionFiles: a top-level attribute in two files is an error at
// the second; the malformed testdata file names its field.
func TestPreemptionFiles(t *testing.T) {
	a := Source{Name: "a.hcl", Src: []byte("min_runtime = \"10m\"\n")}
	b := Source{Name: "b.hcl", Src: []byte("round_seconds = 60\nmin_runtime = \"20m\"\n")}
	cfg, diags := Parse(a, b)
	want := `b.hcl:2:1: Duplicate min_runtime; min_runtime is already set at a.hcl:1:15`
	if cfg != nil || len(diags) != 1 || FormatDiagnostic(diags[0]) != want {
		t.Errorf("config %v, %q\nwant %q", cfg != nil, FormatDiagnostics(diags), want)
	}
	cfg, diags = LoadPath("testdata/preemption_negative.hcl")
	want = `testdata/preemption_negative.hcl:3:19: Invalid reserve_after; vc "research": reserve_after: -10m must be >= 0`
	if cfg != nil || len(diags) != 1 || FormatDiagnostic(diags[0]) != want {
		t.Errorf("config %v, %q\nwant %q", cfg != nil, FormatDiagnostics(diags), want)
	}
}

// TestPreemptionExample: jobs/cluster-preemption.hcl parses with its
// settings in force for its VC.
func TestPreemptionExample(t *testing.T) {
	cfg, diags := LoadPath("../jobs/cluster-preemption.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	p := cfg.PreemptionOf("research")
	if p.MinRuntime != 2*time.Minute || !p.CheckpointAware || p.ReserveAfter != time.Minute {
		t.Errorf("research = %+v", p)
	}
}

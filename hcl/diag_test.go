package hcl

import (
	"strings"
	"testing"
)

// wantOneError parses src as one config file and wants it refused with
// exactly one diagnostic, on one line, starting with want.
func wantOneError(t *testing.T, src, want string) {
	t.Helper()
	cfg, diags := Parse(Source{Name: "f.hcl", Src: []byte(src)})
	if cfg != nil {
		t.Errorf("%s: config returned beside errors", src)
	}
	if len(diags) != 1 {
		t.Errorf("%s: %d diagnostics, want 1:\n%s", src, len(diags), FormatDiagnostics(diags))
		return
	}
	if got := FormatDiagnostic(diags[0]); !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", src, got, want)
	}
}

package hcl

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCgoDeps: parsing a config must not link the cgo LP solver (nor any
// other cgo package outside the standard library), so that hcl builds and
// runs with CGO_ENABLED=0. Policy names come from policies/names.
func TestNoCgoDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		n++
		if strings.HasSuffix(f[0], "/policies/lp") || strings.HasSuffix(f[0], "/policies") {
			t.Errorf("hcl imports %s (the solvers); use policies/names", f[0])
		}
		if f[1] == "false" && f[2] != "0" {
			t.Errorf("hcl imports cgo package %s", f[0])
		}
	}
	if n < 10 {
		t.Fatalf("go list listed %d packages; expected hcl's dependencies", n)
	}
}

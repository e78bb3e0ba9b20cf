package names

import (
	"sort"
	"strings"
	"testing"
)

func TestSortedAndAliasesResolve(t *testing.T) {
	if !sort.StringsAreSorted(canonical) {
		t.Fatal("canonical must be sorted (IsCanonical binary-searches it)")
	}
	for a, c := range aliases {
		if IsCanonical(a) {
			t.Errorf("alias %q shadows a canonical name", a)
		}
		if got, err := Canonical(a); err != nil || got != c {
			t.Errorf("Canonical(%q) = %q, %v; want %q", a, got, err, c)
		}
	}
	for _, n := range canonical {
		if got, err := Canonical(n); err != nil || got != n {
			t.Errorf("Canonical(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := Canonical("nope"); err == nil || !strings.Contains(err.Error(), `unknown policy "nope"`) {
		t.Errorf("Canonical(nope) = %v", err)
	}
}

func TestPacks(t *testing.T) {
	for name, want := range map[string]bool{"max_min_fairness_packed": true, "gandiva": true, "fifo_packed": true,
		"max_min_fairness_perf": false, "fifo": false, "nonsense_packed": false} {
		if Packs(name) != want {
			t.Errorf("Packs(%q) = %v", name, !want)
		}
	}
}

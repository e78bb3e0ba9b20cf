package throughputs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultShape(t *testing.T) {
	tb := Default()
	for _, typ := range []string{"k80", "p100", "v100"} {
		keys := tb.Keys(typ)
		if len(keys) != 83 {
			t.Fatalf("%s: %d job configurations, want 83 (26 at sf 1 + 19 at 2, 4, 8)", typ, len(keys))
		}
		per := map[int]int{}
		for _, k := range keys {
			per[k.ScaleFactor]++
		}
		if per[1] != 26 || per[2] != 19 || per[4] != 19 || per[8] != 19 {
			t.Fatalf("%s: configurations per scale factor %v", typ, per)
		}
	}
}

func TestKnownValues(t *testing.T) {
	tb := Default()
	v, ok := tb.Lookup("A3C", 1, "k80")
	if !ok || v != 3.4387678290723933 {
		t.Fatalf("A3C on k80 = %v, %v", v, ok)
	}
	p, ok := tb.Pair(Key{"A3C", 1}, Key{"ResNet-18 (batch size 16)", 1}, "k80")
	if !ok || p != [2]float64{1.9521225634307098, 2.1343707333130646} {
		t.Fatalf("pair = %v, %v", p, ok)
	}
	if _, ok := tb.Lookup("A3C", 2, "v100"); ok {
		t.Fatal("A3C is single-GPU only")
	}
	// Every pair above scale factor 1 is [0, 0].
	for _, typ := range []string{"v100", "p100", "k80"} {
		for _, a := range tb.Keys(typ) {
			for _, b := range tb.Keys(typ) {
				pv, ok := tb.Pair(a, b, typ)
				if ok && a.ScaleFactor > 1 && (pv[0] != 0 || pv[1] != 0) {
					t.Fatalf("%s %v+%v = %v", typ, a, b, pv)
				}
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey("('ResNet-50 (batch size 64)', 8)")
	if err != nil || k != (Key{"ResNet-50 (batch size 64)", 8}) {
		t.Fatalf("%v %v", k, err)
	}
	if k.String() != "('ResNet-50 (batch size 64)', 8)" {
		t.Fatal(k.String())
	}
	for _, bad := range []string{"", "A3C", "('A3C')", "('A3C', x)", "(A3C, 1)", "('A3C', 0)"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(`{"v100": {"('A', 1)": {"null": 2.5, "('B', 1)": [1, 2]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tb.Lookup("A", 1, "v100"); v != 2.5 {
		t.Fatal(v)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := Parse([]byte(`{"v100": {"bad": {"null": 1}}}`)); err == nil {
		t.Fatal("bad key accepted")
	}
}

package throughputs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// A bad file's error names the file, the line and column in it and, where
// one is known, the value at fault; throughputs are finite and not
// negative, a pair's value exactly two of them.
func TestParseErrors(t *testing.T) {
	const head = "{\n  \"v100\": {\n    \"('A', 1)\": {"
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", head + `"null": x}}}`, `3:26: invalid character 'x' looking for beginning of value`},
		{"trailing comma", head + `"null": 1,}}}`, `3:28: invalid character '}' looking for beginning of object key string`},
		{"syntax on a later line", head + "\n      \"null\": 1.2.3}}}", `4:18: invalid character '.' after object key:value pair`},
		{"truncated", head + `"null": 1}}`, `3:29: unexpected end of file`},
		{"empty", ``, `1:1: unexpected end of file`},
		{"trailing data", `{} x`, `1:4: invalid character 'x' after top-level value`},
		{"not an object", `[]`, `1:1: the file: want an object, got an array`},
		{"type not an object", "{\n  \"v100\": []}", `2:11: v100: want an object, got an array`},
		{"negative", head + `"null": -1}}}`, `3:26: v100 ('A', 1) isolated throughput: -1 is negative`},
		{"not finite", head + `"null": 1e999}}}`, `3:26: v100 ('A', 1) isolated throughput: 1e999 is not a finite number`},
		{"null", head + `"null": null}}}`, `3:26: v100 ('A', 1) isolated throughput: want a number, got null`},
		{"string", head + `"null": "2"}}}`, `3:26: v100 ('A', 1) isolated throughput: want a number, got a string`},
		{"pair negative", head + `"null": 1, "('B', 1)": [1, -2]}}}`, `3:45: v100 ('A', 1) ('B', 1) pair throughput: -2 is negative`},
		{"pair short", head + `"null": 1, "('B', 1)": [1]}}}`, `3:41: v100 ('A', 1) ('B', 1) pair throughput: want [a, b] (the two jobs' steps/s), got 1 value(s)`},
		{"pair long", head + `"null": 1, "('B', 1)": [1, 2, 3]}}}`, `3:48: v100 ('A', 1) ('B', 1) pair throughput: want [a, b] (the two jobs' steps/s), got more values`},
		{"pair not an array", head + `"null": 1, "('B', 1)": 3}}}`, `3:41: v100 ('A', 1) ('B', 1) pair throughput: want [a, b] (the two jobs' steps/s), got a number`},
		{"bad job key", "{\n  \"v100\": {\n    \"A\": {\"null\": 1}}}", `3:5: v100: job key "A": not a tuple`},
		{"bad pair key", head + `"null": 1, "B": [1, 2]}}}`, `3:29: v100 ('A', 1): job key "B": not a tuple`},
		{"column counts characters", "{\"v100\": {\"('\u00e9\u00e9', 1)\": {\"null\": -1}}}", `1:33: v100 ('éé', 1) isolated throughput: -1 is negative`},
	} {
		_, err := Parse([]byte(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %q:\n got %v\nwant %s...", tc.name, tc.in, err, tc.want)
		}
	}

	// Load and ParseFile put the file's name in front.
	path := filepath.Join(t.TempDir(), "throughputs.json")
	if err := os.WriteFile(path, []byte(head+"\n      \"null\": 2,\n      \"('B', 1)\": [1, x]}}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || err.Error() != path+":5:23: invalid character 'x' looking for beginning of value" {
		t.Fatalf("Load: %v", err)
	}
	if _, err := ParseFile("t.json", []byte(`{"v100": {"('A', 1)": {"null": -0.5}}}`)); err == nil ||
		!strings.HasPrefix(err.Error(), "t.json:1:32: v100 ('A', 1) isolated throughput: -0.5 is negative") {
		t.Fatalf("ParseFile: %v", err)
	}
	// 0 is a measurement (cannot run there), not an error.
	tb, err := Parse([]byte(`{"v100": {"('A', 1)": {"null": 0, "('B', 1)": [0, 0]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := tb.Lookup("A", 1, "v100"); !ok || v != 0 {
		t.Fatalf("0: %v %v", v, ok)
	}
}

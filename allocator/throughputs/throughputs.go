// Package throughputs loads Gavel's measured training throughputs: per GPU
// type, per job configuration (model, scale factor), the isolated steps/s of
// the whole job and the two jobs' steps/s when a pair shares one GPU.
//
// The measurements in data/ come from Gavel (MIT licence, data/LICENSE) and
// are embedded; Load reads another file of the same shape.
package throughputs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

//go:embed data/simulation_throughputs.json
var simulationJSON []byte

// Key names one job configuration: a model (with its batch size) at a scale
// factor (number of GPUs).
type Key struct {
	Model       string
	ScaleFactor int
}

func (k Key) String() string { return fmt.Sprintf("('%s', %d)", k.Model, k.ScaleFactor) }

type entry struct {
	isolated float64
	pairs    map[Key][2]float64
}

// Table holds the measurements. It is read-only once built and safe for
// concurrent use.
type Table struct {
	types map[string]map[Key]*entry
	added map[string]bool // types an overlay added (Over)
}

var (
	defaultOnce  sync.Once
	defaultTable *Table
	defaultErr   error
)

// Default returns the embedded simulation throughputs (the file the paper's
// simulated figures use). It panics if the embedded data is corrupt, which a
// test rules out.
func Default() *Table {
	defaultOnce.Do(func() { defaultTable, defaultErr = Parse(simulationJSON) })
	if defaultErr != nil {
		panic("throughputs: embedded data: " + defaultErr.Error())
	}
	return defaultTable
}

// Load reads a throughput file from disk (ParseFile).
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseFile(path, b)
}

// ParseFile is Parse with the file's name in front of its errors:
// "fleet.json:12:5: invalid character ...".
func ParseFile(name string, b []byte) (*Table, error) {
	t, err := Parse(b)
	if err != nil {
		if _, ok := err.(*ParseError); ok {
			return nil, fmt.Errorf("%s:%w", name, err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// ParseKey parses a Python tuple string such as "('ResNet-50 (batch size 64)', 1)".
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return Key{}, fmt.Errorf("job key %q: not a tuple", s)
	}
	inner := s[1 : len(s)-1]
	i := strings.LastIndex(inner, ",")
	if i < 0 {
		return Key{}, fmt.Errorf("job key %q: no scale factor", s)
	}
	model := strings.TrimSpace(inner[:i])
	if len(model) < 2 || (model[0] != '\'' && model[0] != '"') || model[len(model)-1] != model[0] {
		return Key{}, fmt.Errorf("job key %q: model is not a quoted string", s)
	}
	sf, err := strconv.Atoi(strings.TrimSpace(inner[i+1:]))
	if err != nil || sf < 1 {
		return Key{}, fmt.Errorf("job key %q: bad scale factor", s)
	}
	return Key{Model: model[1 : len(model)-1], ScaleFactor: sf}, nil
}

// ParseError is a fault in a throughput file at a line and column (1-based;
// the column counts characters), in the value Field names where one is
// known ("v100 ('A3C', 1) isolated throughput"). Its text is
// "line:col: [field: ]msg": a caller puts the file name in front.
type ParseError struct {
	Line, Column int
	Field        string
	Msg          string
}

func (e *ParseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%d:%d: %s: %s", e.Line, e.Column, e.Field, e.Msg)
}

// position converts a byte offset in b to a 1-based line and column.
func position(b []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(b))))
	head := b[:off]
	nl := bytes.LastIndexByte(head, '\n')
	return bytes.Count(head, []byte{'\n'}) + 1, utf8.RuneCount(head[nl+1:]) + 1
}

// parser walks a throughput file token by token, so that every error
// knows where in the file it is.
type parser struct {
	b   []byte
	dec *json.Decoder
}

// next is the offset where the next token starts.
func (p *parser) next() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.b)) {
		switch p.b[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return off
}

func (p *parser) errAt(off int64, field, format string, args ...any) error {
	line, col := position(p.b, off)
	return &ParseError{Line: line, Column: col, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// token reads the next token. Parse has checked the syntax already; an
// error here is at the token's start.
func (p *parser) token(field string) (json.Token, int64, error) {
	off := p.next()
	tok, err := p.dec.Token()
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, off, p.errAt(int64(len(p.b)), field, "unexpected end of file")
	}
	if err != nil {
		return nil, off, p.errAt(off, field, "%s", err.Error())
	}
	return tok, off, nil
}

// checkSyntax reports the file's first syntax error at the offending
// character. (The decoder's Token reports offsets relative to the value
// it was reading; Unmarshal's check counts from the file's start.)
func checkSyntax(b []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(b, &raw)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(b, se.Offset-1) // Offset counts the offending byte
		msg := se.Error()
		if msg == "unexpected end of JSON input" {
			line, col = position(b, int64(len(b)))
			msg = "unexpected end of file"
		}
		return &ParseError{Line: line, Column: col, Msg: msg}
	}
	return err
}

// object reads the '{' of an object (what names the value being read).
func (p *parser) object(what string) error {
	tok, off, err := p.token(what)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errAt(off, what, "want an object, got %s", describe(tok))
	}
	return nil
}

// key reads the next key of an object; ok is false at its '}'.
func (p *parser) key() (k string, off int64, ok bool, err error) {
	tok, off, err := p.token("")
	if err != nil {
		return "", off, false, err
	}
	if d, isDelim := tok.(json.Delim); isDelim && d == '}' {
		return "", off, false, nil
	}
	k, _ = tok.(string) // the decoder only returns strings as keys
	return k, off, true, nil
}

// number reads a throughput: a finite number, not negative.
func (p *parser) number(field string) (float64, error) {
	tok, off, err := p.token(field)
	if err != nil {
		return 0, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, p.errAt(off, field, "want a number, got %s", describe(tok))
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, p.errAt(off, field, "%s is not a finite number", n)
	}
	if v < 0 {
		return 0, p.errAt(off, field, "%s is negative (steps/s: 0 means the job cannot run there)", n)
	}
	return v, nil
}

// pair reads a pair's throughputs: an array of exactly two numbers.
func (p *parser) pair(field string) ([2]float64, error) {
	var pv [2]float64
	tok, off, err := p.token(field)
	if err != nil {
		return pv, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return pv, p.errAt(off, field, "want [a, b] (the two jobs' steps/s), got %s", describe(tok))
	}
	for i := 0; ; i++ {
		if !p.dec.More() {
			if _, _, err := p.token(field); err != nil { // the ']'
				return pv, err
			}
			if i != 2 {
				return pv, p.errAt(off, field, "want [a, b] (the two jobs' steps/s), got %d value(s)", i)
			}
			return pv, nil
		}
		if i >= 2 {
			return pv, p.errAt(p.next(), field, "want [a, b] (the two jobs' steps/s), got more values")
		}
		if pv[i], err = p.number(field); err != nil {
			return pv, err
		}
	}
}

// describe names a token's kind for an error.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// Parse decodes the JSON shape described in the package comment. Its
// errors are *ParseError: line and column in b, and the value at fault
// where one is known ("3:21: v100 ('A', 1) isolated throughput: -2 is
// negative ..."). Throughputs must be finite and not negative; a pair's
// value is exactly two of them.
func Parse(b []byte) (*Table, error) {
	if err := checkSyntax(b); err != nil {
		return nil, err
	}
	p := &parser{b: b, dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	if err := p.object("the file"); err != nil {
		return nil, err
	}
	t := &Table{types: make(map[string]map[Key]*entry)}
	for {
		typ, _, ok, err := p.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := p.object(typ); err != nil {
			return nil, err
		}
		m := make(map[Key]*entry)
		for {
			ks, koff, ok, err := p.key()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			k, err := ParseKey(ks)
			if err != nil {
				return nil, p.errAt(koff, typ, "%s", err.Error())
			}
			field := typ + " " + ks
			if err := p.object(field); err != nil {
				return nil, err
			}
			e := &entry{pairs: make(map[Key][2]float64)}
			for {
				other, ooff, ok, err := p.key()
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				if other == "null" {
					if e.isolated, err = p.number(field + " isolated throughput"); err != nil {
						return nil, err
					}
					continue
				}
				pk, err := ParseKey(other)
				if err != nil {
					return nil, p.errAt(ooff, field, "%s", err.Error())
				}
				if e.pairs[pk], err = p.pair(field + " " + other + " pair throughput"); err != nil {
					return nil, err
				}
			}
			m[k] = e
		}
		t.types[typ] = m
	}
	rest := bytes.TrimLeft(b[p.dec.InputOffset():], " \t\r\n")
	if len(rest) > 0 {
		return nil, p.errAt(int64(len(b)-len(rest)), "", "unexpected data after the top-level object")
	}
	return t, nil
}

// Types lists the GPU types with measurements, sorted by name, including
// the "*_unconsolidated" variants.
func (t *Table) Types() []string {
	out := make([]string, 0, len(t.types))
	for n := range t.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Keys lists the job configurations measured on a type, sorted by model then
// scale factor.
func (t *Table) Keys(gpuType string) []Key {
	m := t.types[gpuType]
	out := make([]Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].ScaleFactor < out[j].ScaleFactor
	})
	return out
}

// Isolated is the whole job's steps/s running alone on gpuType at the key's
// scale factor; ok is false when the configuration was not measured there.
// A measured 0 means the job cannot run on that type.
func (t *Table) Isolated(k Key, gpuType string) (float64, bool) {
	e, ok := t.types[gpuType][k]
	if !ok {
		return 0, false
	}
	return e.isolated, true
}

// Lookup is Isolated by model name and scale factor.
func (t *Table) Lookup(model string, scaleFactor int, gpuType string) (float64, bool) {
	return t.Isolated(Key{model, scaleFactor}, gpuType)
}

// Pair is the two jobs' steps/s (a's, then b's) when a and b share one GPU of
// gpuType; [0, 0] means they cannot be colocated. ok is false when the pair
// was not measured.
func (t *Table) Pair(a, b Key, gpuType string) ([2]float64, bool) {
	e, ok := t.types[gpuType][a]
	if !ok {
		return [2]float64{}, false
	}
	v, ok := e.pairs[b]
	return v, ok
}

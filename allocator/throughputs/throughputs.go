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
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// Load reads a throughput file from disk.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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

// Parse decodes the JSON shape described in the package comment.
func Parse(b []byte) (*Table, error) {
	var raw map[string]map[string]map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decoding throughputs: %w", err)
	}
	t := &Table{types: make(map[string]map[Key]*entry, len(raw))}
	for typ, jobs := range raw {
		m := make(map[Key]*entry, len(jobs))
		for ks, vals := range jobs {
			k, err := ParseKey(ks)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", typ, err)
			}
			e := &entry{pairs: make(map[Key][2]float64, len(vals))}
			for os, v := range vals {
				if os == "null" {
					if err := json.Unmarshal(v, &e.isolated); err != nil {
						return nil, fmt.Errorf("%s %s: isolated throughput: %w", typ, ks, err)
					}
					continue
				}
				ok, err := ParseKey(os)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", typ, ks, err)
				}
				var pv [2]float64
				if err := json.Unmarshal(v, &pv); err != nil {
					return nil, fmt.Errorf("%s %s %s: pair throughput: %w", typ, ks, os, err)
				}
				e.pairs[ok] = pv
			}
			m[k] = e
		}
		t.types[typ] = m
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

package dl2

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/rondo-sched/rondo/policies/dl2/nn"
)

// Schema and Version of a model file: a reader refuses any other schema
// and a version it does not know.
const (
	Schema  = "rondo-dl2-model"
	Version = 1
)

// Model is a trained DL2 policy: the policy and value networks with the
// layout they were built for and the job types their one-hot names.
type Model struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	Window  int    `json:"window"`
	// Types names each one-hot slot; "" marks a spare slot that a new job
	// type takes the first time it is seen (DL2 §6.4).
	Types    []string `json:"types"`
	Features int      `json:"features"`
	Actions  int      `json:"actions"`
	// Trained says how (teacher, traces, steps), for people.
	Trained  map[string]string `json:"trained,omitempty"`
	Policy   *nn.MLP           `json:"policy"`
	Value    *nn.MLP           `json:"value"`
	Checksum string            `json:"checksum"`
}

// NewModel makes an untrained model: hidden layers of the given widths,
// the types first and spare one-hot slots after them.
func NewModel(window int, types []string, spare int, hidden []int, seed int64) *Model {
	ts := append(append([]string(nil), types...), make([]string, spare)...)
	l := Layout{Window: window, Types: len(ts)}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x646c32))
	sizes := append(append([]int{l.Inputs()}, hidden...), l.Actions())
	vsizes := append(append([]int{l.Inputs()}, hidden...), 1)
	return &Model{Schema: Schema, Version: Version, Window: window, Types: ts,
		Features: l.Features(), Actions: l.Actions(),
		Policy: nn.New(sizes, rng), Value: nn.New(vsizes, rng)}
}

// Layout is the model's input and output layout.
func (m *Model) Layout() Layout { return Layout{Window: m.Window, Types: len(m.Types)} }

// TypeIndex is the one-hot slot of a job type; an unknown type takes a
// spare slot (the model remembers it), or -1 when none is left.
func (m *Model) TypeIndex(name string) int {
	if i := slices.Index(m.Types, name); i >= 0 && name != "" {
		return i
	}
	if i := slices.Index(m.Types, ""); i >= 0 && name != "" {
		m.Types[i] = name
		return i
	}
	return -1
}

func (m *Model) sum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s/%d/%d/%q/%s/%s", m.Schema, m.Version, m.Window, m.Types, m.Policy.Checksum(), m.Value.Checksum())
	return hex.EncodeToString(h.Sum(nil))
}

// Validate checks the schema, version, dimensions, finite weights and
// the checksum: a model that fails is not used (the sizer falls back to DRF).
func (m *Model) Validate() error {
	switch {
	case m == nil:
		return fmt.Errorf("no model")
	case m.Schema != Schema:
		return fmt.Errorf("schema %q, want %q", m.Schema, Schema)
	case m.Version != Version:
		return fmt.Errorf("version %d, this Rondo reads %d", m.Version, Version)
	case m.Window < 1 || len(m.Types) < 1:
		return fmt.Errorf("window %d with %d types", m.Window, len(m.Types))
	case m.Policy == nil || m.Value == nil:
		return fmt.Errorf("missing network")
	}
	l := m.Layout()
	if m.Features != l.Features() || m.Actions != l.Actions() {
		return fmt.Errorf("dimensions %d features, %d actions; the layout gives %d, %d", m.Features, m.Actions, l.Features(), l.Actions())
	}
	if err := m.Policy.Validate(); err != nil {
		return fmt.Errorf("policy network: %v", err)
	}
	if err := m.Value.Validate(); err != nil {
		return fmt.Errorf("value network: %v", err)
	}
	ps, vs := m.Policy.Sizes, m.Value.Sizes
	if ps[0] != l.Inputs() || ps[len(ps)-1] != l.Actions() {
		return fmt.Errorf("policy network %v does not match %d inputs, %d actions", ps, l.Inputs(), l.Actions())
	}
	if vs[0] != l.Inputs() || vs[len(vs)-1] != 1 {
		return fmt.Errorf("value network %v does not match %d inputs, 1 output", vs, l.Inputs())
	}
	if m.Checksum != "" && m.Checksum != m.sum() {
		return fmt.Errorf("checksum mismatch (file corrupt or edited)")
	}
	if m.Checksum == "" {
		return fmt.Errorf("no checksum")
	}
	return nil
}

// Clone is a deep copy.
func (m *Model) Clone() *Model {
	c := *m
	c.Types = slices.Clone(m.Types)
	c.Policy, c.Value = m.Policy.Clone(), m.Value.Clone()
	return &c
}

// Write saves the model (JSON) with its checksum.
func (m *Model) Write(w io.Writer) error {
	m.Checksum = m.sum()
	enc := json.NewEncoder(w)
	return enc.Encode(m)
}

// Save writes the model to a file atomically.
func (m *Model) Save(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := m.Write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadModel reads and validates a model.
func ReadModel(name string, r io.Reader) (*Model, error) {
	var m Model
	dec := json.NewDecoder(r)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return &m, nil
}

// LoadModel reads a model file.
func LoadModel(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadModel(path, f)
}

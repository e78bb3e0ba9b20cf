package dl2

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

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
	// Arch is the networks' architecture: ArchMLP ("mlp"; also when
	// absent, as in files from before it existed) or ArchPerJob.
	Arch   string `json:"arch,omitempty"`
	Window int    `json:"window"`
	// Types names each one-hot slot; "" marks a spare slot that a new job
	// type takes the first time it is seen (DL2 §6.4).
	Types    []string `json:"types"`
	Features int      `json:"features"`
	Actions  int      `json:"actions"`
	// Trained says how (teacher, traces, steps), for people.
	Trained  map[string]string `json:"trained,omitempty"`
	Policy   net               `json:"policy"`
	Value    net               `json:"value"`
	Checksum string            `json:"checksum"`
}

// NewModel makes an untrained MLP model (DL2's): hidden layers of the
// given widths, the types first and spare one-hot slots after them.
func NewModel(window int, types []string, spare int, hidden []int, seed int64) *Model {
	m, err := NewArchModel(ArchMLP, window, types, spare, hidden, seed)
	if err != nil {
		panic(err)
	}
	return m
}

// NewArchModel makes an untrained model of architecture arch. For
// ArchMLP hidden are the hidden layers' widths; for ArchPerJob hidden[0]
// is the per-job encoder's width H and the last entry the hidden width
// of the per-job head and of the context networks (stop, value).
func NewArchModel(arch string, window int, types []string, spare int, hidden []int, seed int64) (*Model, error) {
	ts := append(append([]string(nil), types...), make([]string, spare)...)
	l := Layout{Window: window, Types: len(ts)}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x646c32))
	m := &Model{Schema: Schema, Version: Version, Arch: arch, Window: window, Types: ts,
		Features: l.Features(), Actions: l.Actions()}
	switch arch {
	case ArchMLP:
		sizes := append(append([]int{l.Inputs()}, hidden...), l.Actions())
		vsizes := append(append([]int{l.Inputs()}, hidden...), 1)
		m.Policy, m.Value = &mlpNet{nn.New(sizes, rng)}, &mlpNet{nn.New(vsizes, rng)}
	case ArchPerJob:
		if len(hidden) == 0 {
			return nil, fmt.Errorf("dl2: the perjob architecture needs a hidden width")
		}
		h, h2 := hidden[0], hidden[len(hidden)-1]
		m.Policy = newPerJob(l.Features(), h, h2, true, rng)
		m.Value = newPerJob(l.Features(), h, h2, false, rng)
	default:
		return nil, fmt.Errorf("dl2: unknown architecture %q (known: %s)", arch, strings.Join(Archs, ", "))
	}
	return m, nil
}

// arch is Arch with its default.
func (m *Model) arch() string { return cmp.Or(m.Arch, ArchMLP) }

// newNet is an empty network of the architecture, to read into.
func newNet(arch string) (net, error) {
	switch arch {
	case ArchMLP:
		return &mlpNet{new(nn.MLP)}, nil
	case ArchPerJob:
		return &perJob{}, nil
	}
	return nil, fmt.Errorf("unknown architecture %q (known: %s)", arch, strings.Join(Archs, ", "))
}

// UnmarshalJSON reads a model file: its networks as its Arch has them.
func (m *Model) UnmarshalJSON(b []byte) error {
	type plain Model // Model's fields without this method
	var raw struct {
		plain
		Policy json.RawMessage `json:"policy"`
		Value  json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Model(raw.plain)
	for _, f := range []struct {
		raw json.RawMessage
		dst *net
		key string
	}{{raw.Policy, &m.Policy, "policy"}, {raw.Value, &m.Value, "value"}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue // Validate: missing network
		}
		n, err := newNet(m.arch())
		if err != nil {
			return err
		}
		if err := json.Unmarshal(f.raw, n); err != nil {
			return fmt.Errorf("%s: %v", f.key, err)
		}
		*f.dst = n
	}
	return nil
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

// sum is the model's checksum; an MLP model's is what it was before Arch
// existed, so that older files still validate.
func (m *Model) sum() string {
	h := sha256.New()
	arch := ""
	if m.arch() != ArchMLP {
		arch = m.arch() + "/"
	}
	fmt.Fprintf(h, "%s/%d/%d/%q/%s%s/%s", m.Schema, m.Version, m.Window, m.Types, arch, m.Policy.Checksum(), m.Value.Checksum())
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
	if _, err := newNet(m.arch()); err != nil {
		return err
	}
	l := m.Layout()
	if m.Features != l.Features() || m.Actions != l.Actions() {
		return fmt.Errorf("dimensions %d features, %d actions; the layout gives %d, %d", m.Features, m.Actions, l.Features(), l.Actions())
	}
	for _, n := range []struct {
		net
		name string
		out  int
	}{{m.Policy, "policy", l.Actions()}, {m.Value, "value", 1}} {
		if n.arch() != m.arch() {
			return fmt.Errorf("%s network is not of the %s architecture", n.name, m.arch())
		}
		if err := validateNet(n.net, l, n.out); err != nil {
			return fmt.Errorf("%s network: %v", n.name, err)
		}
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
	c.Policy, c.Value = m.Policy.clone(), m.Value.clone()
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

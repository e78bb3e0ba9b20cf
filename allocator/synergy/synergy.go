// Package synergy holds per-job CPU and memory sensitivity profiles (issue
// #14, Synergy): for a model at a GPU count, its training throughput as a
// function of the cores and memory given per GPU, relative to a
// GPU-proportional share (see BaseCoresPerGPU: the matrices' 1.0).
//
// The profiles in data/ come from the Synergy scheduler's simulator (MIT
// licence, data/LICENSE.md) and are embedded; Load reads an operator's file
// of the same shape. The package is pure: no scheduler wiring.
package synergy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed data/profiles.json
var profilesJSON []byte

// The grid of every profile, as in the reference: cores per GPU (rows) and
// GB of memory per GPU (columns). A matrix may cover a prefix of either axis
// (the multi-GPU profiles stop at 187.5 GB). Files cannot give their own
// axes: the reference has one grid.
var (
	CoresAxis = []float64{1, 2, 3, 4, 5, 6, 9, 12, 24}
	MemAxis   = []float64{20.83, 62.5, 125, 187.5, 250}
)

// The proportional share of the reference cluster (24 cores, 500 GB, 8 GPUs
// per server). Every embedded matrix, in every set, is normalised to this
// point (1.0 at 3 cores, 62.5 GB); a test checks it.
const (
	BaseCoresPerGPU = 3.0
	BaseMemGBPerGPU = 62.5
)

// Profile is one model's sensitivity at one GPU count.
type Profile struct {
	Model string
	GPUs  int
	// Best-case demand per GPU found by Synergy's optimistic profiling.
	CoresPerGPUBest float64
	MemGBPerGPUBest float64
	// Throughput at the best-case demand relative to the set's proportional
	// share (ShareCoresPerGPU, ShareMemGBPerGPU). >= 1.
	Speedup   float64
	IterTimeS float64
	Batch     int
	// Matrix[i][j]: throughput at CoresAxis[i] cores and MemAxis[j] GB per
	// GPU, relative to the base share; 0.0 = infeasible. Nil when the source
	// has no matrix: Throughput then uses a two-point model.
	Matrix [][]float64
	// The axes Matrix covers (prefixes of the package axes).
	CoresAxis, MemAxis []float64
	// The proportional share of the set the profile came from.
	ShareCoresPerGPU, ShareMemGBPerGPU float64
}

// Key is the profile's name in its set, "<model>_<gpus>".
func (p *Profile) Key() string { return p.Model + "_" + strconv.Itoa(p.GPUs) }

// Set is the profiles measured for one CPU:GPU ratio.
type Set struct {
	Name string
	// The servers' proportional share per GPU the set was measured for.
	CoresPerGPU, MemGBPerGPU float64
	Profiles                 map[string]*Profile // by Key
}

// Table is every set of one file. Read-only once built.
type Table struct {
	Source string // file name (or "embedded"), for errors
	Sets   map[string]*Set
}

var (
	defaultOnce  sync.Once
	defaultTable *Table
	defaultErr   error
)

// Default returns the embedded profiles. It panics if they are corrupt,
// which a test rules out.
func Default() *Table {
	defaultOnce.Do(func() { defaultTable, defaultErr = Parse(profilesJSON, "embedded profiles.json") })
	if defaultErr != nil {
		panic("synergy: " + defaultErr.Error())
	}
	return defaultTable
}

// Load reads an operator's profile file.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

type jsonProfile struct {
	Model   string      `json:"model"`
	GPUs    int         `json:"gpus"`
	Cores   float64     `json:"cpus_per_gpu_best"`
	Mem     float64     `json:"mem_gb_per_gpu_best"`
	Speedup float64     `json:"speedup_over_proportional"`
	Iter    float64     `json:"iter_time_s"`
	Batch   int         `json:"batch"`
	Matrix  [][]float64 `json:"throughput_matrix"`
}

// Parse reads a file of the embedded shape, { "<set>": { "<model>_<gpus>":
// profile } }; name is the file's name for errors. A set's cores per GPU is
// the integer after its name's last '-' ("models-4" = 4), else 3, the
// reference cluster's share ("models"); memory per GPU is 62.5 GB in every
// set (the reference servers differ only in cores).
func Parse(data []byte, name string) (*Table, error) {
	var raw map[string]map[string]jsonProfile
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no profile sets", name)
	}
	t := &Table{Source: name, Sets: map[string]*Set{}}
	for sn, profiles := range raw {
		s := &Set{Name: sn, CoresPerGPU: setCores(sn), MemGBPerGPU: BaseMemGBPerGPU, Profiles: map[string]*Profile{}}
		for key, jp := range profiles {
			p := &Profile{
				Model: jp.Model, GPUs: jp.GPUs,
				CoresPerGPUBest: jp.Cores, MemGBPerGPUBest: jp.Mem, Speedup: jp.Speedup,
				IterTimeS: jp.Iter, Batch: jp.Batch, Matrix: jp.Matrix,
				ShareCoresPerGPU: s.CoresPerGPU, ShareMemGBPerGPU: s.MemGBPerGPU,
			}
			if err := p.Validate(); err != nil {
				return nil, fmt.Errorf("%s: set %q: profile %q: %w", name, sn, key, err)
			}
			if p.Key() != key {
				return nil, fmt.Errorf("%s: set %q: profile %q: model/gpus: name it %q", name, sn, key, p.Key())
			}
			if p.Matrix != nil {
				p.CoresAxis = CoresAxis[:len(p.Matrix):len(p.Matrix)]
				p.MemAxis = MemAxis[:len(p.Matrix[0]):len(p.Matrix[0])]
			}
			s.Profiles[key] = p
		}
		t.Sets[sn] = s
	}
	return t, nil
}

func setCores(set string) float64 {
	if i := strings.LastIndexByte(set, '-'); i >= 0 {
		if n, err := strconv.Atoi(set[i+1:]); err == nil && n > 0 {
			return float64(n)
		}
	}
	return BaseCoresPerGPU
}

// Validate checks one profile; errors name the JSON field.
func (p *Profile) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case p.Model == "":
		return fmt.Errorf("model: empty")
	case p.GPUs < 1:
		return fmt.Errorf("gpus: %d, want >= 1", p.GPUs)
	case bad(p.CoresPerGPUBest) || p.CoresPerGPUBest <= 0:
		return fmt.Errorf("cpus_per_gpu_best: %v, want > 0", p.CoresPerGPUBest)
	case bad(p.MemGBPerGPUBest) || p.MemGBPerGPUBest <= 0:
		return fmt.Errorf("mem_gb_per_gpu_best: %v, want > 0", p.MemGBPerGPUBest)
	case bad(p.Speedup) || p.Speedup < 1:
		return fmt.Errorf("speedup_over_proportional: %v, want >= 1", p.Speedup)
	}
	if p.Matrix == nil {
		return nil
	}
	if len(p.Matrix) == 0 || len(p.Matrix[0]) == 0 {
		return fmt.Errorf("throughput_matrix: empty (use null for none)")
	}
	if len(p.Matrix) > len(CoresAxis) {
		return fmt.Errorf("throughput_matrix: %d rows, the cores axis has %d", len(p.Matrix), len(CoresAxis))
	}
	cols := len(p.Matrix[0])
	for i, row := range p.Matrix {
		if len(row) > len(MemAxis) {
			return fmt.Errorf("throughput_matrix[%d]: %d columns, the memory axis has %d", i, len(row), len(MemAxis))
		}
		if len(row) != cols {
			return fmt.Errorf("throughput_matrix[%d]: %d columns, row 0 has %d", i, len(row), cols)
		}
		for j, v := range row {
			if bad(v) || v < 0 {
				return fmt.Errorf("throughput_matrix[%d][%d]: %v, want >= 0 (0 = infeasible)", i, j, v)
			}
		}
	}
	return nil
}

// SetFor picks the set measured for servers with coresPerGPU cores per GPU:
// the set with the nearest CoresPerGPU, the fewer cores on a tie (the
// smaller share promises no speedup the server cannot give).
func (t *Table) SetFor(coresPerGPU float64) *Set {
	var best *Set
	for _, s := range t.sortedSets() {
		if best == nil || math.Abs(s.CoresPerGPU-coresPerGPU) < math.Abs(best.CoresPerGPU-coresPerGPU) {
			best = s
		}
	}
	return best
}

// sortedSets orders by cores per GPU, then name, so ties are deterministic.
func (t *Table) sortedSets() []*Set {
	out := make([]*Set, 0, len(t.Sets))
	for _, s := range t.Sets {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CoresPerGPU != out[j].CoresPerGPU {
			return out[i].CoresPerGPU < out[j].CoresPerGPU
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Lookup resolves a `rondo.profile` name for a job of gpus GPUs on servers
// with coresPerGPU cores per GPU (see SetFor and Set.Lookup).
func (t *Table) Lookup(name string, gpus int, coresPerGPU float64) (*Profile, error) {
	s := t.SetFor(coresPerGPU)
	if s == nil {
		return nil, fmt.Errorf("%s: no profile sets", t.Source)
	}
	p, err := s.Lookup(name, gpus)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Source, err)
	}
	return p, nil
}

// Lookup resolves name for a job of gpus GPUs. An explicit key ("res18_2")
// is taken as named. A model name ("res18") gets the profile with exactly
// gpus GPUs, else the largest profile with fewer: a job larger than every
// profile (8 or 16 GPUs; the reference has none for 8) is assumed to behave
// per GPU like the largest profiled size (res18_4), since per-GPU demand and
// speedup shrink or hold as jobs grow. With no smaller profile (gpus < 1, or
// a set holding only bigger ones) the smallest is used.
func (s *Set) Lookup(name string, gpus int) (*Profile, error) {
	if p, ok := s.Profiles[name]; ok {
		return p, nil
	}
	var below, smallest *Profile
	for _, p := range s.Profiles {
		if p.Model != name {
			continue
		}
		if p.GPUs == gpus {
			return p, nil
		}
		if p.GPUs < gpus && (below == nil || p.GPUs > below.GPUs) {
			below = p
		}
		if smallest == nil || p.GPUs < smallest.GPUs {
			smallest = p
		}
	}
	if below != nil {
		return below, nil
	}
	if smallest != nil {
		return smallest, nil
	}
	return nil, fmt.Errorf("set %q: profile %q: unknown model or key", s.Name, name)
}

// Known checks that name resolves in some set (a model or a "<model>_<gpus>"
// key): a job's rondo.profile is refused with this one-line error otherwise.
func (t *Table) Known(name string) error {
	var models []string
	seen := map[string]bool{}
	for _, s := range t.sortedSets() {
		if _, ok := s.Profiles[name]; ok {
			return nil
		}
		for _, p := range s.Profiles {
			if p.Model == name {
				return nil
			}
			if !seen[p.Model] {
				seen[p.Model] = true
				models = append(models, p.Model)
			}
		}
	}
	sort.Strings(models)
	return fmt.Errorf("unknown profile %q in %s (models: %s)", name, t.Source, strings.Join(models, ", "))
}

// Package hcl reads Rondo's allocator configuration (cell types, physical
// cells, virtual clusters, the Nomad connection) and a job's policy stanza
// with hcl/v2, and validates them into typed values. Every error is an
// hcl.Diagnostic whose Subject points at the offending field, so that users
// read "file:line:col: summary; detail".
package hcl

import (
	"fmt"
	"math"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/rondo-sched/rondo/policies/names"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// DefaultRoundSeconds is the scheduling round length when round_seconds is unset.
const DefaultRoundSeconds = 360

// Config is the allocator's configuration, in declaration order.
type Config struct {
	Nomad     Nomad
	Tasks     Tasks
	Telemetry Telemetry
	// Agent is the agent {} block: the agent's own settings (listeners,
	// pool, logging, round). Its round sets RoundSeconds.
	Agent Agent
	// TLS is the tls {} block: certificates of Rondo's own listeners
	// (status and lease APIs).
	TLS TLS
	// HA is the high_availability {} block: the leader lock.
	HA HighAvailability
	// RoundSeconds is the round length in seconds: agent { round } or the
	// deprecated round_seconds (DefaultRoundSeconds when neither is set).
	RoundSeconds int
	CellTypes    []CellType
	Cells        []Cell
	// FromTopology: nodes whose cells are derived from the device plugin's
	// topology at run time (cells_from_topology blocks).
	FromTopology []TopologyCells
	VCs          []VC
	// Placement is the CPU and memory placement of VCs that set none (and
	// of the cluster without VCs): "proportional", "tune", "greedy" or
	// "opt" (allocator/placement); "" when unset. Rondo then leaves the
	// cores and memory of jobs' tasks as their specs say, unless a VC sets
	// one.
	Placement      string
	PlacementRange hcl.Range
	// Profiles is an operator's CPU/memory sensitivity profile file
	// (allocator/synergy's JSON shape), "" for the embedded ones; relative
	// to the config file's directory.
	Profiles      string
	ProfilesRange hcl.Range
	// LearnProfiles: jobs naming no profile have theirs learned from
	// their throughput reports (optimistic profiling, exploring cores:
	// restarts; allocator/placement learn.go). Default false.
	LearnProfiles bool
	// Preemption is the top level's min_runtime, checkpoint_aware and
	// reserve_after: the cluster's without VCs, the default of VCs that
	// set none, and the opportunistic engine's (PreemptionOf).
	Preemption Preemption
	// GPUTypes are the gpu_type blocks (gputypes.go): device model names
	// mapped to Rondo GPU types.
	GPUTypes []GPUTypeMap
	// Throughputs is an operator's throughput file (allocator/throughputs'
	// JSON, merged over Gavel's table), "" for none; relative to the
	// config file's directory. ThroughputsRange is its value's range.
	Throughputs      string
	ThroughputsRange hcl.Range
}

// Preemption is how an engine stops running work for waiting work
// (issue #21; allocator/engine's Config.MinRuntimeS, CheckpointAware and
// ReserveAfterS): the attributes min_runtime, checkpoint_aware and
// reserve_after of a vc block or of the top level. Each is set or not on
// its own (its range is zero when unset); a VC's unset ones are the top
// level's (Config.PreemptionOf). All unset: Gavel's mechanism as it was.
type Preemption struct {
	// MinRuntime: a started job keeps its GPUs this long (unless one
	// fails or a guaranteed job needs its cell). >= 0.
	MinRuntime time.Duration
	// CheckpointAware: stop the victim that loses least and give it one
	// round's notice to checkpoint.
	CheckpointAware bool
	// ReserveAfter: a gang waiting this long gets a reservation. >= 0
	// (0: none).
	ReserveAfter time.Duration
	// The values' ranges; zero when the attribute is unset.
	MinRuntimeRange, CheckpointAwareRange, ReserveAfterRange hcl.Range
}

// PreemptionAttrs are the attribute names of a Preemption.
var PreemptionAttrs = []string{"min_runtime", "checkpoint_aware", "reserve_after"}

// Over is p with the attributes it leaves unset taken from def.
func (p Preemption) Over(def Preemption) Preemption {
	if p.MinRuntimeRange == (hcl.Range{}) {
		p.MinRuntime, p.MinRuntimeRange = def.MinRuntime, def.MinRuntimeRange
	}
	if p.CheckpointAwareRange == (hcl.Range{}) {
		p.CheckpointAware, p.CheckpointAwareRange = def.CheckpointAware, def.CheckpointAwareRange
	}
	if p.ReserveAfterRange == (hcl.Range{}) {
		p.ReserveAfter, p.ReserveAfterRange = def.ReserveAfter, def.ReserveAfterRange
	}
	return p
}

// IsSet reports whether any of the three attributes is set.
func (p Preemption) IsSet() bool {
	return p.MinRuntimeRange != (hcl.Range{}) || p.CheckpointAwareRange != (hcl.Range{}) || p.ReserveAfterRange != (hcl.Range{})
}

// PreemptionOf is the preemption settings of a VC's engine: the VC's own,
// the top level's for those it leaves unset. vc "" (or a VC the config
// does not declare): the top level's (the opportunistic engine's, and the
// cluster's without VCs).
func (c *Config) PreemptionOf(vc string) Preemption {
	for _, v := range c.VCs {
		if v.Name == vc && vc != "" {
			return v.Preemption.Over(c.Preemption)
		}
	}
	return c.Preemption
}

// PlacementModes are the placement names (allocator/placement.Modes; hcl
// cannot link it).
var PlacementModes = []string{"proportional", "tune", "greedy", "opt"}

// ValidPlacement checks a placement name.
func ValidPlacement(s string) error {
	for _, m := range PlacementModes {
		if s == m {
			return nil
		}
	}
	return fmt.Errorf("%q: want one of %s", s, strings.Join(PlacementModes, ", "))
}

// PlacementOf is a VC's placement, its own or the config's ("" : none set).
func (c *Config) PlacementOf(vc string) string {
	for _, v := range c.VCs {
		if v.Name == vc && v.Placement != "" {
			return v.Placement
		}
	}
	return c.Placement
}

// Placing reports whether any placement is set (the stage runs).
func (c *Config) Placing() bool {
	if c.Placement != "" {
		return true
	}
	for _, v := range c.VCs {
		if v.Placement != "" {
			return true
		}
	}
	return false
}

// TopologyCells is a cells_from_topology block: the ready nodes of NodePool
// (and NodeClass, when set) that no written cell covers get node-level
// cells derived from their GPUs' topology (allocator/topocells).
type TopologyCells struct {
	NodePool, NodeClass string
	Range               hcl.Range // the block's header
}

// Nomad is how Rondo reaches Nomad, as the nomad CLI's settings (the
// environment variables NOMAD_ADDR, NOMAD_TOKEN, NOMAD_CACERT, ... and the
// command-line flags win over the file: flag > env > file):
//
//	nomad {
//	  address         = "https://nomad.service.consul:4646"
//	  token           = "..."          # better NOMAD_TOKEN or a workload identity
//	  namespace       = "default"      # "*" or a list in namespaces: see vc namespaces
//	  region          = "global"
//	  ca_file         = "/etc/rondo/nomad-ca.pem"
//	  cert_file       = "/etc/rondo/cli.pem"
//	  key_file        = "/etc/rondo/cli-key.pem"
//	  tls_server_name = "server.global.nomad"
//	}
type Nomad struct {
	Address, Token, Namespace, Region string
	// TLS: files relative to the config file's directory are made
	// absolute.
	CAFile, CertFile, KeyFile, TLSServerName string
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

// Tasks is what Rondo adds, at admission, to each task of an admitted
// job's GPU group that does not set it itself, so that job specs need not
// know where the allocator runs:
//
//	tasks {
//	  checkpoint_root = "/mnt/shared/rondo"     # RONDO_CHECKPOINT_DIR = <root>/<job id>
//	  lease_address   = "http://10.0.0.5:4701"  # RONDO_LEASE_ADDR and identity "rondo"
//	}
type Tasks struct {
	// CheckpointRoot is an absolute path on a file system the clients
	// share (empty: none is added).
	CheckpointRoot string
	// LeaseAddress is the lease API as tasks reach it, http(s)://host:port
	// (empty: the agent's -lease-addr when it names a host).
	LeaseAddress string
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

// Telemetry is where the agent's metrics go, as Nomad's telemetry block:
//
//	telemetry {
//	  prometheus_metrics  = true             # GET /metrics (default true)
//	  statsd_address      = "127.0.0.1:8125" # also to statsd (empty: no)
//	  disable_hostname    = true             # statsd gauges without the host name prefix
//	  collection_interval = "1s"             # how often gauges are sent to statsd
//	}
type Telemetry struct {
	// PrometheusMetrics serves /metrics; true unless the block says false.
	PrometheusMetrics bool
	StatsdAddress     string
	DisableHostname   bool
	// CollectionInterval is positive (default DefaultCollectionInterval).
	CollectionInterval time.Duration
	// Range is the block's header (zero when there is no block).
	Range hcl.Range
}

// DefaultCollectionInterval is the telemetry block's collection_interval
// when unset.
const DefaultCollectionInterval = time.Second

// CellType is one level of a cell chain: a leaf (GPUType set, one GPU) or
// Count children of type Child. Node marks the level that is one machine.
type CellType struct {
	Name    string
	GPUType string
	Child   string
	Count   int
	Node    bool
	Range   hcl.Range // the block's header
	// ChildRange is the child value's range (the header when unset).
	ChildRange hcl.Range
}

// Cell is a physical top-level cell. It maps to Nomad nodes either by name
// (NomadNode for a node-level cell, NomadNodes for a cell holding several
// nodes, in child order) or by pool/class, resolved by the Nomad backend.
type Cell struct {
	Type, Name string
	NomadNode  string
	NomadNodes []string
	NodePool   string
	NodeClass  string
	GPUType    string   // optional; must match the chain's leaf type
	Bad        []string // leaf addresses relative to the cell ("1/0/1") known bad at start
	Pinned     string   // VC that owns the whole cell, outside its quota
	Range      hcl.Range
}

// VC is a virtual cluster: a quota of cells per cell type (or, in a config
// without cells, a quota-only share of GPUs per type) and the policy that
// shares them among its jobs.
type VC struct {
	Name  string
	Quota []Quota // sorted by cell type name
	// GPUs is a quota-only share: GPUs per GPU type, enforced as a quota
	// over the whole cluster (nil when the VC has no gpus field). Only in a
	// config without cells, and then every VC declares one (QuotaOnly).
	GPUs map[string]int
	// GPUsRange is the gpus attribute's name; GPURanges each entry's range.
	GPUsRange hcl.Range
	GPURanges map[string]hcl.Range
	Policy    string
	Weight    float64
	Entities  []Entity
	Pinned    []string // names of physical top cells pinned to this VC
	// SpaceSharing: the VC's jobs may share GPUs in pairs when its policy
	// packs (*_packed, gandiva); space_sharing = false forbids it (the
	// packed policy then runs unpacked). Default true.
	SpaceSharing bool
	// Placement is the VC's CPU and memory placement ("" : the config's).
	Placement string
	// Preemption is the VC's own min_runtime, checkpoint_aware and
	// reserve_after (Config.PreemptionOf adds the top level's defaults).
	// Only engine VCs read them: setting one in a gandiva_fair or dl2 VC
	// is an error.
	Preemption Preemption
	// Namespaces are the Nomad namespaces whose jobs may use the VC
	// (namespaces.go, Admits); nil: every namespace.
	Namespaces []string
	// NamespacesRange is the namespaces attribute (zero when unset).
	NamespacesRange hcl.Range

	// Gandiva-fair (policy = "gandiva_fair" only; any of these in another
	// VC is an error).

	// Trading: users trade fair shares between GPU generations
	// (Gandiva-fair §3.4). Default false.
	Trading bool
	// Quantum is how long a share holds before it is recomputed and jobs
	// migrate: a whole number of rounds (QuantumRounds). 0: unset, the
	// allocator chooses.
	Quantum      time.Duration
	QuantumRange hcl.Range // the quantum value (zero when unset)
	// MaxMigrations bounds the jobs migrated per round. 0: unset, the
	// allocator chooses.
	MaxMigrations int
	// TradeMargin is the speedup margin a trade must clear (0.05: 5%),
	// used only when Trading. 0: unset, the allocator chooses.
	TradeMargin float64
	// Users are the VC's users and their tickets, in declaration order:
	// a gandiva_fair VC's entities (it declares no entity blocks).
	Users []User

	// DL2 is a dl2 VC's dl2 block (policy = "dl2" only; a dl2 block in
	// another VC is an error); nil when there is none: the learned sizer
	// with the model Rondo ships.
	DL2 *DL2Config

	Range hcl.Range
}

// DL2Policy is the policy name a dl2 block requires.
const DL2Policy = "dl2"

// DL2Learned is the learned sizer's name in a dl2 block, its default.
const DL2Learned = "learned"

// DL2Sizers are the sizers a dl2 block may name: the learned one and the
// baselines of policies/dl2 (dl2.Baselines(), which hcl does not link;
// cmd/rondo's tests check that the two lists agree).
var DL2Sizers = []string{DL2Learned, "drf", "fifo", "optimus", "srtf", "tetris"}

// DL2Config is a dl2 VC's dl2 block: which sizer sizes its jobs' workers
// and parameter servers, and, for the learned sizer, from which model.
// hcl does not read the model: cmd/rondo loads it (a missing or corrupt
// file is a config error there, at ModelRange).
type DL2Config struct {
	// Sizer is DL2Learned (the default) or a baseline's name.
	Sizer string
	// Model is the learned sizer's model file, relative paths resolved
	// against the config file's directory; "" for the model Rondo ships.
	Model string
	// ModelRange is the model value's range (zero when unset).
	ModelRange hcl.Range
	// Range is the block's header.
	Range hcl.Range
}

// IsDL2 reports whether the VC runs DL2's sizing (policy "dl2").
func (v VC) IsDL2() bool {
	c, err := names.Canonical(v.Policy)
	return err == nil && c == DL2Policy
}

// DL2Sizer is the VC's dl2 sizer and model file, its dl2 block's or the
// defaults (DL2Learned, "": the shipped model) without one.
func (v VC) DL2Sizer() (sizer, model string) {
	if v.DL2 == nil {
		return DL2Learned, ""
	}
	return v.DL2.Sizer, v.DL2.Model
}

// GandivaFairPolicy is the policy name the Gandiva-fair fields require.
const GandivaFairPolicy = "gandiva_fair"

// GandivaFair reports whether the VC runs Gandiva-fair (its policy, or an
// alias of it).
func (v VC) GandivaFair() bool {
	c, err := names.Canonical(v.Policy)
	return err == nil && c == GandivaFairPolicy
}

// QuantumRounds is the VC's quantum in rounds of length round: at least 1
// once Validate has passed, and 0 when quantum is unset (or round is not
// positive), leaving the caller to choose its default.
func (v VC) QuantumRounds(round time.Duration) int {
	if v.Quantum <= 0 || round <= 0 {
		return 0
	}
	return int(v.Quantum / round)
}

// DefaultTickets are a user's tickets when its user block sets none; the
// same value as policies/fairshare.DefaultTickets (which hcl does not
// import), the tickets of a user no block declares.
const DefaultTickets = 100

// User is a gandiva_fair VC's user (jobs name it with `user`, meta
// rondo.user) and its tickets: users share the VC's GPUs of each
// generation in proportion to their tickets.
type User struct {
	Name    string
	Tickets int
	Range   hcl.Range // the block's header
}

// Quota is a number of cells of one type.
type Quota struct {
	CellType string // as written: "type", or "chain/type" when the type is in several chains
	Count    int
	// Chain is the physical top cell type whose chain holds CellType; Type is
	// the bare cell type. Validate fills both.
	Chain, Type string
	Range       hcl.Range // the map entry
}

// Entity is a group of users inside a VC (Gavel's hierarchical policies).
type Entity struct {
	Name   string
	Weight float64
	Policy string
	Range  hcl.Range
}

// DefaultVCPolicy is used when a VC names none.
const DefaultVCPolicy = "max_min_fairness_perf"

// ValidPolicy reports whether name is a policy (or alias) policies can run.
// It reads the pure-Go name registry, not the solvers: hcl links no cgo.
func ValidPolicy(name string) error {
	_, err := names.Canonical(name)
	return err
}

// LoadPath reads a config file, or every *.hcl file of a directory in name
// order, and validates the result.
func LoadPath(path string) (*Config, hcl.Diagnostics) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read config", Detail: err.Error()}}
	}
	files := []string{path}
	if st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.hcl"))
		sort.Strings(files)
		if len(files) == 0 {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No config files", Detail: path + " holds no *.hcl file"}}
		}
	}
	srcs := make([]Source, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read config", Detail: err.Error()}}
		}
		srcs = append(srcs, Source{Name: f, Src: b})
	}
	return Parse(srcs...)
}

// Source is one named config text.
type Source struct {
	Name string
	Src  []byte
}

// Parse parses and validates config sources as one configuration.
func Parse(srcs ...Source) (*Config, hcl.Diagnostics) {
	p := hclparse.NewParser()
	var diags hcl.Diagnostics
	cfg := &Config{RoundSeconds: DefaultRoundSeconds,
		Telemetry: Telemetry{PrometheusMetrics: true, CollectionInterval: DefaultCollectionInterval}}
	var roundSeconds *hcl.Attribute
	for _, s := range srcs {
		f, d := p.ParseHCL(s.Src, s.Name)
		diags = append(diags, d...)
		if f == nil || d.HasErrors() {
			continue
		}
		diags = append(diags, decodeFile(f.Body, cfg, &roundSeconds)...)
	}
	if !diags.HasErrors() {
		diags = append(diags, applyAgentRound(cfg, roundSeconds)...)
	}
	if diags.HasErrors() {
		return nil, errorsOnly(diags)
	}
	diags = append(diags, Validate(cfg)...)
	if diags.HasErrors() {
		return nil, errorsOnly(diags)
	}
	return cfg, diags
}

// errorsOnly drops warnings: a config that fails shows what to fix; its
// warnings come once it loads.
func errorsOnly(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

var fileSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "round_seconds"}, {Name: "placement"}, {Name: "profiles"}, {Name: "learn_profiles"},
		{Name: "min_runtime"}, {Name: "checkpoint_aware"}, {Name: "reserve_after"}, {Name: "throughputs"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "nomad"},
		{Type: "tasks"},
		{Type: "telemetry"},
		{Type: "agent"},
		{Type: "tls"},
		{Type: "high_availability"},
		{Type: "cell_type", LabelNames: []string{"name"}},
		{Type: "cell", LabelNames: []string{"type", "name"}},
		{Type: "vc", LabelNames: []string{"name"}},
		{Type: "cells_from_topology"},
		{Type: "gpu_type", LabelNames: []string{"name"}},
	},
}

func decodeFile(body hcl.Body, cfg *Config, roundSeconds **hcl.Attribute) hcl.Diagnostics {
	content, diags := body.Content(fileSchema)
	if a, ok := content.Attributes["round_seconds"]; ok {
		if *roundSeconds != nil {
			diags = append(diags, errAt(a.NameRange, "Duplicate round_seconds", "round_seconds is set in more than one file"))
		}
		*roundSeconds = a
		n, d := intAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && n <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid round_seconds", fmt.Sprintf("round_seconds = %d must be positive", n)))
		}
		cfg.RoundSeconds = n
	}
	if a, ok := content.Attributes["placement"]; ok {
		if cfg.PlacementRange != (hcl.Range{}) {
			diags = append(diags, errAt(a.NameRange, "Duplicate placement", fmt.Sprintf("placement is already set at %s", cfg.PlacementRange)))
		}
		cfg.PlacementRange = a.NameRange
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			cfg.Placement = v
			if err := ValidPlacement(v); err != nil {
				diags = append(diags, errAt(a.Expr.Range(), "Unknown placement", "placement "+err.Error()))
			}
		}
	}
	if a, ok := content.Attributes["learn_profiles"]; ok {
		on, d := boolAttr(a)
		diags = append(diags, d...)
		cfg.LearnProfiles = cfg.LearnProfiles || on
	}
	for _, name := range PreemptionAttrs {
		// Once over all the files, like placement.
		if a, ok := content.Attributes[name]; ok {
			if r := cfg.Preemption.rangeOf(name); *r != (hcl.Range{}) {
				diags = append(diags, errAt(a.NameRange, "Duplicate "+name, fmt.Sprintf("%s is already set at %s", name, pos(*r))))
			}
		}
	}
	diags = append(diags, decodePreemption(content, &cfg.Preemption, "")...)
	diags = append(diags, decodeThroughputs(content, cfg)...)
	if a, ok := content.Attributes["profiles"]; ok {
		if cfg.ProfilesRange != (hcl.Range{}) {
			diags = append(diags, errAt(a.NameRange, "Duplicate profiles", fmt.Sprintf("profiles is already set at %s", cfg.ProfilesRange)))
		}
		cfg.ProfilesRange = a.NameRange
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if v == "" {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid profiles", "profiles: want a file name"))
			} else if !filepath.IsAbs(v) {
				v = filepath.Join(filepath.Dir(a.NameRange.Filename), v)
			}
			cfg.Profiles = v
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "nomad":
			if cfg.Nomad.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate nomad block",
					fmt.Sprintf("a nomad block is already declared at %s", pos(cfg.Nomad.Range))))
				continue
			}
			diags = append(diags, decodeNomad(b, &cfg.Nomad)...)
		case "agent":
			if cfg.Agent.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate agent block",
					fmt.Sprintf("an agent block is already declared at %s", pos(cfg.Agent.Range))))
				continue
			}
			diags = append(diags, decodeAgent(b, &cfg.Agent)...)
		case "tls":
			if cfg.TLS.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate tls block",
					fmt.Sprintf("a tls block is already declared at %s", pos(cfg.TLS.Range))))
				continue
			}
			diags = append(diags, decodeTLS(b, &cfg.TLS)...)
		case "high_availability":
			if cfg.HA.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate high_availability block",
					fmt.Sprintf("a high_availability block is already declared at %s", pos(cfg.HA.Range))))
				continue
			}
			diags = append(diags, decodeHA(b, &cfg.HA)...)
		case "tasks":
			if cfg.Tasks.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate tasks block",
					fmt.Sprintf("a tasks block is already declared at %s", cfg.Tasks.Range)))
				continue
			}
			diags = append(diags, decodeTasks(b, &cfg.Tasks)...)
		case "telemetry":
			if cfg.Telemetry.Range != (hcl.Range{}) {
				diags = append(diags, errAt(b.DefRange, "Duplicate telemetry block",
					fmt.Sprintf("a telemetry block is already declared at %s", cfg.Telemetry.Range)))
				continue
			}
			diags = append(diags, decodeTelemetry(b, &cfg.Telemetry)...)
		case "cell_type":
			ct, d := decodeCellType(b)
			diags = append(diags, d...)
			cfg.CellTypes = append(cfg.CellTypes, ct)
		case "cell":
			c, d := decodeCell(b)
			diags = append(diags, d...)
			cfg.Cells = append(cfg.Cells, c)
		case "cells_from_topology":
			tc, d := decodeTopologyCells(b)
			diags = append(diags, d...)
			for _, prev := range cfg.FromTopology {
				if !d.HasErrors() && prev.NodePool == tc.NodePool && prev.NodeClass == tc.NodeClass {
					diags = append(diags, errAt(b.DefRange, "Duplicate cells_from_topology",
						fmt.Sprintf("node_pool %q node_class %q is already derived at %s", tc.NodePool, tc.NodeClass, pos(prev.Range))))
				}
			}
			cfg.FromTopology = append(cfg.FromTopology, tc)
		case "gpu_type":
			g, d := decodeGPUType(b, cfg.GPUTypes)
			diags = append(diags, d...)
			cfg.GPUTypes = append(cfg.GPUTypes, g)
		case "vc":
			v, d := decodeVC(b)
			diags = append(diags, d...)
			cfg.VCs = append(cfg.VCs, v)
		}
	}
	return diags
}

func decodeNomad(b *hcl.Block, n *Nomad) hcl.Diagnostics {
	n.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "address"}, {Name: "token"}, {Name: "namespace"}, {Name: "region"},
		{Name: "ca_file"}, {Name: "cert_file"}, {Name: "key_file"}, {Name: "tls_server_name"}}})
	for _, f := range []struct {
		name string
		dst  *string
		file bool
	}{{"address", &n.Address, false}, {"token", &n.Token, false}, {"namespace", &n.Namespace, false}, {"region", &n.Region, false},
		{"ca_file", &n.CAFile, true}, {"cert_file", &n.CertFile, true}, {"key_file", &n.KeyFile, true},
		{"tls_server_name", &n.TLSServerName, false}} {
		if a, ok := content.Attributes[f.name]; ok {
			s, d := stringAttr(a)
			diags = append(diags, d...)
			if f.file && !d.HasErrors() {
				s, d = fileAttr(a, s)
				diags = append(diags, d...)
			}
			*f.dst = s
		}
	}
	if (n.CertFile == "") != (n.KeyFile == "") {
		diags = append(diags, errAt(b.DefRange, "Incomplete client certificate",
			"nomad: cert_file and key_file are set together (a client certificate and its key)"))
	}
	if a, ok := content.Attributes["address"]; ok && n.Address != "" {
		if err := checkNomadAddress(n.Address); err != nil {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid address", err.Error()))
		}
	}
	return diags
}

func decodeTasks(b *hcl.Block, t *Tasks) hcl.Diagnostics {
	t.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "checkpoint_root"}, {Name: "lease_address"}}})
	if a, ok := content.Attributes["checkpoint_root"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && (!filepath.IsAbs(v) || filepath.Clean(v) == "/") {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid checkpoint_root",
				fmt.Sprintf("checkpoint_root = %q must be an absolute directory other than /, on a file system every GPU client mounts", v)))
		}
		t.CheckpointRoot = filepath.Clean(v)
	}
	if a, ok := content.Attributes["lease_address"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := CheckLeaseAddress(v); err != nil {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid lease_address", err.Error()))
			}
		}
		t.LeaseAddress = v
	}
	return diags
}

func decodeTelemetry(b *hcl.Block, t *Telemetry) hcl.Diagnostics {
	t.Range = b.DefRange
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "prometheus_metrics"}, {Name: "statsd_address"}, {Name: "disable_hostname"}, {Name: "collection_interval"}}})
	if a, ok := content.Attributes["prometheus_metrics"]; ok {
		v, d := boolAttr(a)
		diags = append(diags, d...)
		t.PrometheusMetrics = v
	}
	if a, ok := content.Attributes["disable_hostname"]; ok {
		v, d := boolAttr(a)
		diags = append(diags, d...)
		t.DisableHostname = v
	}
	if a, ok := content.Attributes["statsd_address"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := CheckStatsdAddress(v); err != nil {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid statsd_address", err.Error()))
			}
		}
		t.StatsdAddress = v
	}
	if a, ok := content.Attributes["collection_interval"]; ok {
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			iv, err := time.ParseDuration(v)
			if err != nil || iv <= 0 {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid collection_interval",
					fmt.Sprintf("collection_interval = %q must be a positive duration (e.g. \"1s\")", v)))
			}
			t.CollectionInterval = iv
		}
	}
	return diags
}

// CheckStatsdAddress checks a statsd address: host:port with a port number.
func CheckStatsdAddress(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return fmt.Errorf("statsd_address = %q must be host:port", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("statsd_address = %q: port %q is not a port number", v, port)
	}
	return nil
}

// CheckLeaseAddress checks an address tasks use to reach the lease API:
// http(s)://host:port with a host a client can dial (not 0.0.0.0 or ::).
func CheckLeaseAddress(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("lease_address = %q must be http://host:port or https://host:port", v)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("lease_address = %q: tasks cannot dial %s; name the agent's reachable address", v, u.Hostname())
	}
	return nil
}

func decodeCellType(b *hcl.Block) (CellType, hcl.Diagnostics) {
	ct := CellType{Name: b.Labels[0], Range: b.DefRange, ChildRange: b.DefRange}
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "gpu_type"}, {Name: "child"}, {Name: "count"}, {Name: "node"}}})
	if a, ok := content.Attributes["gpu_type"]; ok {
		s, d := stringAttr(a)
		diags = append(diags, d...)
		ct.GPUType = s
	}
	if a, ok := content.Attributes["child"]; ok {
		s, d := stringAttr(a)
		diags = append(diags, d...)
		ct.Child = s
		ct.ChildRange = a.Expr.Range()
	}
	if a, ok := content.Attributes["count"]; ok {
		n, d := intAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && n <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid count",
				fmt.Sprintf("cell_type %q: count = %d must be positive", ct.Name, n)))
		}
		ct.Count = n
	} else if ct.Child != "" {
		diags = append(diags, errAt(b.DefRange, "Missing count",
			fmt.Sprintf("cell_type %q has child = %q but no count", ct.Name, ct.Child)))
	}
	if a, ok := content.Attributes["node"]; ok {
		v, d := boolAttr(a)
		diags = append(diags, d...)
		ct.Node = v
	}
	switch {
	case ct.GPUType != "" && ct.Child != "":
		diags = append(diags, errAt(content.Attributes["child"].NameRange, "Conflicting fields",
			fmt.Sprintf("cell_type %q: a leaf (gpu_type) cannot have a child", ct.Name)))
	case ct.GPUType == "" && ct.Child == "":
		diags = append(diags, errAt(b.DefRange, "Leaf without gpu_type",
			fmt.Sprintf("cell_type %q has neither child nor gpu_type; a leaf cell type must set gpu_type", ct.Name)))
	case ct.GPUType != "":
		ct.Count = 1
		if a, ok := content.Attributes["count"]; ok {
			diags = append(diags, errAt(a.NameRange, "Conflicting fields",
				fmt.Sprintf("cell_type %q: a leaf is one GPU; count needs child", ct.Name)))
		}
	}
	return ct, diags
}

// decodeTopologyCells reads cells_from_topology { node_pool = "gpu"
// node_class = "dgx" }: node_pool is required and not empty, node_class
// optional and not empty when set.
func decodeTopologyCells(b *hcl.Block) (TopologyCells, hcl.Diagnostics) {
	tc := TopologyCells{Range: b.DefRange}
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "node_pool"}, {Name: "node_class"}}})
	if _, ok := content.Attributes["node_pool"]; !ok {
		return tc, append(diags, errAt(b.DefRange, "Missing node_pool",
			"cells_from_topology: node_pool is required (the pool whose nodes' cells are derived)"))
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"node_pool", &tc.NodePool}, {"node_class", &tc.NodeClass}} {
		a, ok := content.Attributes[f.name]
		if !ok {
			continue
		}
		v, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && v == "" {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid "+f.name, "cells_from_topology: "+f.name+" must not be empty"))
		}
		*f.dst = v
	}
	return tc, diags
}

func decodeCell(b *hcl.Block) (Cell, hcl.Diagnostics) {
	c := Cell{Type: b.Labels[0], Name: b.Labels[1], Range: b.DefRange}
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "nomad_node"}, {Name: "nomad_nodes"}, {Name: "node_pool"}, {Name: "node_class"},
		{Name: "gpu_type"}, {Name: "bad"}, {Name: "pinned"}}})
	for _, f := range []struct {
		name string
		dst  *string
	}{{"nomad_node", &c.NomadNode}, {"node_pool", &c.NodePool}, {"node_class", &c.NodeClass},
		{"gpu_type", &c.GPUType}, {"pinned", &c.Pinned}} {
		if a, ok := content.Attributes[f.name]; ok {
			s, d := stringAttr(a)
			diags = append(diags, d...)
			*f.dst = s
		}
	}
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{"nomad_nodes", &c.NomadNodes}, {"bad", &c.Bad}} {
		if a, ok := content.Attributes[f.name]; ok {
			l, d := stringListAttr(a)
			diags = append(diags, d...)
			*f.dst = l
		}
	}
	_, hasPool := content.Attributes["node_pool"]
	_, hasClass := content.Attributes["node_class"]
	if c.NomadNode == "" && len(c.NomadNodes) == 0 && !hasPool && !hasClass {
		diags = append(diags, errAt(b.DefRange, "Missing node mapping",
			fmt.Sprintf("cell %q: set nomad_node, nomad_nodes, node_pool or node_class", c.Name)))
	}
	if c.NomadNode != "" && len(c.NomadNodes) > 0 {
		diags = append(diags, errAt(content.Attributes["nomad_nodes"].NameRange, "Conflicting fields",
			fmt.Sprintf("cell %q: set nomad_node or nomad_nodes, not both", c.Name)))
	}
	// Selectors: node_pool, node_class or both (the nodes of that pool
	// with that class); never together with nodes named one by one.
	for _, f := range []string{"node_pool", "node_class"} {
		a, ok := content.Attributes[f]
		if !ok {
			continue
		}
		if c.NomadNode != "" || len(c.NomadNodes) > 0 {
			named := "nomad_node"
			if len(c.NomadNodes) > 0 {
				named = "nomad_nodes"
			}
			diags = append(diags, errAt(a.NameRange, "Conflicting fields",
				fmt.Sprintf("cell %q: %s selects nodes, %s names them; set one", c.Name, f, named)))
		}
		if (f == "node_pool" && c.NodePool == "") || (f == "node_class" && c.NodeClass == "") {
			if !diags.HasErrors() {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid "+f, fmt.Sprintf("cell %q: %s must not be empty", c.Name, f)))
			}
		}
	}
	return c, diags
}

func decodeVC(b *hcl.Block) (VC, hcl.Diagnostics) {
	v := VC{Name: b.Labels[0], Policy: DefaultVCPolicy, Weight: 1, SpaceSharing: true, Range: b.DefRange}
	content, diags := b.Body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "quota"}, {Name: "gpus"}, {Name: "policy"}, {Name: "weight"}, {Name: "pinned"}, {Name: "space_sharing"}, {Name: "placement"},
			{Name: "trading"}, {Name: "quantum"}, {Name: "max_migrations"}, {Name: "trade_margin"},
			{Name: "min_runtime"}, {Name: "checkpoint_aware"}, {Name: "reserve_after"}, {Name: "namespaces"}},
		Blocks: []hcl.BlockHeaderSchema{{Type: "entity", LabelNames: []string{"name"}}, {Type: "user", LabelNames: []string{"name"}}, {Type: "dl2"}},
	})
	if a, ok := content.Attributes["quota"]; ok {
		pairs, d := hcl.ExprMap(a.Expr)
		diags = append(diags, d...)
		for _, kv := range pairs {
			k, d := kv.Key.Value(nil)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			if k, err := convert.Convert(k, cty.String); err != nil || k.IsNull() || !k.IsKnown() {
				diags = append(diags, errAt(kv.Key.Range(), "Invalid quota key", "quota keys are cell type names"))
				continue
			}
			kc, _ := convert.Convert(k, cty.String)
			n, d := intExpr(kv.Value)
			diags = append(diags, d...)
			rng := hcl.RangeBetween(kv.Key.Range(), kv.Value.Range())
			if !d.HasErrors() && n <= 0 {
				diags = append(diags, errAt(kv.Value.Range(), "Invalid quota",
					fmt.Sprintf("vc %q: quota %q = %d must be positive", v.Name, kc.AsString(), n)))
			}
			v.Quota = append(v.Quota, Quota{CellType: kc.AsString(), Count: n, Range: rng})
		}
		sort.SliceStable(v.Quota, func(i, j int) bool { return v.Quota[i].CellType < v.Quota[j].CellType })
		for i := 1; i < len(v.Quota); i++ {
			if v.Quota[i].CellType == v.Quota[i-1].CellType {
				diags = append(diags, errAt(v.Quota[i].Range, "Duplicate name",
					fmt.Sprintf("vc %q: quota names %q twice", v.Name, v.Quota[i].CellType)))
			}
		}
	}
	if a, ok := content.Attributes["gpus"]; ok {
		diags = append(diags, decodeGPUs(a, &v)...)
		if _, both := content.Attributes["quota"]; both {
			diags = append(diags, errAt(a.NameRange, "Conflicting fields",
				fmt.Sprintf("vc %q: set quota (cells) or gpus (a quota-only share), not both", v.Name)))
		}
	}
	policyOK := true
	if a, ok := content.Attributes["policy"]; ok {
		s, d := stringAttr(a)
		diags = append(diags, d...)
		policyOK = !d.HasErrors()
		if !d.HasErrors() {
			v.Policy = s
			if err := ValidPolicy(s); err != nil {
				policyOK = false
				diags = append(diags, errAt(a.Expr.Range(), "Unknown VC policy", fmt.Sprintf("vc %q: policy %v", v.Name, err)))
			}
		}
	}
	// With a bad policy, only the policy's error: whether the Gandiva-fair
	// fields belong is unknown.
	diags = append(diags, decodeGandivaFair(content, &v, policyOK)...)
	diags = append(diags, decodeDL2(content, &v, policyOK)...)
	if own := v.GandivaFair() || v.IsDL2(); own || !policyOK {
		// Another mechanism than the engine's: it reads none of them
		// (no error when the policy itself is unknown: that error alone).
		for _, name := range PreemptionAttrs {
			if a, ok := content.Attributes[name]; ok && own {
				diags = append(diags, errAt(a.NameRange, "Not an engine VC",
					fmt.Sprintf("vc %q: %s: a %s VC's mechanism does not preempt by it (policy is %q)", v.Name, name, v.Policy, v.Policy)))
			}
		}
	} else {
		diags = append(diags, decodePreemption(content, &v.Preemption, fmt.Sprintf("vc %q: ", v.Name))...)
	}
	if a, ok := content.Attributes["weight"]; ok {
		w, d := floatAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && w <= 0 {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid weight", fmt.Sprintf("vc %q: weight must be positive", v.Name)))
		}
		v.Weight = w
	}
	if a, ok := content.Attributes["space_sharing"]; ok {
		on, d := boolAttr(a)
		diags = append(diags, d...)
		v.SpaceSharing = on
	}
	if a, ok := content.Attributes["placement"]; ok {
		s, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.Placement = s
			if err := ValidPlacement(s); err != nil {
				diags = append(diags, errAt(a.Expr.Range(), "Unknown placement", fmt.Sprintf("vc %q: placement %v", v.Name, err)))
			}
		}
	}
	if a, ok := content.Attributes["pinned"]; ok {
		l, d := stringListAttr(a)
		diags = append(diags, d...)
		v.Pinned = l
	}
	if a, ok := content.Attributes["namespaces"]; ok {
		diags = append(diags, decodeNamespaces(a, &v)...) // namespaces.go
	}
	for _, eb := range content.Blocks {
		if eb.Type != "entity" {
			continue // user: decodeGandivaFair; dl2: decodeDL2
		}
		if v.GandivaFair() {
			diags = append(diags, errAt(eb.DefRange, "Entity in a gandiva_fair VC",
				fmt.Sprintf("vc %q: entity: a gandiva_fair VC's users are its entities; declare user blocks", v.Name)))
			continue
		}
		e := Entity{Name: eb.Labels[0], Weight: 1, Policy: v.Policy, Range: eb.DefRange}
		ec, d := eb.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "weight"}, {Name: "policy"}}})
		diags = append(diags, d...)
		if a, ok := ec.Attributes["weight"]; ok {
			w, d := floatAttr(a)
			diags = append(diags, d...)
			if !d.HasErrors() && w <= 0 {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid weight",
					fmt.Sprintf("vc %q entity %q: weight must be positive", v.Name, e.Name)))
			}
			e.Weight = w
		}
		if a, ok := ec.Attributes["policy"]; ok {
			s, d := stringAttr(a)
			diags = append(diags, d...)
			if !d.HasErrors() {
				e.Policy = s
				if err := ValidPolicy(s); err != nil {
					diags = append(diags, errAt(a.Expr.Range(), "Unknown VC policy",
						fmt.Sprintf("vc %q entity %q: policy %v", v.Name, e.Name, err)))
				}
			}
		}
		v.Entities = append(v.Entities, e)
	}
	return v, diags
}

// decodePreemption reads min_runtime, checkpoint_aware and reserve_after
// into p (where prefixes the errors: `vc "x": `, or "" at top level). The
// durations are Go duration strings >= 0; every error names the field.
func decodePreemption(content *hcl.BodyContent, p *Preemption, where string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"min_runtime", &p.MinRuntime}, {"reserve_after", &p.ReserveAfter}} {
		a, ok := content.Attributes[f.name]
		if !ok {
			continue
		}
		s, d := stringAttr(a)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		*p.rangeOf(f.name) = a.Expr.Range()
		v, err := time.ParseDuration(s)
		switch {
		case err != nil:
			diags = append(diags, errAt(a.Expr.Range(), "Invalid "+f.name,
				fmt.Sprintf("%s%s: %q is not a duration (e.g. \"30m\")", where, f.name, s)))
		case v < 0:
			diags = append(diags, errAt(a.Expr.Range(), "Invalid "+f.name,
				fmt.Sprintf("%s%s: %s must be >= 0", where, f.name, s)))
		default:
			*f.dst = v
		}
	}
	if a, ok := content.Attributes["checkpoint_aware"]; ok {
		on, d := boolAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			p.CheckpointAware, p.CheckpointAwareRange = on, a.Expr.Range()
		}
	}
	return diags
}

// rangeOf is the range field of attribute name.
func (p *Preemption) rangeOf(name string) *hcl.Range {
	switch name {
	case "min_runtime":
		return &p.MinRuntimeRange
	case "checkpoint_aware":
		return &p.CheckpointAwareRange
	}
	return &p.ReserveAfterRange
}

// decodeGandivaFair reads a gandiva_fair VC's fields: trading, quantum,
// max_migrations, trade_margin and user blocks. In a VC of another policy
// each is an error naming the field (none when policyOK is false: the
// policy itself is in error). Every error names the field at fault.
func decodeGandivaFair(content *hcl.BodyContent, v *VC, policyOK bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !v.GandivaFair() {
		if !policyOK {
			return nil
		}
		for _, f := range []struct{ name, what string }{
			{"trading", "trades"}, {"quantum", "has a quantum"},
			{"max_migrations", "bounds migrations"}, {"trade_margin", "trades"},
		} {
			if a, ok := content.Attributes[f.name]; ok {
				diags = append(diags, errAt(a.NameRange, "Not a gandiva_fair VC",
					fmt.Sprintf("vc %q: %s: only a gandiva_fair VC %s (policy is %q)", v.Name, f.name, f.what, v.Policy)))
			}
		}
		for _, b := range content.Blocks {
			if b.Type == "user" {
				diags = append(diags, errAt(b.DefRange, "Not a gandiva_fair VC",
					fmt.Sprintf("vc %q: user %q: only a gandiva_fair VC has users with tickets (policy is %q)", v.Name, b.Labels[0], v.Policy)))
			}
		}
		return diags
	}
	if a, ok := content.Attributes["trading"]; ok {
		on, d := boolAttr(a)
		diags = append(diags, d...)
		v.Trading = on
	}
	if a, ok := content.Attributes["quantum"]; ok {
		s, d := stringAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.QuantumRange = a.Expr.Range()
			q, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags = append(diags, errAt(a.Expr.Range(), "Invalid quantum",
					fmt.Sprintf("vc %q: quantum: %q is not a duration (e.g. \"6m\")", v.Name, s)))
			case q <= 0:
				diags = append(diags, errAt(a.Expr.Range(), "Invalid quantum",
					fmt.Sprintf("vc %q: quantum: %s must be positive", v.Name, s)))
			default:
				v.Quantum = q // a whole number of rounds: Validate (round_seconds may be in another file)
			}
		}
	}
	if a, ok := content.Attributes["max_migrations"]; ok {
		n, got, d := wholeExpr(a.Expr, 0)
		diags = append(diags, d...)
		if !d.HasErrors() && got != "" {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid max_migrations",
				fmt.Sprintf("vc %q: max_migrations: must be a whole number >= 0, got %s", v.Name, got)))
		}
		v.MaxMigrations = n
	}
	if a, ok := content.Attributes["trade_margin"]; ok {
		m, d := floatAttr(a)
		diags = append(diags, d...)
		if !d.HasErrors() && (m < 0 || math.IsInf(m, 0)) {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid trade_margin",
				fmt.Sprintf("vc %q: trade_margin: must be a number >= 0, got %s", v.Name, strconv.FormatFloat(m, 'g', -1, 64))))
		}
		v.TradeMargin = m
	}
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		if b.Type != "user" {
			continue
		}
		u := User{Name: b.Labels[0], Tickets: DefaultTickets, Range: b.DefRange}
		if u.Name == "" {
			diags = append(diags, errAt(b.DefRange, "Invalid user",
				fmt.Sprintf("vc %q: user \"\": the name must not be empty", v.Name)))
			continue
		}
		if prev, dup := seen[u.Name]; dup {
			diags = append(diags, errAt(b.DefRange, "Duplicate name",
				fmt.Sprintf("vc %q: user %q: declared twice (first at %s)", v.Name, u.Name, pos(prev))))
			continue
		}
		seen[u.Name] = b.DefRange
		uc, d := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "tickets"}}})
		diags = append(diags, d...)
		if a, ok := uc.Attributes["tickets"]; ok {
			n, got, d := wholeExpr(a.Expr, 1)
			diags = append(diags, d...)
			if !d.HasErrors() && got != "" {
				diags = append(diags, errAt(a.Expr.Range(), "Invalid tickets",
					fmt.Sprintf("vc %q: user %q: tickets: must be a positive integer, got %s", v.Name, u.Name, got)))
			}
			u.Tickets = n
		}
		v.Users = append(v.Users, u)
	}
	return diags
}

// decodeDL2 reads a dl2 VC's dl2 block: sizer (one of DL2Sizers, default
// DL2Learned) and model (a file name, the learned sizer only). A dl2 block
// in a VC of another policy is an error (none when policyOK is false: the
// policy itself is in error), and so is a second block. Every error names
// the field at fault.
func decodeDL2(content *hcl.BodyContent, v *VC, policyOK bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		if b.Type != "dl2" {
			continue
		}
		if !v.IsDL2() {
			if policyOK {
				diags = append(diags, errAt(b.DefRange, "Not a dl2 VC",
					fmt.Sprintf("vc %q: dl2: only a dl2 VC chooses its sizer (policy is %q)", v.Name, v.Policy)))
			}
			continue
		}
		if v.DL2 != nil {
			diags = append(diags, errAt(b.DefRange, "Duplicate dl2 block",
				fmt.Sprintf("vc %q: a dl2 block is already declared at %s", v.Name, pos(v.DL2.Range))))
			continue
		}
		d := &DL2Config{Sizer: DL2Learned, Range: b.DefRange}
		v.DL2 = d
		bc, dd := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "sizer"}, {Name: "model"}}})
		diags = append(diags, dd...)
		sizerOK := true
		if a, ok := bc.Attributes["sizer"]; ok {
			s, dd := stringAttr(a)
			diags = append(diags, dd...)
			sizerOK = !dd.HasErrors()
			if sizerOK {
				d.Sizer = s
				if !slices.Contains(DL2Sizers, s) {
					sizerOK = false
					diags = append(diags, errAt(a.Expr.Range(), "Unknown dl2 sizer",
						fmt.Sprintf("vc %q: dl2: sizer %q: want one of %s", v.Name, s, strings.Join(DL2Sizers, ", "))))
				}
			}
		}
		a, ok := bc.Attributes["model"]
		if !ok || !sizerOK {
			continue // with a bad sizer, only the sizer's error
		}
		if d.Sizer != DL2Learned {
			diags = append(diags, errAt(a.NameRange, "Model with a baseline sizer",
				fmt.Sprintf("vc %q: dl2: model: only the learned sizer reads a model (sizer is %q)", v.Name, d.Sizer)))
			continue
		}
		m, dd := stringAttr(a)
		diags = append(diags, dd...)
		if dd.HasErrors() {
			continue
		}
		d.ModelRange = a.Expr.Range()
		if m == "" {
			diags = append(diags, errAt(a.Expr.Range(), "Invalid model",
				fmt.Sprintf("vc %q: dl2: model: want a file name (leave model out for the shipped model)", v.Name)))
			continue
		}
		if !filepath.IsAbs(m) {
			m = filepath.Join(filepath.Dir(a.NameRange.Filename), m)
		}
		d.Model = m
	}
	return diags
}

// wholeExpr evaluates a whole number of at least min written as a number.
// got is "" when it is one, else the value as written for the error
// ("2.5", "-1", "\"8\", a string"); diags are evaluation errors only.
func wholeExpr(e hcl.Expression, min int64) (n int, got string, diags hcl.Diagnostics) {
	val, diags := e.Value(nil)
	if diags.HasErrors() {
		return 0, "", diags
	}
	switch {
	case val.IsNull():
		return 0, "null", nil
	case !val.IsWhollyKnown():
		return 0, "an unknown value", nil
	case val.Type() == cty.String:
		return 0, fmt.Sprintf("%q, a string", val.AsString()), nil
	case val.Type() != cty.Number:
		return 0, "a " + val.Type().FriendlyName(), nil
	}
	i, acc := val.AsBigFloat().Int64()
	if acc != big.Exact || i < min || i > 1<<31 {
		return 0, val.AsBigFloat().Text('g', -1), nil
	}
	return int(i), "", nil
}

// gpuTypeName is a GPU type as a quota-only share names it: a lowercase
// identifier, as GPU types are named in traces and throughput tables.
var gpuTypeName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// decodeGPUs reads a quota-only share, gpus = { v100 = 8, k80 = 4 }: each
// key a GPU type, each value a positive whole number written as a number
// (not a string), no type twice. Errors point at the entry at fault.
func decodeGPUs(a *hcl.Attribute, v *VC) hcl.Diagnostics {
	v.GPUsRange = a.NameRange
	v.GPUs, v.GPURanges = map[string]int{}, map[string]hcl.Range{}
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		return hcl.Diagnostics{errAt(a.Expr.Range(), "Invalid gpus",
			fmt.Sprintf("vc %q: gpus must be a map of GPU type to count, e.g. { v100 = 8, k80 = 4 }", v.Name))}
	}
	for _, kv := range pairs {
		rng := hcl.RangeBetween(kv.Key.Range(), kv.Value.Range())
		k, d := kv.Key.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		kc, err := convert.Convert(k, cty.String)
		if err != nil || kc.IsNull() || !kc.IsKnown() || !gpuTypeName.MatchString(kc.AsString()) {
			key := "this key"
			if err == nil && !kc.IsNull() && kc.IsKnown() {
				key = fmt.Sprintf("key %q", kc.AsString())
			}
			diags = append(diags, errAt(kv.Key.Range(), "Invalid gpus",
				fmt.Sprintf("vc %q: gpus %s is not a GPU type (lowercase letters, digits, _ or -, starting with a letter)", v.Name, key)))
			continue
		}
		name := kc.AsString()
		if prev, dup := v.GPURanges[name]; dup {
			diags = append(diags, errAt(rng, "Duplicate name",
				fmt.Sprintf("vc %q: gpus names %q twice (first at %s)", v.Name, name, pos(prev))))
			continue
		}
		v.GPURanges[name] = rng
		val, d := kv.Value.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		bad := func(what string) {
			diags = append(diags, errAt(kv.Value.Range(), "Invalid gpus",
				fmt.Sprintf("vc %q: gpus %q = %s; want a positive whole number of GPUs", v.Name, name, what)))
		}
		switch {
		case val.IsNull():
			bad("null")
			continue
		case !val.IsWhollyKnown() || val.Type() != cty.Number:
			what := "a " + val.Type().FriendlyName()
			if val.IsWhollyKnown() && val.Type() == cty.String {
				what = fmt.Sprintf("%q, a string", val.AsString())
			}
			bad(what)
			continue
		}
		n, acc := val.AsBigFloat().Int64()
		if acc != big.Exact || n <= 0 || n > 1<<31 {
			bad(val.AsBigFloat().Text('g', -1))
			continue
		}
		v.GPUs[name] = int(n)
	}
	if len(pairs) == 0 && !diags.HasErrors() {
		diags = append(diags, errAt(a.Expr.Range(), "Invalid gpus",
			fmt.Sprintf("vc %q: gpus names no GPU type; a quota-only share is at least one type = count", v.Name)))
	}
	return diags
}

// CellVCs reports whether VCs are declared over cells: written cell blocks
// or cells derived at run time (cells_from_topology).
func (c *Config) CellVCs() bool {
	return (len(c.Cells) > 0 || len(c.FromTopology) > 0) && len(c.VCs) > 0
}

// QuotaOnly reports whether the VCs hold quota-only shares (gpus per GPU
// type over the whole cluster, no cells). Validate makes it all or nothing:
// no cells and every VC with gpus. A config with one VC and neither quota
// nor gpus is not quota-only: one engine runs the whole cluster.
func (c *Config) QuotaOnly() bool {
	for _, v := range c.VCs {
		if v.GPUs != nil {
			return true
		}
	}
	return false
}

func errAt(r hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: r.Ptr()}
}

func value(a *hcl.Attribute, want cty.Type) (cty.Value, hcl.Diagnostics) {
	return valueExpr(a.Expr, want, a.Name)
}

func valueExpr(e hcl.Expression, want cty.Type, name string) (cty.Value, hcl.Diagnostics) {
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	cv, err := convert.Convert(v, want)
	if err != nil || cv.IsNull() || !cv.IsWhollyKnown() {
		msg := "null"
		if err != nil {
			msg = err.Error()
		}
		return cty.NilVal, hcl.Diagnostics{errAt(e.Range(), "Invalid value for "+name,
			fmt.Sprintf("%s must be a %s: %s", name, want.FriendlyName(), msg))}
	}
	return cv, nil
}

func stringAttr(a *hcl.Attribute) (string, hcl.Diagnostics) {
	v, d := value(a, cty.String)
	if d.HasErrors() {
		return "", d
	}
	return v.AsString(), nil
}

func boolAttr(a *hcl.Attribute) (bool, hcl.Diagnostics) {
	v, d := value(a, cty.Bool)
	if d.HasErrors() {
		return false, d
	}
	return v.True(), nil
}

func floatAttr(a *hcl.Attribute) (float64, hcl.Diagnostics) {
	v, d := value(a, cty.Number)
	if d.HasErrors() {
		return 0, d
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

func intAttr(a *hcl.Attribute) (int, hcl.Diagnostics) { return intExprNamed(a.Expr, a.Name) }

func intExpr(e hcl.Expression) (int, hcl.Diagnostics) { return intExprNamed(e, "quota") }

func intExprNamed(e hcl.Expression, name string) (int, hcl.Diagnostics) {
	v, d := valueExpr(e, cty.Number, name)
	if d.HasErrors() {
		return 0, d
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if acc != big.Exact || i > 1<<31 || i < -(1<<31) {
		return 0, hcl.Diagnostics{errAt(e.Range(), "Invalid value for "+name, name+" must be a whole number in range")}
	}
	return int(i), nil
}

func stringListAttr(a *hcl.Attribute) ([]string, hcl.Diagnostics) {
	v, d := value(a, cty.List(cty.String))
	if d.HasErrors() {
		return nil, d
	}
	var out []string
	for _, e := range v.AsValueSlice() {
		out = append(out, e.AsString())
	}
	return out, nil
}

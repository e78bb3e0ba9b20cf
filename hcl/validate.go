package hcl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rondo-sched/rondo/allocator/cells"
)

// MaxCellGPUs bounds the GPUs of one cell type.
const MaxCellGPUs = 1 << 16

// Validate checks the cross-references of a decoded config: the cell type
// graph, the physical cells, and the VCs' quotas against the physical
// cluster (sharing safety at start).
func Validate(cfg *Config) hcl.Diagnostics {
	diags := checkNomadNamespace(cfg) // namespaces.go
	types := map[string]*CellType{}
	for i := range cfg.CellTypes {
		ct := &cfg.CellTypes[i]
		if prev, dup := types[ct.Name]; dup {
			diags = append(diags, errAt(ct.Range, "Duplicate name",
				fmt.Sprintf("cell_type %q is already declared at %s", ct.Name, pos(prev.Range))))
			continue
		}
		types[ct.Name] = ct
	}
	// Unknown children first, then cycles, so that levels are well defined.
	for i := range cfg.CellTypes {
		ct := &cfg.CellTypes[i]
		if ct.Child != "" && types[ct.Child] == nil {
			diags = append(diags, errAt(ct.ChildRange, "Unknown cell type",
				fmt.Sprintf("cell_type %q: child = %q is not a declared cell_type", ct.Name, ct.Child)))
		}
	}
	if diags.HasErrors() {
		return diags
	}
	for i := range cfg.CellTypes {
		ct := &cfg.CellTypes[i]
		seen := map[string]bool{ct.Name: true}
		for t := types[ct.Child]; t != nil; t = types[t.Child] {
			if seen[t.Name] {
				diags = append(diags, errAt(ct.ChildRange, "Cycle in child chain",
					fmt.Sprintf("cell_type %q: following child reaches %q again", ct.Name, t.Name)))
				break
			}
			seen[t.Name] = true
		}
	}
	if diags.HasErrors() {
		return diags
	}
	tree := NewTypeTree(cfg.CellTypes)
	// Bound the size of a cell so the allocator's tree stays small and
	// products of counts cannot overflow.
	for _, ct := range cfg.CellTypes {
		n := 1
		for t := ct; t.Child != ""; t = tree.types[t.Child] {
			if n *= t.Count; n > MaxCellGPUs {
				diags = append(diags, errAt(ct.Range, "Cell too large",
					fmt.Sprintf("cell_type %q holds more than %d GPUs", ct.Name, MaxCellGPUs)))
				break
			}
		}
	}
	if diags.HasErrors() {
		return diags
	}

	vcs := map[string]*VC{}
	for i := range cfg.VCs {
		v := &cfg.VCs[i]
		if prev, dup := vcs[v.Name]; dup {
			diags = append(diags, errAt(v.Range, "Duplicate name",
				fmt.Sprintf("vc %q is already declared at %s", v.Name, pos(prev.Range))))
			continue
		}
		vcs[v.Name] = v
	}
	// A gandiva_fair quantum is a whole number of rounds (round_seconds
	// may be set in a later file, so this waits until all are read).
	if round := time.Duration(cfg.RoundSeconds) * time.Second; round > 0 {
		for i := range cfg.VCs {
			if v := &cfg.VCs[i]; v.Quantum > 0 && v.Quantum%round != 0 {
				diags = append(diags, errAt(v.QuantumRange, "Invalid quantum",
					fmt.Sprintf("vc %q: quantum: %s is not a whole number of rounds (round %s)", v.Name, shortDuration(v.Quantum), shortDuration(round))))
			}
		}
	}

	// Quota-only shares (gpus) are for a config without cells, and then
	// for every VC: cells guarantee quotas by sharing safety on physical
	// cells, a GPU count over the whole cluster cannot be checked against
	// them, and a VC without a share beside VCs with one is unspecified.
	var withGPUs *VC
	for i := range cfg.VCs {
		if v := &cfg.VCs[i]; v.GPUs != nil {
			withGPUs = v
			if len(cfg.FromTopology) > 0 {
				diags = append(diags, errAt(v.GPUsRange, "Quota-only share with cells",
					fmt.Sprintf("vc %q: gpus is a quota-only share for a config without cells, but cells_from_topology at %s derives cells; give the VC a quota of cells",
						v.Name, pos(cfg.FromTopology[0].Range))))
			} else if len(cfg.Cells) > 0 {
				diags = append(diags, errAt(v.GPUsRange, "Quota-only share with cells",
					fmt.Sprintf("vc %q: gpus is a quota-only share for a config without cells, but cell %q is declared at %s; give the VC a quota of cells",
						v.Name, cfg.Cells[0].Name, pos(cfg.Cells[0].Range))))
			}
		}
	}
	// Several VCs with neither cells nor shares would have no rule for who
	// gets which GPUs (the allocator used to run the first VC's policy for
	// every job and ignore the others' policies).
	if withGPUs == nil && len(cfg.Cells) == 0 && len(cfg.FromTopology) == 0 && len(cfg.VCs) > 1 {
		for i := 1; i < len(cfg.VCs); i++ {
			if v := &cfg.VCs[i]; len(v.Quota) == 0 {
				diags = append(diags, errAt(v.Range, "Missing gpus",
					fmt.Sprintf("vc %q: with several VCs and no cells, every VC declares its share, e.g. gpus = { v100 = 8 } (vc %q has none either)", v.Name, cfg.VCs[0].Name)))
			}
		}
	}
	if withGPUs != nil && len(cfg.Cells) == 0 {
		for i := range cfg.VCs {
			if v := &cfg.VCs[i]; v.GPUs == nil && len(v.Quota) == 0 {
				diags = append(diags, errAt(v.Range, "Missing gpus",
					fmt.Sprintf("vc %q has no gpus but vc %q has a quota-only share; in a quota-only config every VC declares gpus", v.Name, withGPUs.Name)))
			}
		}
	}

	cellByName := map[string]*Cell{}
	pinnedBy := map[string]string{}
	for i := range cfg.Cells {
		c := &cfg.Cells[i]
		if prev, dup := cellByName[c.Name]; dup {
			diags = append(diags, errAt(c.Range, "Duplicate name",
				fmt.Sprintf("cell %q is already declared at %s", c.Name, pos(prev.Range))))
			continue
		}
		cellByName[c.Name] = c
		ct := types[c.Type]
		if ct == nil {
			diags = append(diags, errAt(c.Range, "Unknown cell type",
				fmt.Sprintf("cell %q: type %q is not a declared cell_type", c.Name, c.Type)))
			continue
		}
		nodeLevel := tree.NodeLevel(c.Type)
		switch {
		case nodeLevel == 0:
			diags = append(diags, errAt(c.Range, "Top cell below node level",
				fmt.Sprintf("cell %q: type %q has no node = true type at or below it", c.Name, c.Type)))
			continue
		case len(c.NomadNodes) > 0 && len(c.NomadNodes) != tree.Count(c.Type, nodeLevel):
			diags = append(diags, errAt(c.Range, "Wrong number of nomad_nodes",
				fmt.Sprintf("cell %q holds %d nodes but nomad_nodes lists %d", c.Name, tree.Count(c.Type, nodeLevel), len(c.NomadNodes))))
		case c.NomadNode != "" && tree.Level(c.Type) != nodeLevel:
			diags = append(diags, errAt(c.Range, "Wrong node mapping",
				fmt.Sprintf("cell %q holds %d nodes; use nomad_nodes", c.Name, tree.Count(c.Type, nodeLevel))))
		}
		if c.GPUType != "" && c.GPUType != tree.GPUType(c.Type) {
			diags = append(diags, errAt(c.Range, "Wrong gpu_type",
				fmt.Sprintf("cell %q: gpu_type = %q but type %q holds %q", c.Name, c.GPUType, c.Type, tree.GPUType(c.Type))))
		}
		for _, b := range c.Bad {
			if err := tree.CheckAddress(c.Type, b); err != nil {
				diags = append(diags, errAt(c.Range, "Invalid bad address", fmt.Sprintf("cell %q: bad %q: %v", c.Name, b, err)))
			}
		}
		if c.Pinned != "" {
			if vcs[c.Pinned] == nil {
				diags = append(diags, errAt(c.Range, "Unknown VC", fmt.Sprintf("cell %q: pinned = %q is not a declared vc", c.Name, c.Pinned)))
			}
			pinnedBy[c.Name] = c.Pinned
		}
	}
	for i := range cfg.VCs {
		v := &cfg.VCs[i]
		for _, p := range v.Pinned {
			c := cellByName[p]
			switch {
			case c == nil:
				diags = append(diags, errAt(v.Range, "Unknown cell", fmt.Sprintf("vc %q: pinned cell %q is not a declared cell", v.Name, p)))
			case pinnedBy[p] != "" && pinnedBy[p] != v.Name:
				diags = append(diags, errAt(v.Range, "Cell pinned twice", fmt.Sprintf("vc %q: cell %q is already pinned to vc %q", v.Name, p, pinnedBy[p])))
			default:
				pinnedBy[p] = v.Name
			}
		}
	}
	if diags.HasErrors() {
		return diags
	}

	// Quotas resolve to chains and meet sharing safety at start: checked by
	// the cells package (the allocator runs the same check), which names
	// each failing quota by index so the error points at its entry.
	qc, err := cells.CheckQuotas(cfg.CellSpec())
	if err != nil { // the checks above should have caught it
		return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid cells", Detail: err.Error()})
	}
	for vi := range cfg.VCs {
		for qi := range cfg.VCs[vi].Quota {
			q := &cfg.VCs[vi].Quota[qi]
			if ch := qc.Chains[vi][qi]; ch != "" {
				_, q.Type = splitQuota(q.CellType)
				q.Chain = ch
			}
		}
	}
	for _, p := range qc.Problems {
		if len(cfg.FromTopology) > 0 && (p.Kind == cells.UnknownType || p.Kind == cells.NoCell) {
			// Derived at run time from the nodes observed: the agent warns
			// and treats the entry as unsatisfiable until a node provides it.
			continue
		}
		v := &cfg.VCs[p.VC]
		q := v.Quota[p.Quota]
		_, tname := splitQuota(q.CellType)
		var d *hcl.Diagnostic
		switch p.Kind {
		case cells.UnknownType:
			d = errAt(q.Range, "Unknown cell type",
				fmt.Sprintf("vc %q: quota names %q, not a declared cell_type", v.Name, tname))
		case cells.NoCell:
			d = errAt(q.Range, "Quota exceeds cluster",
				fmt.Sprintf("vc %q: quota %q = %d but no physical cell holds a %q", v.Name, q.CellType, q.Count, tname))
		case cells.Ambiguous:
			d = errAt(q.Range, "Ambiguous quota",
				fmt.Sprintf("vc %q: cell type %q is in chains %s; write \"%s/%s\"", v.Name, tname, strings.Join(p.Chains, ", "), p.Chains[0], tname))
		default:
			d = errAt(q.Range, "Quota exceeds cluster",
				fmt.Sprintf("vc %q: quota %q = %d; all VCs together claim %d cells of level %d in chain %q but the cluster has %d (sharing safety)",
					v.Name, q.CellType, q.Count, p.Demand, p.Level, p.Chain, p.Have))
		}
		diags = append(diags, d)
	}
	return diags
}

// splitQuota splits a quota key "chain/type" (or "type": chain "").
func splitQuota(key string) (chain, typ string) {
	if i := strings.Index(key, "/"); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// CellSpec is the config as the cells allocator's domain types: cell types,
// physical top cells (pinned by the cell or by a VC's pinned list) and each
// VC's quota (the chain Validate resolved, else the one written as
// "chain/type"). Quota-only VCs (gpus) have no cell quota.
func (c *Config) CellSpec() cells.Spec {
	var s cells.Spec
	for _, ct := range c.CellTypes {
		s.Types = append(s.Types, cells.CellType{Name: ct.Name, Child: ct.Child, Count: ct.Count, Node: ct.Node, GPUType: ct.GPUType})
	}
	pinned := map[string]string{}
	for _, v := range c.VCs {
		for _, p := range v.Pinned {
			pinned[p] = v.Name
		}
		vc := cells.VC{Name: v.Name}
		for _, q := range v.Quota {
			chain, typ := splitQuota(q.CellType)
			if q.Chain != "" {
				chain = q.Chain
			}
			vc.Quota = append(vc.Quota, cells.Quota{Chain: chain, Type: typ, Count: q.Count})
		}
		s.VCs = append(s.VCs, vc)
	}
	for _, cell := range c.Cells {
		p := cell.Pinned
		if p == "" {
			p = pinned[cell.Name]
		}
		s.Cells = append(s.Cells, cells.TopCell{Name: cell.Name, Type: cell.Type, Pinned: p, Bad: cell.Bad})
	}
	return s
}

// shortDuration prints a duration as written in configs: 6m, 1h30m, 90s
// (not 6m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// FormatDiagnostic renders one diagnostic as "file:line:col: summary; detail".
func FormatDiagnostic(d *hcl.Diagnostic) string {
	var sb strings.Builder
	if d.Subject != nil {
		sb.WriteString(pos(*d.Subject))
		sb.WriteString(": ")
	}
	sb.WriteString(d.Summary)
	if d.Detail != "" {
		sb.WriteString("; ")
		sb.WriteString(d.Detail)
	}
	return sb.String()
}

// FormatDiagnostics renders diagnostics one per line.
func FormatDiagnostics(diags hcl.Diagnostics) string {
	lines := make([]string, len(diags))
	for i, d := range diags {
		lines[i] = FormatDiagnostic(d)
	}
	return strings.Join(lines, "\n")
}

// TypeTree answers questions about validated (acyclic, resolved) cell types.
type TypeTree struct{ types map[string]CellType }

// NewTypeTree indexes cell types; it assumes Validate's checks passed.
func NewTypeTree(cts []CellType) TypeTree {
	m := make(map[string]CellType, len(cts))
	for _, ct := range cts {
		if _, dup := m[ct.Name]; !dup {
			m[ct.Name] = ct
		}
	}
	return TypeTree{m}
}

// Level is 1 for a leaf, one more per child step.
func (t TypeTree) Level(name string) int {
	l := 0
	for ct, ok := t.types[name]; ok && l < len(t.types)+1; ct, ok = t.types[ct.Child] {
		l++
		if ct.Child == "" {
			break
		}
	}
	return l
}

// TypeAt is the type at level l in the chain below name ("" if none).
func (t TypeTree) TypeAt(name string, l int) string {
	for n := name; n != ""; n = t.types[n].Child {
		if t.Level(n) == l {
			return n
		}
	}
	return ""
}

// Count is how many cells of level l a cell of type name holds.
func (t TypeTree) Count(name string, l int) int {
	n := 1
	for ct := t.types[name]; t.Level(ct.Name) > l; ct = t.types[ct.Child] {
		n *= ct.Count
	}
	return n
}

// NodeLevel is the level of the node = true type at or below name, 0 if none.
func (t TypeTree) NodeLevel(name string) int {
	for n := name; n != ""; n = t.types[n].Child {
		if t.types[n].Node {
			return t.Level(n)
		}
	}
	return 0
}

// GPUType is the leaf GPU type below name.
func (t TypeTree) GPUType(name string) string {
	n := name
	for t.types[n].Child != "" {
		n = t.types[n].Child
	}
	return t.types[n].GPUType
}

// Contains reports whether sub is top or one of its descendants.
func (t TypeTree) Contains(top, sub string) bool {
	for n := top; n != ""; n = t.types[n].Child {
		if n == sub {
			return true
		}
	}
	return false
}

// ChildCount is the number of children of a cell of type name (0 for a leaf).
func (t TypeTree) ChildCount(name string) int {
	if t.types[name].Child == "" {
		return 0
	}
	return t.types[name].Count
}

// Child is the child type of name ("" for a leaf).
func (t TypeTree) Child(name string) string { return t.types[name].Child }

// CheckAddress checks a leaf address relative to a cell of type name:
// one child index per level down to the leaf.
func (t TypeTree) CheckAddress(name, addr string) error {
	parts := strings.Split(addr, "/")
	n := name
	for i, p := range parts {
		ct := t.types[n]
		if ct.Child == "" {
			return fmt.Errorf("too many components (a %s is a leaf after %d)", name, i)
		}
		k, err := strconv.Atoi(p)
		if err != nil || k < 0 || k >= ct.Count {
			return fmt.Errorf("component %d = %q must be an index in [0,%d)", i, p, ct.Count)
		}
		n = ct.Child
	}
	if t.types[n].Child != "" {
		return fmt.Errorf("address stops above the leaf level")
	}
	return nil
}

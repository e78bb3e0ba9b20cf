package topocells

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/cells"
)

// Group is one Nomad device group of a node (vendor/type/name, its
// instance ids and its attributes as strings), as Nomad's node API or the
// plugin's fingerprint report shows it.
type Group struct {
	Vendor, Type, Name string
	Instances          []string
	Attributes         map[string]string
}

// GPUs reads a node's GPUs from its device groups: every instance of an
// nvidia/gpu group, its type typeOf(group name) (the Nomad backend's
// mapping, so derived types match observed ones), its cell path and NVML
// index from the group's `<uuid>.cell` and `<uuid>.index` attributes.
// Share groups (gpu-share) are not GPUs.
func GPUs(groups []Group, typeOf func(model string) string) []GPU {
	var out []GPU
	for _, g := range groups {
		if g.Vendor != "nvidia" || g.Type != "gpu" {
			continue
		}
		for _, id := range g.Instances {
			gpu := GPU{UUID: id, Type: typeOf(g.Name), Cell: g.Attributes[id+".cell"]}
			if n, err := strconv.Atoi(g.Attributes[id+".index"]); err == nil {
				gpu.Index = n
			}
			out = append(out, gpu)
		}
	}
	return out
}

// ParseReport reads the device groups of one `nomad-device-rondo
// fingerprint` JSON report (device_groups[].id "vendor/type/name",
// instances, attributes).
func ParseReport(b []byte) ([]Group, error) {
	var r struct {
		Groups []struct {
			ID         string            `json:"id"`
			Instances  []string          `json:"instances"`
			Attributes map[string]string `json:"attributes"`
		} `json:"device_groups"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("fingerprint report: %w", err)
	}
	var out []Group
	for _, g := range r.Groups {
		parts := strings.SplitN(g.ID, "/", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("fingerprint report: device group id %q is not vendor/type/name", g.ID)
		}
		out = append(out, Group{Vendor: parts[0], Type: parts[1], Name: parts[2], Instances: g.Instances, Attributes: g.Attributes})
	}
	return out, nil
}

// Apply adds derived cells to a written spec. Written cells win: derived
// types are added unless a written type of the same name exists; a derived
// cell whose chain clashes with a written type of that name (another child
// or count) or whose name is a written cell's is left out and noted.
func Apply(written cells.Spec, r Result) (cells.Spec, []string) {
	out := written
	out.Types = append([]cells.CellType(nil), written.Types...)
	out.Cells = append([]cells.TopCell(nil), written.Cells...)
	have := map[string]cells.CellType{}
	for _, t := range written.Types {
		have[t.Name] = t
	}
	derived := map[string]cells.CellType{}
	for _, t := range r.Types {
		derived[t.Name] = t
	}
	cellNames := map[string]bool{}
	for _, c := range written.Cells {
		cellNames[c.Name] = true
	}
	var notes []string
	added := map[string]bool{}
	for _, c := range r.Cells {
		if cellNames[c.Name] {
			notes = append(notes, fmt.Sprintf("node %s: derived cell %q has a written cell's name; not derived", c.Node, c.Name))
			continue
		}
		var chain []cells.CellType
		clash := ""
		for t, ok := derived[c.Type]; ok; t, ok = derived[t.Child] {
			if w, written := have[t.Name]; written && w != t {
				clash = t.Name
				break
			}
			chain = append(chain, t)
			if t.Child == "" {
				break
			}
		}
		if clash != "" {
			notes = append(notes, fmt.Sprintf("node %s: derived cell type %q differs from the written cell_type of that name; not derived", c.Node, clash))
			continue
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if t := chain[i]; !added[t.Name] && have[t.Name] == (cells.CellType{}) {
				added[t.Name] = true
				out.Types = append(out.Types, t)
			}
		}
		cellNames[c.Name] = true
		out.Cells = append(out.Cells, cells.TopCell{Name: c.Name, Type: c.Type})
	}
	return out, notes
}

// Tree prints a derivation: its cell types, then each top cell with the GPU
// uuids of each child cell, e.g.
//
//	type v100-node = 2 × v100-numa (node)
//	cell n0 (v100-node): [[GPU-0 GPU-1] [GPU-2 GPU-3]] [[...] [...]]
func Tree(r Result) string {
	var b strings.Builder
	byName := map[string]cells.CellType{}
	for _, t := range r.Types {
		byName[t.Name] = t
		if t.Child == "" {
			fmt.Fprintf(&b, "type %s = one %s GPU\n", t.Name, t.GPUType)
			continue
		}
		node := ""
		if t.Node {
			node = " (node)"
		}
		fmt.Fprintf(&b, "type %s = %d × %s%s\n", t.Name, t.Count, t.Child, node)
	}
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "cell %s (%s, node %s): %s\n", c.Name, c.Type, c.Node, nest(byName, c.Type, c.GPUs))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// nest brackets uuids by the cells of type typ's children.
func nest(types map[string]cells.CellType, typ string, uuids []string) string {
	t := types[typ]
	if t.Child == "" || len(uuids) <= 1 {
		return strings.Join(uuids, " ")
	}
	per := len(uuids) / t.Count
	var parts []string
	for i := 0; i+per <= len(uuids); i += per {
		s := nest(types, t.Child, uuids[i:i+per])
		if types[t.Child].Child != "" {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Groups lists the cells of one derived type in a result as sets of GPU
// uuids, sorted (tests and tools ask "which GPUs share a cell").
func Groups(r Result, typ string) [][]string {
	byName := map[string]cells.CellType{}
	for _, t := range r.Types {
		byName[t.Name] = t
	}
	var out [][]string
	var walk func(t string, uuids []string)
	walk = func(t string, uuids []string) {
		if t == typ {
			g := append([]string(nil), uuids...)
			sort.Strings(g)
			out = append(out, g)
			return
		}
		ct := byName[t]
		if ct.Child == "" {
			return
		}
		per := len(uuids) / ct.Count
		for i := 0; i+per <= len(uuids); i += per {
			walk(ct.Child, uuids[i:i+per])
		}
	}
	for _, c := range r.Cells {
		walk(c.Type, c.GPUs)
	}
	return out
}

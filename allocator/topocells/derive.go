// Package topocells derives HiveD cells from the GPU topology the device
// plugin publishes (`<uuid>.cell` paths), so that operators need not write
// cell_type and cell blocks by hand. Pure: nodes and their GPUs in, cell
// types and node-level top cells out, in the form a written config gives
// the cells allocator.
package topocells

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rondo-sched/rondo/allocator/cells"
)

// GPU is one GPU of a node, as the device plugin publishes it.
type GPU struct {
	UUID string
	// Type is Rondo's GPU type ("v100"), as the Nomad backend names it.
	Type string
	// Cell is the topology path, outermost first
	// ("system0/numa0/host-bridge0/pcie-multi-switch0/pcie-switch0/board0");
	// "" when the plugin did not publish one.
	Cell string
	// Index is the NVML index: it orders GPUs inside a cell.
	Index int
}

// Node is one Nomad node and its GPUs.
type Node struct {
	Name string
	GPUs []GPU
}

// TopCell is a derived node-level top cell: GPUs lists the GPU uuids in
// leaf-address order (leaf i of the cell is GPUs[i]).
type TopCell struct {
	Name, Type, Node string
	GPUs             []string
}

// Result is a derivation: cell types (each chain leaf first), top cells (by
// node name, then GPU type) and notes on what was collapsed or skipped.
type Result struct {
	Types []cells.CellType
	Cells []TopCell
	Notes []string
}

// level is one kept topology level of a node's GPUs of one type.
type level struct {
	name string // "numa", "pcie-switch", ...
	size int    // GPUs per cell at this level
}

// shape is a node's chain for one GPU type: the kept levels outermost
// first, and the GPUs per node.
type shape struct {
	gpuType string
	gpus    int
	levels  []level
}

func (s shape) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", s.gpuType, s.gpus)
	for _, l := range s.levels {
		fmt.Fprintf(&b, " %s=%d", l.name, l.size)
	}
	return b.String()
}

// part is one node's GPUs of one type, in leaf order, with its shape.
type part struct {
	node  string
	shape shape
	uuids []string
	cell  string // top cell name
}

// Derive builds cells from nodes' topology. Per node and GPU type, the
// levels of the cell paths are read outermost first; a level is kept when
// its cells all hold the same number of GPUs (a cell type has a fixed child
// count) and more than the next kept level inward and fewer than the node
// (a level whose cells hold the same GPUs as a closer level, one GPU, or the
// whole node adds nothing and collapses; of levels with the same GPUs,
// board, pcie-switch, numa, host-bridge, pcie-multi-switch is the order
// that names the cell). An irregular level (cells of different sizes) is
// skipped and noted: the tree keeps the regular levels around
// it. The outermost path level (system) is the node itself.
//
// Names: the leaf is the GPU type ("v100"), each kept level
// "<type>-<level>" ("v100-numa"), the node level "<type>-node". When nodes
// of one GPU type have different shapes, every non-leaf type of that GPU
// type is suffixed with the node's GPU count ("v100-node-8",
// "v100-numa-8"); two shapes with the same count cannot both be named, so
// the nodes of the later one (by first node name) are skipped and noted.
// A top cell is named after its node, or "<node>-<type>" when the node
// holds several GPU types. Leaf order: depth first, children ordered by
// their lowest NVML index, GPUs by index.
func Derive(nodes []Node) Result {
	var r Result
	nodes = slices.Clone(nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var parts []part
	for _, n := range nodes {
		byType := map[string][]GPU{}
		var types []string
		for _, g := range n.GPUs {
			if _, ok := byType[g.Type]; !ok {
				types = append(types, g.Type)
			}
			byType[g.Type] = append(byType[g.Type], g)
		}
		sort.Strings(types)
		for _, t := range types {
			p, notes := derivePart(n.Name, t, byType[t])
			r.Notes = append(r.Notes, notes...)
			p.cell = n.Name
			if len(types) > 1 {
				p.cell = n.Name + "-" + t
			}
			parts = append(parts, p)
		}
	}
	// Shapes per GPU type, in order of first node.
	shapes := map[string][]string{} // GPU type -> shape keys
	first := map[string]shape{}
	nodesOf := map[string][]string{}
	for _, p := range parts {
		k := p.shape.key()
		if _, ok := first[k]; !ok {
			first[k] = p.shape
			shapes[p.shape.gpuType] = append(shapes[p.shape.gpuType], k)
		}
		nodesOf[k] = append(nodesOf[k], p.node)
	}
	topType := map[string]string{} // shape key -> node-level type name
	leafDone := map[string]bool{}
	var gpuTypes []string
	for t := range shapes {
		gpuTypes = append(gpuTypes, t)
	}
	sort.Strings(gpuTypes)
	for _, t := range gpuTypes {
		keys := shapes[t]
		suffix := len(keys) > 1
		named := map[int]string{} // GPU count -> shape key named with it
		for _, k := range keys {
			s := first[k]
			if suffix {
				if prev, dup := named[s.gpus]; dup {
					r.Notes = append(r.Notes, fmt.Sprintf(
						"nodes %s: %d %s GPUs in another shape than nodes %s (%s vs %s); not derived, write their cells by hand",
						strings.Join(nodesOf[k], ", "), s.gpus, t, strings.Join(nodesOf[prev], ", "), describe(s), describe(first[prev])))
					continue
				}
				named[s.gpus] = k
			}
			if !leafDone[t] {
				leafDone[t] = true
				r.Types = append(r.Types, cells.CellType{Name: t, GPUType: t})
			}
			name := func(lvl string) string {
				if suffix {
					return fmt.Sprintf("%s-%s-%d", t, lvl, s.gpus)
				}
				return t + "-" + lvl
			}
			child, childSize := t, 1
			for i := len(s.levels) - 1; i >= 0; i-- {
				l := s.levels[i]
				r.Types = append(r.Types, cells.CellType{Name: name(l.name), Child: child, Count: l.size / childSize})
				child, childSize = name(l.name), l.size
			}
			top := name("node")
			r.Types = append(r.Types, cells.CellType{Name: top, Child: child, Count: s.gpus / childSize, Node: true})
			topType[k] = top
		}
	}
	for _, p := range parts {
		if top, ok := topType[p.shape.key()]; ok {
			r.Cells = append(r.Cells, TopCell{Name: p.cell, Type: top, Node: p.node, GPUs: p.uuids})
		}
	}
	return r
}

// namePref ranks level names for a cell that several levels describe
// (lower wins): NVLink boards, PCIe switches and sockets are what operators
// write quotas in; host bridges and multi-switch fabrics name the same
// groups on some machines and not on others.
var namePref = map[string]int{"board": 0, "pcie-switch": 1, "numa": 2, "host-bridge": 3, "pcie-multi-switch": 4}

// describe is a shape for a note: "8 GPUs: numa×4, pcie-switch×2".
func describe(s shape) string {
	var ls []string
	for _, l := range s.levels {
		ls = append(ls, fmt.Sprintf("%s of %d", l.name, l.size))
	}
	if len(ls) == 0 {
		return "flat"
	}
	return strings.Join(ls, ", ")
}

// derivePart finds the kept levels of one node's GPUs of one type and their
// leaf order.
func derivePart(node, typ string, gpus []GPU) (part, []string) {
	var notes []string
	gpus = slices.Clone(gpus)
	sort.Slice(gpus, func(i, j int) bool {
		if gpus[i].Index != gpus[j].Index {
			return gpus[i].Index < gpus[j].Index
		}
		return gpus[i].UUID < gpus[j].UUID
	})
	n := len(gpus)
	paths := make([][]string, n)
	depth := -1
	for i, g := range gpus {
		if g.Cell == "" {
			depth = 0
			notes = append(notes, fmt.Sprintf("node %s: GPU %s has no topology cell; its %s GPUs form one flat node cell", node, g.UUID, typ))
			break
		}
		paths[i] = strings.Split(g.Cell, "/")
		if depth < 0 || len(paths[i]) < depth {
			depth = len(paths[i])
		}
	}
	s := shape{gpuType: typ, gpus: n}
	var kept []int
	// Innermost level first; of two levels with the same GPUs, namePref
	// names the cell. Depth 0 is the system: the whole node.
	prev := 1
	for d := depth - 1; d >= 1; d-- {
		groups := map[string][]int{}
		for i := range gpus {
			k := strings.Join(paths[i][:d+1], "/")
			groups[k] = append(groups[k], i)
		}
		size, regular := -1, true
		for _, g := range groups {
			if size >= 0 && len(g) != size {
				regular = false
			}
			size = len(g)
		}
		name := levelName(paths[0][d])
		switch {
		case !regular:
			notes = append(notes, fmt.Sprintf("node %s: %s level of its %s GPUs is irregular (cells of different sizes); collapsed", node, name, typ))
		case size == prev && len(s.levels) > 0 && namePref[name] < namePref[s.levels[0].name]:
			// Same GPUs as the kept level below: one cell, under the name
			// operators use for it (a socket's only host bridge is a "numa"
			// cell), whichever levels the machine's NVML happens to report.
			s.levels[0].name = name
		case size == prev || size == n:
			// Same GPUs as the level below, or the whole node: adds nothing.
		default:
			s.levels = append([]level{{name: name, size: size}}, s.levels...)
			kept = append([]int{d}, kept...)
			prev = size
		}
	}
	// Leaf order: depth first over the kept levels, a cell's children by
	// their lowest NVML index (gpus is in index order, so the first member
	// seen of a group has its lowest index).
	rank := make([][]int, n)
	for _, d := range kept {
		firstOf := map[string]int{}
		for i := range gpus {
			k := strings.Join(paths[i][:d+1], "/")
			if _, ok := firstOf[k]; !ok {
				firstOf[k] = i
			}
			rank[i] = append(rank[i], firstOf[k])
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return slices.Compare(rank[order[a]], rank[order[b]]) < 0 })
	p := part{node: node, shape: s}
	for _, i := range order {
		p.uuids = append(p.uuids, gpus[i].UUID)
	}
	return p, notes
}

// levelName strips a path component's ordinal: "pcie-switch3" → "pcie-switch".
func levelName(c string) string { return strings.TrimRight(c, "0123456789") }

package round

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// Selector maps one top cell to Nomad nodes: by name (Nodes: the node of a
// node-level cell, or one per node cell in child order — nomad_node,
// nomad_nodes), or by node pool and/or node class (Pool, Class).
type Selector struct {
	Cell        string
	Nodes       []string
	Pool, Class string
}

// resolve maps node-cell addresses to node names. Cells named by node
// come first (their nodes are taken); then, in declaration order, each
// selector cell keeps the nodes already bound to its node cells and binds
// its unbound node cells to the matching ready nodes, sorted by name, that
// no cell holds. A selector that finds too few nodes is warned about (its
// remaining GPUs are bad leaves), not an error. A node bound to a cell
// stays bound while it is listed with the selector's pool and class, ready
// or not (its GPUs are then missing: bad leaves), so a node going down
// never shifts the other nodes to other cells.
func (d *Cells) resolve(listed []engine.Node) map[string]string {
	out := map[string]string{}
	nodes := slices.Clone(listed)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	byName := map[string]engine.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	taken := map[string]bool{}
	for _, sel := range d.cfg.Selectors {
		if len(sel.Nodes) == 0 {
			continue
		}
		for i, addr := range d.nodeCells[sel.Cell] {
			if i < len(sel.Nodes) {
				out[addr] = sel.Nodes[i]
				taken[sel.Nodes[i]] = true
			}
		}
	}
	matches := func(sel Selector, n engine.Node) bool {
		return (sel.Pool == "" || n.Pool == sel.Pool) && (sel.Class == "" || n.Class == sel.Class)
	}
	// Keep existing bindings first, for every selector cell, so that an
	// earlier cell never takes a later cell's node.
	for _, sel := range d.cfg.Selectors {
		if len(sel.Nodes) > 0 {
			continue
		}
		for _, addr := range d.nodeCells[sel.Cell] {
			name := d.bound[addr]
			if n, ok := byName[name]; ok && name != "" && !taken[name] && matches(sel, n) {
				out[addr] = name
				taken[name] = true
			} else {
				delete(d.bound, addr)
			}
		}
	}
	for _, sel := range d.cfg.Selectors {
		if len(sel.Nodes) > 0 {
			continue
		}
		cells := d.nodeCells[sel.Cell]
		got := 0
		for _, addr := range cells {
			if _, ok := out[addr]; ok {
				got++
				continue
			}
			for _, n := range nodes {
				if n.Ready && !taken[n.Name] && matches(sel, n) {
					out[addr], d.bound[addr] = n.Name, n.Name
					taken[n.Name] = true
					got++
					break
				}
			}
		}
		key := fmt.Sprintf("selector %s %d", sel.Cell, got)
		if got < len(cells) && !d.warned[key] {
			d.warned[key] = true
			d.cfg.Warn("cell's node selector matches fewer nodes than the cell holds; its other GPUs are treated as bad",
				"cell", sel.Cell, "node_pool", sel.Pool, "node_class", sel.Class, "matched", got, "holds", len(cells))
		}
	}
	return out
}

// Package cells is HiveD's cell allocator: a physical cluster described as
// trees of cells (GPU, pair, node, rack...), virtual clusters (VCs) holding
// quotas of virtual cells, lazy binding of virtual to physical cells by
// buddy allocation, and the sharing-safety invariant that makes every VC's
// quota available at any time. It is pure and deterministic: no map is
// iterated to make a decision, and state is copied before a placement is
// tried so that a failure leaves nothing behind.
package cells

import (
	"fmt"
	"strconv"
)

// CellType is one level of a chain: a leaf (Child == "", one GPU) or Count
// cells of type Child. Node marks the level that is one machine.
type CellType struct {
	Name    string
	Child   string
	Count   int
	Node    bool
	GPUType string
}

// TopCell is a physical top-level cell; its Type names its chain.
type TopCell struct {
	Name   string
	Type   string
	Pinned string   // VC owning the whole cell outside its quota, or ""
	Bad    []string // leaf addresses relative to the cell, bad at start
}

// Quota is Count virtual cells of Type in the chain whose top type is Chain
// ("" when Type belongs to one chain only).
type Quota struct {
	Chain, Type string
	Count       int
}

// VC is a virtual cluster.
type VC struct {
	Name  string
	Quota []Quota
}

// Spec is a whole cluster: cell types, physical top cells, VCs.
type Spec struct {
	Types []CellType
	Cells []TopCell
	VCs   []VC
}

// cellInfo is the static shape of one cell. Cells are stored in preorder, so
// a cell's subtree is the index range [index, end) and its leaves are the
// leaf positions [lo, hi).
type cellInfo struct {
	addr      string
	typ       string
	chain     int
	level     int
	nodeLevel int // cells at or below this level lie inside one machine
	parent    int
	children  []int
	end       int
	lo, hi    int
	top       int // index into forest.tops
}

// forest is an immutable set of cell trees: the physical cluster, or one
// VC's virtual cluster.
type forest struct {
	cells    []cellInfo
	leaves   []int // leaf position -> cell index
	tops     []int // cell index of each top cell
	maxLevel int
}

type typeTable struct {
	byName map[string]CellType
	order  []CellType
}

func newTypeTable(types []CellType) (typeTable, error) {
	t := typeTable{byName: map[string]CellType{}, order: types}
	for _, ct := range types {
		if _, dup := t.byName[ct.Name]; dup {
			return t, fmt.Errorf("cell type %q declared twice", ct.Name)
		}
		if ct.Child != "" && ct.Count <= 0 {
			return t, fmt.Errorf("cell type %q: count %d must be positive", ct.Name, ct.Count)
		}
		t.byName[ct.Name] = ct
	}
	for _, ct := range types {
		seen := map[string]bool{}
		n := 1
		for c := ct; c.Child != ""; c = t.byName[c.Child] {
			if seen[c.Name] {
				return t, fmt.Errorf("cell type %q: cycle in child chain", ct.Name)
			}
			seen[c.Name] = true
			if _, ok := t.byName[c.Child]; !ok {
				return t, fmt.Errorf("cell type %q: unknown child %q", c.Name, c.Child)
			}
			if n *= c.Count; n > 1<<16 {
				return t, fmt.Errorf("cell type %q: too many GPUs", ct.Name)
			}
		}
	}
	return t, nil
}

func (t typeTable) level(name string) int {
	l := 1
	for c := t.byName[name]; c.Child != ""; c = t.byName[c.Child] {
		l++
	}
	return l
}

func (t typeTable) contains(top, sub string) bool {
	for n := top; n != ""; n = t.byName[n].Child {
		if n == sub {
			return true
		}
	}
	return false
}

// nodeLevel is the level of the node type at or below top; a top cell below
// node level lies inside one machine, so its own level is returned.
func (t typeTable) nodeLevel(top string) int {
	for n := top; n != ""; n = t.byName[n].Child {
		if t.byName[n].Node {
			return t.level(n)
		}
	}
	return t.level(top)
}

// add appends a top cell of type typ and its subtree to f.
func (f *forest) add(t typeTable, name, typ string, chain int) {
	f.tops = append(f.tops, len(f.cells))
	nl := t.nodeLevel(typ)
	var build func(addr, typ string, parent int) int
	build = func(addr, typ string, parent int) int {
		ct := t.byName[typ]
		idx := len(f.cells)
		f.cells = append(f.cells, cellInfo{addr: addr, typ: typ, chain: chain, level: t.level(typ),
			nodeLevel: nl, parent: parent, lo: len(f.leaves), top: len(f.tops) - 1})
		if f.cells[idx].level > f.maxLevel {
			f.maxLevel = f.cells[idx].level
		}
		if ct.Child == "" {
			f.leaves = append(f.leaves, idx)
		} else {
			for i := 0; i < ct.Count; i++ {
				c := build(addr+"/"+strconv.Itoa(i), ct.Child, idx)
				f.cells[idx].children = append(f.cells[idx].children, c)
			}
		}
		f.cells[idx].end = len(f.cells)
		f.cells[idx].hi = len(f.leaves)
		return idx
	}
	build(name, typ, -1)
}

// lookup finds a cell by address.
func (f *forest) lookup(addr string) (int, bool) {
	for i := range f.cells {
		if f.cells[i].addr == addr {
			return i, true
		}
	}
	return -1, false
}

// leafNode is the node-level ancestor (or the top cell) of a cell.
func (f *forest) nodeOf(c int) int {
	for f.cells[c].parent >= 0 && f.cells[f.cells[c].parent].level <= f.cells[c].nodeLevel {
		c = f.cells[c].parent
	}
	return c
}

// lca is the lowest common ancestor of a set of leaf positions, or -1 when
// they lie in different top cells.
func (f *forest) lca(leaves []int) int {
	if len(leaves) == 0 {
		return -1
	}
	c := f.leaves[leaves[0]]
	for _, l := range leaves[1:] {
		for c >= 0 && (l < f.cells[c].lo || l >= f.cells[c].hi) {
			c = f.cells[c].parent
		}
	}
	return c
}

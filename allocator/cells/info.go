package cells

import "slices"

// GPU describes one physical or virtual GPU for a round-based layer above
// the allocator: its address, the address of its node (machine), its GPU
// type (the leaf type's GPUType, else its name) and whether it is bad (a
// virtual GPU: it would map to a bad physical GPU now).
type GPU struct {
	Addr, Node, Type string
	Bad              bool
}

// Gang is a placed request as Gang reports it.
type Gang struct {
	VC    string // "" for opportunistic gangs
	Class Class
	// Members are physical GPU addresses per member; Virtual the VC's
	// virtual GPU addresses (guaranteed gangs only).
	Members, Virtual [][]string
}

func (a *Allocator) gpuType(f *forest, c int) string {
	t := a.types.byName[f.cells[c].typ]
	if t.GPUType != "" {
		return t.GPUType
	}
	return t.Name
}

// PhysicalGPUs lists the cluster's GPUs in address order of the cell trees.
func (a *Allocator) PhysicalGPUs() []GPU {
	f := &a.phys
	out := make([]GPU, len(f.leaves))
	for l, c := range f.leaves {
		out[l] = GPU{Addr: f.cells[c].addr, Node: f.cells[f.nodeOf(c)].addr, Type: a.gpuType(f, c), Bad: a.s.bad[l]}
	}
	return out
}

// VirtualGPUs lists a VC's virtual GPUs (its quota and pinned cells as a
// private cluster), or nil for an unknown VC. A virtual GPU is bad when it
// is free and would map to a bad physical GPU, or when it is used and does.
func (a *Allocator) VirtualGPUs(vc string) []GPU {
	v, ok := a.vcIdx[vc]
	if !ok {
		return nil
	}
	f := &a.virt[v]
	out := make([]GPU, len(f.leaves))
	for vl, c := range f.leaves {
		pl := a.leafTarget(a.s, v, vl, false)
		out[vl] = GPU{Addr: f.cells[c].addr, Node: f.cells[f.nodeOf(c)].addr, Type: a.gpuType(f, c), Bad: pl >= 0 && a.s.bad[pl]}
	}
	return out
}

// Gang reports a placed request.
func (a *Allocator) Gang(id string) (Gang, bool) {
	g, ok := a.s.gangs[id]
	if !ok {
		return Gang{}, false
	}
	out := Gang{Class: g.class, Members: a.addresses(g)}
	if g.class != Opportunistic {
		out.VC = a.vcs[g.vc].name
		f := &a.virt[g.vc]
		for _, leaves := range g.virt {
			var m []string
			for _, vl := range leaves {
				m = append(m, f.cells[f.leaves[vl]].addr)
			}
			out.Virtual = append(out.Virtual, m)
		}
	}
	return out, true
}

// Gangs lists the ids of placed requests in placement order.
func (a *Allocator) Gangs() []string {
	gs := a.s.sortedGangs()
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.id
	}
	return slices.Clip(out)
}

// VCs lists the VC names in declaration order.
func (a *Allocator) VCs() []string {
	out := make([]string, len(a.vcs))
	for i, v := range a.vcs {
		out[i] = v.name
	}
	return out
}

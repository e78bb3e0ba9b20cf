package round

import (
	"fmt"

	"github.com/rondo-sched/rondo/allocator/cells"
)

// CellShares turns a cells config into quota-only shares: each VC's quota
// cells (count × the cell type's GPUs) and the top cells pinned to it,
// summed per GPU type (the chain's leaf gpu_type, else its name). This is
// the quota-only baseline of the VC comparison: the same GPUs per type,
// as a share counted over the whole cluster (Quota) instead of cells.
// Every VC of the spec has an entry (empty when it holds nothing).
func CellShares(spec cells.Spec) (map[string]map[string]int, error) {
	types := map[string]cells.CellType{}
	for _, t := range spec.Types {
		types[t.Name] = t
	}
	// size is a cell type's GPUs and leaf GPU type.
	size := func(name string) (int, string, error) {
		n := 1
		t, ok := types[name]
		for seen := 0; ok; seen++ {
			if seen > len(types) {
				return 0, "", fmt.Errorf("round: cell type %q: its chain loops", name)
			}
			if t.Child == "" {
				g := t.GPUType
				if g == "" {
					g = t.Name
				}
				return n, g, nil
			}
			n *= t.Count
			t, ok = types[t.Child]
		}
		return 0, "", fmt.Errorf("round: unknown cell type %q", name)
	}
	out := map[string]map[string]int{}
	for _, v := range spec.VCs {
		m := map[string]int{}
		for _, q := range v.Quota {
			n, g, err := size(q.Type)
			if err != nil {
				return nil, fmt.Errorf("vc %q: %w", v.Name, err)
			}
			m[g] += q.Count * n
		}
		out[v.Name] = m
	}
	for _, c := range spec.Cells {
		if c.Pinned == "" {
			continue
		}
		m, ok := out[c.Pinned]
		if !ok {
			return nil, fmt.Errorf("round: cell %q pinned to unknown vc %q", c.Name, c.Pinned)
		}
		n, g, err := size(c.Type)
		if err != nil {
			return nil, fmt.Errorf("cell %q: %w", c.Name, err)
		}
		m[g] += n
	}
	return out, nil
}

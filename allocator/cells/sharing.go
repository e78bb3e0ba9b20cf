package cells

import (
	"fmt"
	"strings"
)

// Sharing safety is checked here and only here: by New and every buddy
// step on the allocator's state (safe), and by the config checker (hcl)
// through CheckQuotas, which reports positions it can map to file:line:col.

// ProblemKind says why a quota cannot be honoured.
type ProblemKind int

const (
	// UnknownType: the quota names a cell type that is not declared.
	UnknownType ProblemKind = iota + 1
	// NoCell: no physical top cell's chain holds the type (in the named
	// chain, when the quota names one).
	NoCell
	// Ambiguous: the type lies in several chains and the quota names none.
	Ambiguous
	// Oversubscribed: with this quota added (VCs in declaration order,
	// quotas in order), some level of its chain no longer holds every VC's
	// quota at once.
	Oversubscribed
)

// QuotaProblem is one quota entry the physical cells cannot honour,
// identified by its indices in Spec (VC, and Quota in Spec.VCs[VC].Quota)
// so that a config reader can point at the entry.
type QuotaProblem struct {
	VC, Quota int
	Kind      ProblemKind
	// Chains holds the chains (top cell types, in cell order) that hold the
	// type when Kind is Ambiguous.
	Chains []string
	// Oversubscribed: in chain Chain at level Level, the VCs so far claim
	// Demand cells of that level and the unpinned top cells hold Have.
	Chain               string
	Level, Demand, Have int
}

func (p QuotaProblem) Error() string {
	switch p.Kind {
	case UnknownType:
		return fmt.Sprintf("quota %d of vc %d: unknown cell type", p.Quota, p.VC)
	case NoCell:
		return fmt.Sprintf("quota %d of vc %d: no physical cell holds its type", p.Quota, p.VC)
	case Ambiguous:
		return fmt.Sprintf("quota %d of vc %d: type is in chains %s", p.Quota, p.VC, strings.Join(p.Chains, ", "))
	}
	return fmt.Sprintf("sharing safety: quota %d of vc %d: VCs claim %d cells of level %d in chain %s, the cluster has %d",
		p.Quota, p.VC, p.Demand, p.Level, p.Chain, p.Have)
}

// QuotaCheck is the outcome of CheckQuotas.
type QuotaCheck struct {
	// Chains[v][q] is the chain (top cell type) holding quota q of VC v, ""
	// when it does not resolve.
	Chains [][]string
	// Problems in VC order, then quota order.
	Problems []QuotaProblem
}

// CheckQuotas resolves every quota to its chain and checks sharing safety
// on the empty cluster: per chain and level, the unpinned physical top
// cells must hold every VC's whole quota at once. VCs are added in
// declaration order, so an Oversubscribed problem names the first quota
// that breaks a level, and every later one that still does; it reports the
// highest level broken. The error is for specs whose cell types or top
// cells are malformed (checked before quotas can be resolved).
func CheckQuotas(spec Spec) (QuotaCheck, error) {
	t, err := newTypeTable(spec.Types)
	if err != nil {
		return QuotaCheck{}, err
	}
	var chains []chainInfo
	chainOf := map[string]int{}
	var supply [][]int // chain -> free cells per level: unpinned tops at the top level
	for _, tc := range spec.Cells {
		if _, ok := t.byName[tc.Type]; !ok {
			return QuotaCheck{}, fmt.Errorf("cell %q: unknown type %q", tc.Name, tc.Type)
		}
		ch, ok := chainOf[tc.Type]
		if !ok {
			ch = len(chains)
			chainOf[tc.Type] = ch
			chains = append(chains, newChainInfo(t, tc.Type))
			supply = append(supply, make([]int, chains[ch].level+1))
		}
		if tc.Pinned == "" {
			supply[ch][chains[ch].level]++
		}
	}
	out := QuotaCheck{Chains: make([][]string, len(spec.VCs))}
	claim := make([][]int, len(chains)) // chain -> claimed virtual top cells per level
	for ch := range chains {
		claim[ch] = make([]int, chains[ch].level+1)
	}
	for v, vc := range spec.VCs {
		out.Chains[v] = make([]string, len(vc.Quota))
		for qi, q := range vc.Quota {
			ch, prob := resolveChain(t, chains, q)
			if prob.Kind != 0 {
				prob.VC, prob.Quota = v, qi
				out.Problems = append(out.Problems, prob)
				continue
			}
			out.Chains[v][qi] = chains[ch].name
			l := t.level(q.Type)
			claim[ch][l] += q.Count
			if lv, want, have := shortfall(chains[ch].gpus, supply[ch], claim[ch], l); lv > 0 {
				out.Problems = append(out.Problems, QuotaProblem{VC: v, Quota: qi, Kind: Oversubscribed,
					Chain: chains[ch].name, Level: lv, Demand: want, Have: have})
			}
		}
	}
	return out, nil
}

func newChainInfo(t typeTable, top string) chainInfo {
	ci := chainInfo{name: top, level: t.level(top), gpus: make([]int, t.level(top)+1)}
	for n := top; n != ""; n = t.byName[n].Child {
		ci.gpus[t.level(n)] = gpusOf(t, n)
	}
	return ci
}

// resolveChain finds the one chain holding q's type (in q.Chain when set);
// a problem with Kind 0 means it resolved.
func resolveChain(t typeTable, chains []chainInfo, q Quota) (int, QuotaProblem) {
	if _, ok := t.byName[q.Type]; !ok {
		return -1, QuotaProblem{Kind: UnknownType}
	}
	var in []int
	for ch, ci := range chains {
		if (q.Chain == "" || q.Chain == ci.name) && t.contains(ci.name, q.Type) {
			in = append(in, ch)
		}
	}
	switch len(in) {
	case 0:
		return -1, QuotaProblem{Kind: NoCell}
	case 1:
		return in[0], QuotaProblem{}
	}
	p := QuotaProblem{Kind: Ambiguous}
	for _, ch := range in {
		p.Chains = append(p.Chains, chains[ch].name)
	}
	return -1, p
}

// shortfall is the sharing-safety inequality for one chain. free[k] and
// claimed[k] count free physical cells and unbound virtual cells of level k
// (index = level), gpus[k] the GPUs of a level-k cell. Every level l must
// have Σ_{k≥l} free[k]·gpus[k]/gpus[l] ≥ Σ_{k≥l} claimed[k]·gpus[k]/gpus[l]
// (a level-k cell holds gpus[k]/gpus[l] cells of level l). Levels above
// upTo are summed but not checked (the caller knows they hold). It returns
// the highest failing level with both sides in cells of that level, or
// level 0.
func shortfall(gpus, free, claimed []int, upTo int) (level, want, have int) {
	// Sums in GPUs: level-l cells are GPUs / gpus[l], exactly, since every
	// term is a multiple of gpus[l].
	haveG, wantG := 0, 0
	for l := len(gpus) - 1; l >= 1; l-- {
		haveG += free[l] * gpus[l]
		wantG += claimed[l] * gpus[l]
		if l <= upTo && wantG > haveG {
			return l, wantG / gpus[l], haveG / gpus[l]
		}
	}
	return 0, 0, 0
}

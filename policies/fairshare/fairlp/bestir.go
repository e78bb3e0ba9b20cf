// Package fairlp holds the linear programs behind Gandiva-fair's share
// arithmetic that need Clp (cgo): kept apart from package fairshare so that
// fairshare stays pure Go for the mechanism and configuration code.
package fairlp

import (
	"fmt"
	"math"
	"sort"

	"github.com/rondo-sched/rondo/policies/fairshare"
	"github.com/rondo-sched/rondo/policies/lp"
)

// BestIR is the best individually rational reallocation of shares: the
// allocation x maximizing total utility Σ_u Σ_t value[u][t]·x[u][t] subject
// to
//
//	Σ_u x[u][t] = Σ_u shares[u][t]                  per type
//	Σ_t x[u][t] ≤ demand[u]                         per user in demand
//	Σ_t value[u][t]·x[u][t] ≥ Utility(shares, u)    per user
//	x ≥ 0, x[u][t] = 0 where value[u][t] = 0
//
// solved exactly with Clp. It is the benchmark for TradeShares: no trading
// rule that leaves every user at least its no-trade utility can beat it.
// So that the no-trade point is always feasible, a user keeps a variable
// on a type it holds even where it values it 0, and its demand counts as
// at least its current total. Returns x and its total utility.
func BestIR(shares fairshare.Shares, value fairshare.Value, demand map[string]float64) (fairshare.Shares, float64, error) {
	users := make([]string, 0, len(shares))
	typeSet := map[string]bool{}
	for u, m := range shares {
		users = append(users, u)
		for t := range m {
			typeSet[t] = true
		}
	}
	sort.Strings(users)
	types := make([]string, 0, len(typeSet))
	for t := range typeSet {
		types = append(types, t)
	}
	sort.Strings(types)
	var m lp.Model
	m.Maximize()
	type cell struct {
		u, t string
		v    int
	}
	var cells []cell
	byType := map[string][]int{}
	byUser := map[string][]int{}
	for _, u := range users {
		for _, t := range types {
			if value[u][t] <= 0 && shares[u][t] <= 0 {
				continue
			}
			v := m.AddVar(0, lp.Inf, value[u][t])
			cells = append(cells, cell{u, t, v})
			byType[t] = append(byType[t], len(cells)-1)
			byUser[u] = append(byUser[u], len(cells)-1)
		}
	}
	for _, t := range types {
		total := 0.0
		for _, u := range users {
			total += shares[u][t]
		}
		var idx []int
		var val []float64
		for _, c := range byType[t] {
			idx, val = append(idx, cells[c].v), append(val, 1)
		}
		m.AddRow(idx, val, total, total)
	}
	for _, u := range users {
		var idx []int
		var ones, vals []float64
		for _, c := range byUser[u] {
			idx = append(idx, cells[c].v)
			ones = append(ones, 1)
			vals = append(vals, value[u][cells[c].t])
		}
		if d, ok := demand[u]; ok {
			m.AddRow(idx, ones, -lp.Inf, math.Max(d, shares.Total(u)))
		}
		// A relative 1e-9 below the no-trade utility: Clp's tolerances must
		// not make the no-trade point look infeasible.
		u0 := fairshare.Utility(shares, value, u)
		m.AddRow(idx, vals, u0-1e-9*math.Max(1, u0), lp.Inf)
	}
	sol, err := m.Solve()
	if err != nil {
		return nil, 0, fmt.Errorf("best individually rational allocation: %w", err)
	}
	out := fairshare.Shares{}
	for _, u := range users {
		out[u] = map[string]float64{}
	}
	for _, c := range cells {
		if x := sol.X[c.v]; x > 1e-12 {
			out[c.u][c.t] = x
		}
	}
	return out, fairshare.TotalUtility(out, value), nil
}

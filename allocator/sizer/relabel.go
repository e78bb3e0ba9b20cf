package sizer

import (
	"cmp"
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// relabel moves a decided slot's tasks between servers of equal capacity
// (GPUs and CPUs) so that jobs stay where they ran: DL2's placement
// starts afresh every slot and would otherwise move workers between
// identical servers for nothing. Permuting equal servers changes no count
// and no server's load, so the slot stays feasible and decides the same
// (the next slot does not read the placement).
//
// Greedy on the pairs (slot server i, physical server p) of a capacity
// class, by weight: the GPUs the jobs would keep with i's tasks on p,
// plus a bonus for each job whose first GPU last round was on p and that
// has workers on i (its first workers stay: keep or resize, not
// migrate); ties by i, then p. Servers left unmatched keep their order.
func relabel(s *engine.Snapshot, srv []server, caps []dl2.Server, slot *dl2.Slot) {
	if len(s.Running) == 0 || len(srv) < 2 {
		return
	}
	onServer := map[string]int{}
	for i, v := range srv {
		for _, g := range v.gpus {
			onServer[g] = i
		}
	}
	prev := map[string]*engine.Assignment{}
	for i := range s.Running {
		if a := &s.Running[i]; len(a.Jobs) == 1 {
			prev[a.Jobs[0]] = a
		}
	}
	const firstBonus = 1 << 20
	type pair struct{ i, p int }
	weight := map[pair]int{}
	for j := range slot.Jobs {
		a := slot.Alloc[j]
		old := prev[slot.Jobs[j].ID]
		if a.Workers == 0 || old == nil {
			continue
		}
		had := map[int]int{}
		for _, g := range old.GPUs {
			if p, ok := onServer[g]; ok {
				had[p]++
			}
		}
		first, firstOK := onServer[old.GPUs[0]]
		need := map[int]int{}
		for _, i := range a.WorkerOn {
			need[i] += slot.Jobs[j].Demand.WorkerGPUs
		}
		for i, n := range need {
			for p, h := range had {
				if caps[i] != caps[p] {
					continue
				}
				w := min(n, h)
				if firstOK && p == first {
					w += firstBonus
				}
				weight[pair{i, p}] += w
			}
		}
	}
	if len(weight) == 0 {
		return
	}
	pairs := make([]pair, 0, len(weight))
	for k := range weight {
		pairs = append(pairs, k)
	}
	slices.SortFunc(pairs, func(x, y pair) int {
		if c := cmp.Compare(weight[y], weight[x]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.i, y.i); c != 0 {
			return c
		}
		return cmp.Compare(x.p, y.p)
	})
	perm := make([]int, len(srv)) // slot server -> physical server
	for i := range perm {
		perm[i] = -1
	}
	taken := make([]bool, len(srv))
	for _, k := range pairs {
		if perm[k.i] < 0 && !taken[k.p] {
			perm[k.i], taken[k.p] = k.p, true
		}
	}
	// The rest in order, within their capacity class.
	for i := range perm {
		if perm[i] >= 0 {
			continue
		}
		for p := range srv {
			if !taken[p] && caps[p] == caps[i] {
				perm[i], taken[p] = p, true
				break
			}
		}
	}
	for j := range slot.Alloc {
		a := &slot.Alloc[j]
		for k, i := range a.WorkerOn {
			a.WorkerOn[k] = perm[i]
		}
		for k, i := range a.PSOn {
			a.PSOn[k] = perm[i]
		}
	}
	free := make([]dl2.Server, len(slot.Free))
	for i, f := range slot.Free {
		free[perm[i]] = f
	}
	copy(slot.Free, free)
}

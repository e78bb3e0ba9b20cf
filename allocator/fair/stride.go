package fair

import (
	"math"
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
)

func byPass(a, b *jobState) int {
	if a.Pass != b.Pass {
		if a.Pass < b.Pass {
			return -1
		}
		return 1
	}
	return a.order - b.order
}

// decide picks the jobs that run and their GPUs.
//
// At a quantum start everything is decided anew: multi-server gangs
// first, in pass order, each only if its pass is at most the lowest pass
// of the small jobs of every one of its servers (it heads every queue)
// and its GPUs there are free; then each server runs its small jobs in
// pass order, each if it fits the GPUs still free (the lowest pass always
// fits an empty server; the others backfill), so no GPU idles while a job
// bound there fits. Gangs whose GPUs are still all free then backfill.
// Inside a quantum the running set is kept and only free GPUs are filled
// the same way (a job finished, a job arrived).
func (s *Scheduler) decide(snap *engine.Snapshot, lay *layout, running map[string]*engine.Assignment, boundary bool) *engine.Plan {
	st := s.st
	jobs := make([]*jobState, 0, len(st.Jobs))
	for i := range snap.Jobs {
		if js := st.Jobs[snap.Jobs[i].ID]; js != nil && js.stamp == s.stamp {
			jobs = append(jobs, js)
		}
	}
	free := make([]int, len(lay.servers))
	minSmall := make([]float64, len(lay.servers))
	small := make([][]*jobState, len(lay.servers))
	for i, v := range lay.servers {
		free[i], minSmall[i] = v.cap(), math.Inf(1)
	}
	var gangs []*jobState
	used := make(map[string]bool, lay.n)
	keep := make(map[*jobState]bool)
	for _, js := range jobs {
		js.pick = false
		if js.gang() {
			gangs = append(gangs, js)
		} else {
			i := js.srv[0].idx
			small[i] = append(small[i], js)
			minSmall[i] = math.Min(minSmall[i], js.Pass)
		}
	}
	take := func(js *jobState) {
		js.pick = true
		for k, v := range js.srv {
			free[v.idx] -= js.need[k]
		}
	}
	fits := func(js *jobState) bool {
		for k, v := range js.srv {
			if free[v.idx] < js.need[k] {
				return false
			}
		}
		return true
	}
	if !boundary {
		for _, js := range jobs {
			if a := running[js.id]; a != nil && keepable(js, a, lay, used) {
				keep[js] = true
				for _, g := range a.GPUs {
					used[g] = true
				}
				take(js)
			}
		}
	}
	slices.SortFunc(gangs, byPass)
	for _, js := range gangs {
		if js.pick || !fits(js) {
			continue
		}
		head := true
		for _, v := range js.srv {
			if m := minSmall[v.idx]; js.Pass > m+1e-12*math.Abs(m) {
				head = false
				break
			}
		}
		if head {
			take(js)
		}
	}
	for i := range small {
		if free[i] == 0 || len(small[i]) == 0 {
			continue
		}
		slices.SortFunc(small[i], byPass)
		for _, js := range small[i] {
			if !js.pick && js.GPUs <= free[i] {
				take(js)
				if free[i] == 0 {
					break
				}
			}
		}
	}
	for _, js := range gangs {
		if !js.pick && fits(js) {
			take(js)
		}
	}

	// GPUs: a job that ran on GPUs it may keep keeps them; the others
	// take the lowest free GPUs of their servers.
	plan := &engine.Plan{TimeS: snap.TimeS}
	for _, js := range jobs {
		if js.pick && !keep[js] {
			if a := running[js.id]; a != nil && keepable(js, a, lay, used) {
				keep[js] = true
				for _, g := range a.GPUs {
					used[g] = true
				}
			}
		}
	}
	for _, js := range jobs {
		if !js.pick {
			continue
		}
		as := engine.Assignment{Jobs: []string{js.id}, Type: js.Type, Priority: js.Tickets}
		if keep[js] {
			a := running[js.id]
			as.Action, as.GPUs = engine.Keep, slices.Clone(a.GPUs)
		} else {
			as.Action = engine.Start
			as.GPUs = make([]string, 0, js.GPUs)
			for k, v := range js.srv {
				n := js.need[k]
				for _, g := range v.gpus {
					if n == 0 {
						break
					}
					if !used[g] {
						used[g] = true
						as.GPUs = append(as.GPUs, g)
						n--
					}
				}
			}
		}
		for _, v := range js.srv {
			as.Servers = append(as.Servers, v.id)
		}
		plan.Assignments = append(plan.Assignments, as)
	}
	for i := range snap.Running {
		for _, id := range snap.Running[i].Jobs {
			js := st.Jobs[id]
			if js != nil && !js.pick || js == nil && st.Refused[id] != "" {
				plan.Suspend = append(plan.Suspend, id)
			}
		}
	}
	return plan
}

// keepable: the job's last GPUs are healthy, of its bound type, on its
// bound servers in the numbers its binding needs, and still free.
func keepable(js *jobState, a *engine.Assignment, lay *layout, used map[string]bool) bool {
	if a.Type != js.Type || len(a.GPUs) != js.GPUs {
		return false
	}
	var cnt [8]int
	c := cnt[:0]
	if len(js.srv) > len(cnt) {
		c = make([]int, 0, len(js.srv))
	}
	c = c[:len(js.srv)]
	for _, g := range a.GPUs {
		v := lay.gpuSrv[g]
		if v == nil || used[g] {
			return false
		}
		k := slices.Index(js.srv, v)
		if k < 0 {
			return false
		}
		c[k]++
	}
	for k := range c {
		if c[k] != js.need[k] {
			return false
		}
	}
	return true
}

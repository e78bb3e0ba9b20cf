package engine

import "slices"

// Elastic jobs (Job.Elastic) are decided like any other at their minimum
// size, ScaleFactor: that is what the policy allocates and what selection
// counts, so an elastic job's guaranteed share is its minimum. After every
// unit has been placed, the GPUs still free on a type go to the elastic
// jobs placed on that type this round, one worker (StepGPUs GPUs on one
// server) at a time, never above MaxGPUs:
//
//  1. a job whose minimum kept its GPUs keeps its previous extra workers,
//     in worker order, up to the first one whose GPUs are no longer free
//     (a backend that shrinks by count, as Nomad does, stops the highest
//     workers: the engine only ever drops a suffix);
//  2. then, highest priority first, each job grows into free GPUs, on
//     servers it already uses first, else on the server with most free.
//
// The extras shrink back first when others need GPUs: the base placement
// sees last round's extras as free, and newcomers avoid them while they
// fit elsewhere (pickNew). A job is never shrunk below its minimum by this
// step, and two jobs never share a GPU (extras come from the free GPUs of
// the same per-type view as placement). A backend learns a resize from an
// assignment whose GPU count differs from what runs; the action stays Keep
// when the minimum kept its GPUs. Two-role elastic jobs (Elastic.PS, DL2's
// workers and parameter servers) are not this step's: a sizing mechanism
// (allocator/sizer) decides both their counts, and under the engine they
// run at their ScaleFactor.

// elasticPrepare returns the snapshot placement should see — s itself when
// no elastic job runs beyond its minimum, else a copy whose Running holds
// only each elastic job's first ScaleFactor GPUs — and each such job's
// previous extra GPUs (in worker order). It sets e.elSoft, the extras per
// type, for pickNew.
func (e *Engine) elasticPrepare(s *Snapshot) (*Snapshot, map[string][]string) {
	e.elSoft = nil
	var el map[string]int
	for _, j := range s.Jobs {
		if j.Elastic != nil && !j.Elastic.TwoRole() {
			if el == nil {
				el = map[string]int{}
			}
			el[j.ID] = max(j.ScaleFactor, 1)
		}
	}
	e.elAny = el != nil
	if el == nil {
		return s, nil
	}
	var extras map[string][]string
	running := make([]Assignment, len(s.Running))
	for i, a := range s.Running {
		running[i] = a
		if len(a.Jobs) != 1 {
			continue
		}
		sf, ok := el[a.Jobs[0]]
		if !ok || len(a.GPUs) <= sf {
			continue
		}
		if extras == nil {
			extras = map[string][]string{}
			e.elSoft = map[string][]string{}
		}
		running[i].GPUs = a.GPUs[:sf:sf]
		extras[a.Jobs[0]] = a.GPUs[sf:]
		e.elSoft[a.Type] = append(e.elSoft[a.Type], a.GPUs[sf:]...)
	}
	if extras == nil {
		return s, nil
	}
	cp := *s
	cp.Running = running
	return &cp, extras
}

// pickNew places a newcomer on n GPUs, avoiding last round's elastic extras
// while it fits elsewhere; when it does not, extras are given up from the
// end of the list (the latest workers) until it fits.
func (e *Engine) pickNew(cl *cluster, t string, n int) []string {
	soft := e.elSoft[t]
	if len(soft) == 0 {
		return cl.pick(n)
	}
	var held []string
	for _, id := range soft {
		if i, ok := cl.index[id]; ok && cl.free[i] {
			held = append(held, id)
		}
	}
	cl.take(held)
	for {
		if ids := cl.pick(n); ids != nil {
			cl.release(held)
			return ids
		}
		if len(held) == 0 {
			return nil
		}
		last := held[len(held)-1]
		held = held[:len(held)-1]
		cl.release([]string{last})
	}
}

func (c *cluster) release(ids []string) {
	for _, id := range ids {
		if i, ok := c.index[id]; ok && !c.free[i] {
			c.free[i] = true
			c.nfree[c.srvOf[i]]++
		}
	}
}

// elasticGrow resizes the elastic jobs among the assignments in place (see
// the comment at the top of this file).
func (e *Engine) elasticGrow(s *Snapshot, order []string, assigns []Assignment, extras map[string][]string) {
	if !e.elAny {
		return // no elastic job in the snapshot (elasticPrepare)
	}
	el := map[string]*Elastic{}
	sfs := map[string]int{}
	for _, j := range s.Jobs {
		if j.Elastic != nil && !j.Elastic.TwoRole() && j.Elastic.StepGPUs > 0 && j.Elastic.MaxGPUs > max(j.ScaleFactor, 1) {
			el[j.ID] = j.Elastic
			sfs[j.ID] = max(j.ScaleFactor, 1)
		}
	}
	if len(el) == 0 {
		return
	}
	for _, t := range order {
		var idx []int
		for i, a := range assigns {
			if a.Type == t && len(a.Jobs) == 1 && el[a.Jobs[0]] != nil {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		cl := e.clusterFor(s.GPUs, t)
		for _, a := range assigns {
			if a.Type == t {
				cl.take(a.GPUs)
			}
		}
		if e.pr != nil && e.pr.resv != nil && e.pr.resv.Type == t {
			cl.take(e.pr.blocked) // reserved for a gang: no extras there
		}
		slices.SortStableFunc(idx, func(x, y int) int {
			switch {
			case assigns[x].Priority > assigns[y].Priority:
				return -1
			case assigns[x].Priority < assigns[y].Priority:
				return 1
			}
			return 0
		})
		// 1. Keep previous extra workers, a prefix of them.
		for _, i := range idx {
			a := &assigns[i]
			id := a.Jobs[0]
			if a.Action != Keep || len(a.GPUs) != sfs[id] {
				continue
			}
			x, step := extras[id], el[id].StepGPUs
			for k := 0; k+step <= len(x) && len(a.GPUs)+step <= el[id].MaxGPUs; k += step {
				chunk := x[k : k+step]
				if !cl.allFree(chunk) {
					break
				}
				cl.take(chunk)
				a.GPUs = append(a.GPUs, chunk...)
			}
		}
		// 2. Grow, highest priority first, consolidated.
		for _, i := range idx {
			a := &assigns[i]
			id := a.Jobs[0]
			step := el[id].StepGPUs
			for len(a.GPUs)+step <= el[id].MaxGPUs {
				chunk := cl.pickWorker(step, a.GPUs)
				if chunk == nil {
					break
				}
				a.GPUs = append(a.GPUs, chunk...)
			}
		}
		for _, i := range idx {
			a := &assigns[i]
			a.Servers = a.Servers[:0:0]
			for _, g := range a.GPUs {
				srv := cl.servers[cl.srvOf[cl.index[g]]]
				if !slices.Contains(a.Servers, srv) {
					a.Servers = append(a.Servers, srv)
				}
			}
		}
	}
}

// pickWorker takes n free GPUs on one server: a server that holds one of
// the job's GPUs first (the one with most free GPUs among them), else the
// server with most free GPUs. nil when no server has n free.
func (c *cluster) pickWorker(n int, have []string) []string {
	used := map[int]bool{}
	for _, g := range have {
		if i, ok := c.index[g]; ok {
			used[c.srvOf[i]] = true
		}
	}
	best := -1
	better := func(s int) bool {
		if best < 0 {
			return true
		}
		if used[s] != used[best] {
			return used[s]
		}
		return c.nfree[s] > c.nfree[best]
	}
	for s := range c.servers {
		if c.nfree[s] >= n && better(s) {
			best = s
		}
	}
	if best < 0 {
		return nil
	}
	ids := c.freeOn(best)[:n]
	c.take(ids)
	return ids
}

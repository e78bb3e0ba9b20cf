package placement

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// firstFit re-places every job of the plan as Synergy's reference
// simulator does (--synergy-compat, Options.FirstFit; one mode, jobs alone
// on their GPUs): from an empty cluster, jobs in queue order, each GPU
// taken by first fit in GPU order where its server still holds the job's
// per-GPU demand. proportional asks for the share; greedy for the best
// case, skipping a job that does not fit; tune for the best case, else the
// share (when the best case exceeds it), else it shrinks the jobs placed on
// one server (the one with the fewest free GPUs) back to the share, most
// cores per GPU first, and tries again. Jobs keep no GPUs: the plan's
// assignments get the GPUs chosen here and intents are re-derived.
//
// order, when set, is the reference's queue and it, not the plan, decides
// which unshared jobs run, as the reference's policies are sort keys over
// an empty cluster: with walk (its FIFO, SRTF, FTF) each job in turn runs
// if enough GPUs are free and it fits, else is skipped and the walk goes
// on; without (its LAS) the jobs whose GPU counts fit the free count are
// listed first, then placed (TUNE: most GPUs first), and one that does not
// fit leaves its GPUs idle. Without order the plan's jobs are placed in
// the plan's order. Plan jobs that do not run are returned as skipped.
func firstFit(mode Mode, s *engine.Snapshot, p *engine.Plan, servers []Server, prof func(*engine.Job, int) *synergy.Profile, order []string, walk bool) (map[string]Grant, map[string]bool) {
	type ffJob struct {
		id     string
		typ    string
		n      int
		a      int // index of its plan assignment, -1: none
		gpus   []string
		c, m   float64 // per GPU
		shareC float64
		shareM float64
	}
	type ffSrv struct {
		Server
		freeC, freeM float64
		freeGPUs     int
		jobs         []*ffJob
	}
	srv := map[string]*ffSrv{}
	srvList := make([]*ffSrv, 0, len(servers))
	for _, sv := range servers {
		srv[sv.ID] = &ffSrv{Server: sv, freeC: sv.Cores, freeM: sv.MemGB}
		srvList = append(srvList, srv[sv.ID])
	}
	sort.Slice(srvList, func(a, b int) bool { return srvList[a].ID < srvList[b].ID })
	byType := map[string][]engine.GPU{}
	gpuSrv := map[string]*ffSrv{}
	for _, g := range s.GPUs {
		if !g.Failed && srv[g.Server] != nil {
			byType[g.Type] = append(byType[g.Type], g)
			srv[g.Server].freeGPUs++
			gpuSrv[g.ID] = srv[g.Server]
		}
	}
	used := map[string]bool{}
	shared := map[string]bool{}
	for _, a := range p.Assignments {
		if len(a.Jobs) != 1 {
			for _, g := range a.GPUs {
				used[g] = true
			}
			for _, id := range a.Jobs {
				shared[id] = true
			}
		}
	}
	freeOf := map[string]int{}
	for t, gs := range byType {
		for _, g := range gs {
			if !used[g.ID] {
				freeOf[t]++
			}
		}
	}
	jobs := map[string]*engine.Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}

	// The candidates, in queue order.
	var queue []*ffJob
	planned := map[string]int{}
	for ai, a := range p.Assignments {
		if len(a.Jobs) == 1 && len(a.GPUs) > 0 && gpuSrv[a.GPUs[0]] != nil {
			planned[a.Jobs[0]] = ai
		}
	}
	types := sortedTypes(byType) // once, not per job
	add := func(id string) {
		if ai, ok := planned[id]; ok {
			a := p.Assignments[ai]
			queue = append(queue, &ffJob{id: id, typ: a.Type, n: len(a.GPUs), a: ai})
			return
		}
		ej := jobs[id]
		if ej == nil || shared[id] {
			return
		}
		for _, t := range types {
			if ej.Throughput[t] > 0 {
				queue = append(queue, &ffJob{id: id, typ: t, n: max(ej.ScaleFactor, 1), a: -1})
				return
			}
		}
	}
	if order == nil {
		for ai, a := range p.Assignments {
			if len(a.Jobs) == 1 && planned[a.Jobs[0]] == ai {
				add(a.Jobs[0])
			}
		}
	} else {
		for _, id := range order {
			add(id)
		}
		if !walk {
			// The reference's LAS lists the jobs whose GPU counts fit
			// the free count, then places only those.
			listed := queue[:0]
			free := maps.Clone(freeOf)
			for _, j := range queue {
				if j.n <= free[j.typ] {
					free[j.typ] -= j.n
					listed = append(listed, j)
				}
			}
			queue = listed
			if mode == Tune {
				sort.SliceStable(queue, func(a, b int) bool { return queue[a].n > queue[b].n })
			}
		}
	}

	// try takes n GPUs of typ by first fit at (c, m) per GPU.
	try := func(typ string, n int, c, m float64) []string {
		var got []string
		took := map[*ffSrv]int{}
		for _, g := range byType[typ] {
			if used[g.ID] {
				continue
			}
			sv := gpuSrv[g.ID]
			k := float64(took[sv] + 1)
			if sv.freeC+1e-9 < k*c || sv.freeM+1e-9 < k*m {
				continue
			}
			got = append(got, g.ID)
			took[sv]++
			if len(got) == n {
				return got
			}
		}
		return nil
	}
	take := func(j *ffJob, gpus []string) {
		j.gpus = gpus
		for _, g := range gpus {
			used[g] = true
			sv := gpuSrv[g]
			sv.freeC -= j.c
			sv.freeM -= j.m
			sv.freeGPUs--
			if len(sv.jobs) == 0 || sv.jobs[len(sv.jobs)-1] != j {
				sv.jobs = append(sv.jobs, j)
			}
		}
		freeOf[j.typ] -= len(gpus)
	}
	// shrink frees cores and memory for n GPUs at (c, m) on the server
	// with the fewest free GPUs that has enough of them, taking the jobs
	// placed there back to their share, most cores per GPU first.
	shrink := func(n int, c, m float64) {
		var best *ffSrv
		for _, sv := range srvList {
			if sv.freeGPUs >= n && (best == nil || sv.freeGPUs < best.freeGPUs) {
				best = sv
			}
		}
		if best == nil {
			return
		}
		peers := append([]*ffJob(nil), best.jobs...)
		sort.SliceStable(peers, func(x, y int) bool {
			if peers[x].c != peers[y].c {
				return peers[x].c > peers[y].c
			}
			return peers[x].m > peers[y].m
		})
		for _, o := range peers {
			if best.freeC+1e-9 >= float64(n)*c && best.freeM+1e-9 >= float64(n)*m {
				return
			}
			nc, nm := math.Min(o.c, o.shareC), math.Min(o.m, o.shareM)
			for _, g := range o.gpus {
				gpuSrv[g].freeC += o.c - nc
				gpuSrv[g].freeM += o.m - nm
			}
			o.c, o.m = nc, nm
		}
	}

	grants := map[string]Grant{}
	skipped := map[string]bool{}
	var placed []*ffJob
	for _, j := range queue {
		if freeOf[j.typ] < j.n || len(byType[j.typ]) == 0 {
			if j.a >= 0 {
				skipped[j.id] = true
			}
			continue
		}
		first := gpuSrv[byType[j.typ][0].ID]
		if j.a >= 0 {
			first = gpuSrv[p.Assignments[j.a].GPUs[0]]
		}
		j.shareC, j.shareM = first.Cores/float64(first.GPUs), first.MemGB/float64(first.GPUs)
		j.c, j.m = j.shareC, j.shareM
		if mode != Proportional {
			j.c, j.m = synergy.Flat().CoresPerGPUBest, synergy.Flat().MemGBPerGPUBest
			if pr := prof(jobs[j.id], j.n); pr != nil {
				j.c, j.m = pr.CoresPerGPUBest, pr.MemGBPerGPUBest
			}
		}
		gpus := try(j.typ, j.n, j.c, j.m)
		if gpus == nil && mode == Tune {
			if j.c > j.shareC+1e-9 || j.m > j.shareM+1e-9 {
				j.c, j.m = j.shareC, j.shareM
			}
			if gpus = try(j.typ, j.n, j.c, j.m); gpus == nil {
				shrink(j.n, j.c, j.m)
				gpus = try(j.typ, j.n, j.c, j.m)
			}
		}
		if gpus == nil {
			// GREEDY's skip (the others always fit: the shares add up
			// to a server).
			if j.a >= 0 {
				skipped[j.id] = true
			}
			continue
		}
		take(j, gpus)
		placed = append(placed, j)
		a := engine.Assignment{Jobs: []string{j.id}, Type: j.typ}
		if j.a >= 0 {
			a = p.Assignments[j.a]
		}
		a.GPUs = gpus
		a.Servers = nil
		for _, g := range gpus {
			if id := gpuSrv[g].ID; len(a.Servers) == 0 || a.Servers[len(a.Servers)-1] != id {
				a.Servers = append(a.Servers, id)
			}
		}
		a.Action = engine.Start
		if j.a >= 0 {
			p.Assignments[j.a] = a
		} else {
			p.Assignments = append(p.Assignments, a)
			p.Suspend = slices.DeleteFunc(p.Suspend, func(x string) bool { return x == j.id })
		}
	}
	// Plan jobs the queue never reached (LAS's list, or after the cluster
	// filled) do not run either.
	reached := make(map[string]bool, len(queue))
	for _, j := range queue {
		reached[j.id] = true
	}
	for id := range planned {
		if !reached[id] {
			skipped[id] = true
		}
	}
	if order != nil {
		// Assignments in placement order, as the reference's.
		rank := make(map[string]int, len(placed))
		for i, j := range placed {
			rank[j.id] = i
		}
		sort.SliceStable(p.Assignments, func(a, b int) bool {
			ra, oka := rank[p.Assignments[a].Jobs[0]]
			rb, okb := rank[p.Assignments[b].Jobs[0]]
			return oka && (!okb || ra < rb)
		})
	}
	for _, j := range placed {
		n := float64(len(j.gpus))
		grants[j.id] = Grant{Cores: j.c * n, MemGB: j.m * n}
	}
	return grants, skipped
}

func sortedTypes(m map[string][]engine.GPU) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

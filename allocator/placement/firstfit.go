package placement

import (
	"math"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// firstFit re-places every job of the plan as Synergy's reference
// simulator does (--synergy-compat, Options.FirstFit; one mode, jobs alone
// on their GPUs): from an empty cluster, jobs in the plan's (policy) order,
// each GPU taken by first fit in GPU order where its server still holds the
// job's per-GPU demand. proportional asks for the share; greedy for the
// best case, skipping a job that does not fit; tune for the best case, else
// the share (when the best case exceeds it), else it shrinks the jobs
// placed on one server (the one with the fewest free GPUs) back to the
// share, most cores per GPU first, and tries again. Jobs keep no GPUs: the
// plan's assignments get the GPUs chosen here and intents are re-derived.
//
// order, when set, is the reference's queue: the plan's jobs are placed in
// that order, and with backfill under GREEDY, as the reference walks its
// whole queue, a job after those the plan holds runs where its best case
// fits on GPUs left free.
func firstFit(mode Mode, s *engine.Snapshot, p *engine.Plan, servers []Server, prof func(*engine.Job, int) *synergy.Profile, order []string, backfill bool) (map[string]Grant, map[string]bool) {
	if order != nil {
		rank := make(map[string]int, len(order))
		for i, id := range order {
			rank[id] = i
		}
		sort.SliceStable(p.Assignments, func(a, b int) bool {
			ra, oka := rank[p.Assignments[a].Jobs[0]]
			rb, okb := rank[p.Assignments[b].Jobs[0]]
			return oka && (!okb || ra < rb)
		})
	}
	type ffJob struct {
		id     string
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
	for _, sv := range servers {
		srv[sv.ID] = &ffSrv{Server: sv, freeC: sv.Cores, freeM: sv.MemGB}
	}
	byType := map[string][]engine.GPU{}
	for _, g := range s.GPUs {
		if !g.Failed && srv[g.Server] != nil {
			byType[g.Type] = append(byType[g.Type], g)
			srv[g.Server].freeGPUs++
		}
	}
	used := map[string]bool{}
	for _, a := range p.Assignments {
		if len(a.Jobs) != 1 {
			for _, g := range a.GPUs {
				used[g] = true
			}
		}
	}
	jobs := map[string]*engine.Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	grants := map[string]Grant{}
	skipped := map[string]bool{}
	gpuSrv := map[string]*ffSrv{}
	for _, gs := range byType {
		for _, g := range gs {
			gpuSrv[g.ID] = srv[g.Server]
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
	}
	var placed []*ffJob
	for ai := range p.Assignments {
		a := &p.Assignments[ai]
		if len(a.Jobs) != 1 {
			continue // shared units keep their GPUs (no sharing in compat runs)
		}
		n := len(a.GPUs)
		first := srv[gpuServerOf(s, a.GPUs[0])]
		if first == nil {
			continue
		}
		shareC, shareM := first.Cores/float64(first.GPUs), first.MemGB/float64(first.GPUs)
		j := &ffJob{id: a.Jobs[0], c: shareC, m: shareM, shareC: shareC, shareM: shareM}
		if mode != Proportional {
			if pr := prof(jobs[j.id], n); pr != nil {
				j.c, j.m = pr.CoresPerGPUBest, pr.MemGBPerGPUBest
			} else {
				j.c, j.m = synergy.Flat().CoresPerGPUBest, synergy.Flat().MemGBPerGPUBest
			}
		}
		gpus := try(a.Type, n, j.c, j.m)
		if gpus == nil && mode == Greedy {
			skipped[j.id] = true
			continue
		}
		if gpus == nil && mode == Tune {
			if j.c > shareC+1e-9 || j.m > shareM+1e-9 {
				j.c, j.m = shareC, shareM
			}
			if gpus = try(a.Type, n, j.c, j.m); gpus == nil {
				// Shrink on the server with the fewest free GPUs that has
				// enough of them, most cores per GPU first.
				var best *ffSrv
				for _, sv := range sortedFF(srv, func(x *ffSrv) string { return x.ID }) {
					if sv.freeGPUs >= n && (best == nil || sv.freeGPUs < best.freeGPUs) {
						best = sv
					}
				}
				if best != nil {
					peers := append([]*ffJob(nil), best.jobs...)
					sort.SliceStable(peers, func(x, y int) bool {
						if peers[x].c != peers[y].c {
							return peers[x].c > peers[y].c
						}
						return peers[x].m > peers[y].m
					})
					for _, o := range peers {
						if best.freeC+1e-9 >= float64(n)*j.c && best.freeM+1e-9 >= float64(n)*j.m {
							break
						}
						nc, nm := math.Min(o.c, o.shareC), math.Min(o.m, o.shareM)
						for _, g := range o.gpus {
							gpuSrv[g].freeC += o.c - nc
							gpuSrv[g].freeM += o.m - nm
						}
						o.c, o.m = nc, nm
					}
				}
				gpus = try(a.Type, n, j.c, j.m)
			}
		}
		if gpus == nil {
			continue // cannot happen for proportional; keeps the engine's GPUs
		}
		take(j, gpus)
		placed = append(placed, j)
		a.GPUs = gpus
		a.Servers = a.Servers[:0]
		for _, g := range gpus {
			id := gpuSrv[g].ID
			if len(a.Servers) == 0 || a.Servers[len(a.Servers)-1] != id {
				a.Servers = append(a.Servers, id)
			}
		}
		a.Action = engine.Start
	}
	if mode == Greedy && backfill {
		inPlan := map[string]bool{}
		for _, a := range p.Assignments {
			for _, id := range a.Jobs {
				inPlan[id] = true
			}
		}
		for _, id := range order {
			ej := jobs[id]
			if ej == nil || inPlan[id] {
				continue
			}
			typ := ""
			for _, t := range sortedTypes(byType) {
				if ej.Throughput[t] > 0 {
					typ = t
					break
				}
			}
			if typ == "" {
				continue
			}
			n := max(ej.ScaleFactor, 1)
			c, m := synergy.Flat().CoresPerGPUBest, synergy.Flat().MemGBPerGPUBest
			if pr := prof(ej, n); pr != nil {
				c, m = pr.CoresPerGPUBest, pr.MemGBPerGPUBest
			}
			gpus := try(typ, n, c, m)
			if gpus == nil {
				continue
			}
			j := &ffJob{id: id, c: c, m: m}
			take(j, gpus)
			placed = append(placed, j)
			a := engine.Assignment{Jobs: []string{id}, Type: typ, GPUs: gpus, Action: engine.Start}
			for _, g := range gpus {
				if sid := gpuSrv[g].ID; len(a.Servers) == 0 || a.Servers[len(a.Servers)-1] != sid {
					a.Servers = append(a.Servers, sid)
				}
			}
			p.Assignments = append(p.Assignments, a)
			p.Suspend = slices.DeleteFunc(p.Suspend, func(x string) bool { return x == id })
		}
	}
	for _, j := range placed {
		n := float64(len(j.gpus))
		grants[j.id] = Grant{Cores: j.c * n, MemGB: j.m * n}
	}
	return grants, skipped
}

func gpuServerOf(s *engine.Snapshot, gpu string) string {
	for _, g := range s.GPUs {
		if g.ID == gpu {
			return g.Server
		}
	}
	return ""
}

func sortedFF[T any](m map[string]T, key func(T) string) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(a, b int) bool { return key(out[a]) < key(out[b]) })
	return out
}

func sortedTypes(m map[string][]engine.GPU) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

package agent

import (
	"maps"
	"slices"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/telemetry"
)

// The data behind `rondo vc status` and `rondo node status` (#19): each
// round, record hands the snapshot and the plan to recordViews, which
// fills the VCs' quota, use, borrowing, lending and GPU time and the
// nodes' GPUs with the jobs on them.

// vcAccount is one VC's GPU time since the agent started: what the
// policies' allocations entitled its jobs to and what the plans gave them
// (GPU-seconds).
type vcAccount struct {
	entitled, received float64
}

// vcQuota is a VC's quota in GPUs per type as the config gives it: a
// quota-only VC's share (GPUs), a cell VC's cells in GPUs (Quota, filled
// by the command from the config's cell types), or, for the one VC of a
// config without shares or cells, the whole cluster's healthy GPUs. nil
// when unknown (cells derived at run time).
func vcQuota(v VC, only bool, healthy map[string]int) map[string]int {
	switch {
	case len(v.Quota) > 0:
		return maps.Clone(v.Quota)
	case v.GPUs != nil:
		return maps.Clone(v.GPUs)
	case only && len(v.Cells) == 0:
		return maps.Clone(healthy)
	}
	return nil
}

// vcView is one round's per-VC view: the VCs' quota, use, borrowing and
// lending per GPU type, the round's entitled and received GPU time, and
// running and pending counts. cfg are the VCs as configured (Quota set
// where the command derived it); jobs the round's job statuses (states
// decided); xs each job's X; roundS the round's length.
type vcView struct {
	quota, used, borrowed, lent []map[string]int
	entitled, received          []float64
	running, pending            []int
}

// viewVCs computes the round's vcView for cfg (in order).
func viewVCs(cfg []VC, s *engine.Snapshot, p *engine.Plan, xs map[string]map[string]float64, jobs []JobStatus, roundS float64) vcView {
	n := len(cfg)
	v := vcView{quota: make([]map[string]int, n), used: make([]map[string]int, n), borrowed: make([]map[string]int, n),
		lent: make([]map[string]int, n), entitled: make([]float64, n), received: make([]float64, n),
		running: make([]int, n), pending: make([]int, n)}
	if n == 0 {
		return v
	}
	healthy := map[string]int{}
	for _, g := range s.GPUs {
		if !g.Failed {
			healthy[g.Type]++
		}
	}
	idx := make(map[string]int, n)
	for i, c := range cfg {
		idx[c.Name] = i
	}
	// With one VC and no share or cells, one engine runs every job the
	// round sees: they are all the VC's.
	only := n == 1 && len(cfg[0].GPUs) == 0 && len(cfg[0].Cells) == 0 && len(cfg[0].Quota) == 0
	vcOf := func(vc string) (int, bool) {
		if only {
			return 0, true
		}
		i, ok := idx[vc]
		return i, ok
	}
	for i, c := range cfg {
		v.quota[i] = vcQuota(c, n == 1, healthy)
	}
	jobVC := make(map[string]string, len(s.Jobs))
	scale := make(map[string]int, len(s.Jobs))
	for _, j := range s.Jobs {
		jobVC[j.ID], scale[j.ID] = j.VC, max(j.ScaleFactor, 1)
	}
	// Used: the distinct GPUs each VC's jobs hold (a pair of one VC
	// shares its GPUs: counted once). Received: each job's GPUs, a pair's
	// split between its two jobs, for the round.
	held := make([]map[string]bool, n)
	for _, as := range p.Assignments {
		for _, j := range as.Jobs {
			i, ok := vcOf(jobVC[j])
			if !ok {
				continue
			}
			if held[i] == nil {
				held[i], v.used[i] = map[string]bool{}, map[string]int{}
			}
			for _, g := range as.GPUs {
				if !held[i][g] {
					held[i][g] = true
					v.used[i][as.Type]++
				}
			}
			v.received[i] += float64(len(as.GPUs)) / float64(len(as.Jobs)) * roundS
		}
	}
	for id, x := range xs {
		i, ok := vcOf(jobVC[id])
		if !ok {
			continue
		}
		for _, f := range x {
			v.entitled[i] += f * float64(scale[id]) * roundS
		}
	}
	for _, j := range jobs {
		i, ok := vcOf(j.VC)
		if !ok || j.State == "done" || j.State == "rejected" {
			continue // rejected: never in a round
		}
		if j.State == "running" {
			v.running[i]++
		} else {
			v.pending[i]++
		}
	}
	// Borrowed: beyond the quota (a VC whose quota is unknown borrows
	// nothing). Lent: the GPUs of its quota it leaves idle that other VCs
	// borrowed, handed out in VC order so no borrowed GPU counts as lent
	// twice.
	pool := map[string]int{}
	for i := range cfg {
		if v.quota[i] == nil {
			continue
		}
		for t, u := range v.used[i] {
			if b := u - v.quota[i][t]; b > 0 {
				if v.borrowed[i] == nil {
					v.borrowed[i] = map[string]int{}
				}
				v.borrowed[i][t] = b
				pool[t] += b
			}
		}
	}
	for i := range cfg {
		for _, t := range slices.Sorted(maps.Keys(v.quota[i])) {
			idle := v.quota[i][t] - v.used[i][t]
			if l := min(idle, pool[t]); l > 0 {
				if v.lent[i] == nil {
					v.lent[i] = map[string]int{}
				}
				v.lent[i][t] = l
				pool[t] -= l
			}
		}
	}
	return v
}

// recordViews puts the round's VC view on the status VCs (accumulating
// their GPU time) and lays out the nodes. Under a.mu.
func (a *Agent) recordViews(s *engine.Snapshot, p *engine.Plan, xs map[string]map[string]float64, jobs []JobStatus) {
	v := viewVCs(a.cfg.VCs, s, p, xs, jobs, a.cfg.Round.Seconds())
	if a.accounts == nil {
		a.accounts = map[string]*vcAccount{}
	}
	for i := range a.status.VCs {
		sv := &a.status.VCs[i]
		if i >= len(a.cfg.VCs) || a.cfg.VCs[i].Name != sv.Name {
			continue
		}
		acc := a.accounts[sv.Name]
		if acc == nil {
			acc = &vcAccount{}
			a.accounts[sv.Name] = acc
		}
		acc.entitled += v.entitled[i]
		acc.received += v.received[i]
		sv.Quota, sv.Used, sv.Borrowed, sv.Lent = v.quota[i], v.used[i], v.borrowed[i], v.lent[i]
		sv.EntitledGPUS, sv.ReceivedGPUS = acc.entitled, acc.received
		sv.Running, sv.Pending = v.running[i], v.pending[i]
	}
	a.status.Nodes = viewNodes(s, p)
	if tel := a.cfg.Telemetry; tel != nil {
		us := make([]telemetry.VCUsage, 0, len(a.status.VCs))
		for _, sv := range a.status.VCs {
			us = append(us, telemetry.VCUsage{Name: sv.Name, Quota: sv.Quota, Used: sv.Used, Borrowed: sv.Borrowed})
		}
		tel.SetVCUsage(us) // the metrics show what `rondo vc status` shows
	}
}

// viewNodes lays out the snapshot's nodes with their GPUs (in the order
// the backend lists them) and the plan's jobs on each GPU. GPUs whose
// server is no known node (the simulator's servers) get a node of that
// name. Nodes are sorted by name.
func viewNodes(s *engine.Snapshot, p *engine.Plan) []NodeStatus {
	on := map[string][]string{}
	for _, as := range p.Assignments {
		for _, g := range as.GPUs {
			on[g] = append(on[g], as.Jobs...)
		}
	}
	at := map[string]int{}
	var nodes []NodeStatus
	for _, n := range s.Nodes {
		if _, dup := at[n.ID]; dup {
			continue
		}
		at[n.ID] = len(nodes)
		nodes = append(nodes, NodeStatus{ID: n.ID, Name: n.Name, Pool: n.Pool, Class: n.Class, Ready: n.Ready, GPUs: []GPUStatus{}})
	}
	for _, g := range s.GPUs {
		i, ok := at[g.Server]
		if !ok {
			i = len(nodes)
			at[g.Server] = i
			nodes = append(nodes, NodeStatus{ID: g.Server, Name: g.Server, Ready: true, GPUs: []GPUStatus{}})
		}
		gs := GPUStatus{ID: g.ID, Type: g.Type, Healthy: !g.Failed, Cell: g.Cell}
		if js := on[g.ID]; len(js) > 0 {
			gs.Jobs = slices.Clone(js)
			gs.Share = 1 / float64(len(js))
		}
		nodes[i].GPUs = append(nodes[i].GPUs, gs)
	}
	sort.SliceStable(nodes, func(i, k int) bool { return nodes[i].Name < nodes[k].Name })
	return nodes
}

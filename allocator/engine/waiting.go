package engine

import (
	"cmp"
	"slices"
	"strings"
)

// Quotas are the VCs' guaranteed GPUs per type, VC → GPU type → GPUs: a
// quota-only VC's share (round.Quota), a cells VC's cells' GPUs
// (round.Cells). Only the deciders with VCs know them; ExplainQuotas reads
// them to tell OverQuota and the largest gang a VC can ever hold.
type Quotas map[string]map[string]int

// RejectedKey is the key of a job the backend rejected (Snapshot.Rejected),
// beside the waiting reasons' WaitKeys.
const RejectedKey = "rejected"

// WaitKeys are every key a job that does not run is counted under: the
// waiting reasons' (WaitKey) and RejectedKey. The agent's pending_kind and
// the metric rondo_jobs_pending's reason label take these values.
var WaitKeys = []string{"over_quota", "gang", "priority", "unschedulable", "reserved", RejectedKey}

// WaitKey is a waiting reason's stable key (the agent's pending_kind, the
// simulator's waiting_reasons, the metrics' reason label): "reserved",
// "unschedulable", "over_quota", "gang" or "priority"; "" for a reason
// that is not a waiting one.
func (r Reason) WaitKey() string {
	switch r.Kind {
	case Reserved:
		return "reserved"
	case Unschedulable:
		return "unschedulable"
	case OverQuota:
		return "over_quota"
	case WaitsForGang:
		return "gang"
	case LowerPriority:
		return "priority"
	}
	return ""
}

// Explain fills p.Waiting, without quotas: ExplainQuotas(s, p, nil).
func Explain(s *Snapshot, p *Plan) { ExplainQuotas(s, p, nil) }

// ExplainQuotas fills p.Waiting: for every active job of s that p neither
// runs (an assignment) nor stops (p.Suspend), why it waits, the first of
//
//   - Reserved: a gang waiting on its reservation (p.Reservations) keeps
//     the reservation's reason;
//   - Unschedulable: its gang (ScaleFactor GPUs) is larger than it could
//     ever hold: the most healthy GPUs of one type it can run on
//     (Throughput > 0) in the snapshot, for a guaranteed job of a VC that
//     q names at most that VC's quota of the type (Free: that most, To:
//     its type);
//   - OverQuota (only with q, a guaranteed job of a VC q names): on every
//     type it can run on, its VC's guaranteed jobs in p hold so much of
//     the quota that its gang no longer fits (To: those types);
//   - WaitsForGang (ScaleFactor > 1): some type it can run on has at
//     least Need GPUs free after p but no server with Need free, or its
//     round priority on a type it can use outranks the lowest-priority
//     job running there (its turn came when fewer than Need GPUs were
//     left); Free is the largest free set on one server of such a type
//     (To);
//   - LowerPriority (the default): Than is the job with the lowest round
//     priority running on a type it can use (its VC's and class's jobs
//     first, else any), ThanPriority its Assignment.Priority.
//
// The job's own priority (Waiting.Priority, Reason.Priority) is the
// engine's, approximated from p.Allocation and the snapshot's cumulative
// received time: X[job][type] / (its ReceivedS[type] / all active jobs'
// ReceivedS[type]), X × 1e9 where it never ran (round.go's "first"); the
// best over the types it can use (0 without an allocation row). The engine
// counts received time since its last recompute, so this is the ranking's
// shape, not its exact values.
//
// Position ranks the waiting jobs of one VC and class (opportunistic jobs
// queue apart from their VC's guaranteed ones): a reserved gang first,
// then by Priority descending, then in arrival (snapshot) order; 1 is the
// next to run. Unschedulable jobs get no position (0).
//
// Free GPUs are the healthy GPUs no assignment and no reservation holds,
// counted over the whole snapshot (not per VC partition or cell). Pure
// and deterministic; O(jobs × types + GPUs).
func ExplainQuotas(s *Snapshot, p *Plan, q Quotas) {
	p.Waiting = nil
	if s == nil || len(s.Jobs) == 0 {
		return
	}
	inPlan := make(map[string]bool, len(s.Jobs))
	for _, id := range p.Suspend {
		inPlan[id] = true
	}
	// What runs: the held GPUs, and per job its unit's priority.
	held := make(map[string]bool, len(s.GPUs))
	runPrio := make(map[string]float64, len(p.Assignments))
	runType := make(map[string]string, len(p.Assignments))
	for _, a := range p.Assignments {
		for _, g := range a.GPUs {
			held[g] = true
		}
		for _, j := range a.Jobs {
			inPlan[j] = true
			runPrio[j], runType[j] = a.Priority, a.Type
		}
	}
	reserved := make(map[string]Reservation, len(p.Reservations))
	for _, r := range p.Reservations {
		reserved[r.Job] = r
		for _, g := range r.GPUs {
			held[g] = true
		}
	}
	nWait := 0
	for i := range s.Jobs {
		if !inPlan[s.Jobs[i].ID] {
			nWait++
		}
	}
	if nWait == 0 {
		return
	}
	p.Waiting = make([]Waiting, 0, nWait)

	// Healthy and free GPUs per type; free per server of each type.
	healthy := map[string]int{}
	free := map[string]int{}
	freeOn := map[[2]string]int{}
	for _, g := range s.GPUs {
		if g.Failed {
			continue
		}
		healthy[g.Type]++
		if !held[g.ID] {
			free[g.Type]++
			freeOn[[2]string{g.Type, g.Server}]++
		}
	}
	maxFreeOn := map[string]int{}
	for k, n := range freeOn {
		maxFreeOn[k[0]] = max(maxFreeOn[k[0]], n)
	}

	byID := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		byID[s.Jobs[i].ID] = &s.Jobs[i]
	}
	// The lowest-priority running job per type, per VC and class and over
	// all; and the GPUs each VC's guaranteed jobs hold per type.
	lowest := map[string]low{}          // type
	lowestVC := map[[2]string]low{}     // queue key, type
	used := map[string]map[string]int{} // VC → type → GPUs (guaranteed jobs)
	for _, a := range p.Assignments {
		for _, id := range a.Jobs {
			if m, ok := lowest[a.Type]; lower(m, ok, id, a.Priority) {
				lowest[a.Type] = low{id, a.Priority}
			}
			j := byID[id]
			if j == nil {
				continue
			}
			k := [2]string{queueKey(j), a.Type}
			if m, ok := lowestVC[k]; lower(m, ok, id, a.Priority) {
				lowestVC[k] = low{id, a.Priority}
			}
			if j.Class != Opportunistic && q != nil {
				if used[j.VC] == nil {
					used[j.VC] = map[string]int{}
				}
				// A pair's GPUs count once, for its first job.
				if id == a.Jobs[0] {
					used[j.VC][a.Type] += len(a.GPUs)
				}
			}
		}
	}

	// The engine's priority, approximated: X / received share.
	var xrow map[string]int
	col := map[string]int{}
	al := p.Allocation
	if al != nil {
		xrow = make(map[string]int, len(al.JobIDs))
		for m, id := range al.JobIDs {
			if m < len(al.X) {
				xrow[id] = m
			}
		}
		for k, t := range al.Types {
			col[t] = k
		}
	}
	total := map[string]float64{}
	for i := range s.Jobs {
		for t, v := range s.Jobs[i].ReceivedS {
			if v > 0 {
				total[t] += v
			}
		}
	}
	priority := func(j *Job, t string) float64 {
		m, ok := xrow[j.ID]
		k, okT := col[t]
		if !ok || !okT || k >= len(al.X[m]) {
			return 0
		}
		x := al.X[m][k]
		if r := j.ReceivedS[t]; r > 0 && total[t] > 0 {
			return x / (r / total[t])
		}
		return x * 1e9
	}

	types := slices.Sorted(func(yield func(string) bool) {
		for t := range healthy {
			if !yield(t) {
				return
			}
		}
	})
	usable := make([]string, 0, len(types))
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if inPlan[j.ID] {
			continue
		}
		w := Waiting{Job: j.ID, VC: j.VC}
		need := max(j.ScaleFactor, 1)
		vq, quota := q[j.VC]
		quota = quota && j.Class != Opportunistic
		// The types it can use, its best priority and the most it can hold.
		hold, holdType := 0, ""
		usable = usable[:0]
		for _, t := range types {
			if j.Throughput[t] <= 0 {
				continue
			}
			usable = append(usable, t)
			if pr := priority(j, t); pr > w.Priority {
				w.Priority = pr
			}
			n := healthy[t]
			if quota {
				n = min(n, vq[t])
			}
			if n > hold {
				hold, holdType = n, t
			}
		}
		if r, ok := reserved[j.ID]; ok {
			w.Reason = r.Reason()
			w.Reason.Priority = w.Priority
		} else if need > hold {
			w.Reason = Reason{Kind: Unschedulable, Need: need, Free: hold, To: holdType}
			if quota {
				w.Reason.VC = j.VC
			}
		} else if full := overQuota(usable, vq, used[j.VC], need); quota && full != nil {
			w.Reason = Reason{Kind: OverQuota, Need: need, VC: j.VC, To: strings.Join(full, ", "), Priority: w.Priority}
		} else if g, ok := gangWaits(j, usable, need, free, maxFreeOn, lowestVC, lowest, priority); ok {
			w.Reason = g
			w.Reason.Priority = w.Priority
		} else {
			w.Reason = Reason{Kind: LowerPriority, Priority: w.Priority}
			// Its own queue's jobs ahead first, else any job ahead.
			var best low
			found := false
			qk := queueKey(j)
			for _, t := range usable {
				if l, ok := lowestVC[[2]string{qk, t}]; ok && lower(best, found, l.job, l.prio) {
					best, found = l, true
				}
			}
			if !found {
				for _, t := range usable {
					if l, ok := lowest[t]; ok && lower(best, found, l.job, l.prio) {
						best, found = l, true
					}
				}
			}
			if found {
				w.Reason.Than, w.Reason.ThanPriority, w.Reason.To = best.job, best.prio, runType[best.job]
			}
		}
		p.Waiting = append(p.Waiting, w)
	}
	rankWaiting(p.Waiting, byID)
}

// low is a running job and its unit's round priority.
type low struct {
	job  string
	prio float64
}

// lower reports whether job at prio is below m (ok: m is set), ties by id.
func lower(m low, ok bool, job string, prio float64) bool {
	return !ok || prio < m.prio || (prio == m.prio && job < m.job)
}

// queueKey is the queue a job waits in: its VC, opportunistic jobs apart.
func queueKey(j *Job) string {
	if j.Class == Opportunistic {
		return j.VC + "\x00opportunistic"
	}
	return j.VC
}

// overQuota returns the types (of usable) on which the VC's quota has
// room, were its jobs' GPUs free, for a gang of need, when none of them
// has that room left now; nil when one has (or none ever could).
func overQuota(usable []string, quota, used map[string]int, need int) []string {
	var full []string
	for _, t := range usable {
		if quota[t] < need {
			continue // could never hold it there
		}
		if quota[t]-used[t] >= need {
			return nil
		}
		full = append(full, t)
	}
	return full
}

// gangWaits tells a gang's wait (WaitsForGang), if that is its reason: a
// type it can use has need GPUs free but not on one server, or its
// priority there outranks the lowest job running there (its turn came
// when fewer than need were left).
func gangWaits(j *Job, usable []string, need int, free, maxFreeOn map[string]int,
	lowestVC map[[2]string]low, lowest map[string]low, priority func(*Job, string) float64) (Reason, bool) {
	if need <= 1 {
		return Reason{}, false
	}
	r, ok := Reason{Kind: WaitsForGang, Need: need, Free: -1}, false
	better := func(t string) {
		if f := maxFreeOn[t]; f > r.Free {
			r.Free, r.To = f, t
		}
		ok = true
	}
	for _, t := range usable {
		if free[t] >= need && maxFreeOn[t] < need {
			better(t)
		}
	}
	if !ok {
		for _, t := range usable {
			l, has := lowestVC[[2]string{queueKey(j), t}]
			if !has {
				l, has = lowest[t]
			}
			if has && priority(j, t) > l.prio && free[t] < need {
				better(t)
			}
		}
	}
	r.Free = max(r.Free, 0)
	return r, ok
}

// rankWaiting sets each waiting job's Position in its queue (queueKey): a
// reserved gang first, then by priority descending, then arrival order.
// Unschedulable jobs are not ranked.
func rankWaiting(ws []Waiting, byID map[string]*Job) {
	type entry struct {
		w     *Waiting
		order int
	}
	queues := map[string][]entry{}
	var keys []string
	for i := range ws {
		w := &ws[i]
		if w.Reason.Kind == Unschedulable {
			continue
		}
		k := queueKey(byID[w.Job])
		if _, ok := queues[k]; !ok {
			keys = append(keys, k)
		}
		queues[k] = append(queues[k], entry{w, i})
	}
	for _, k := range keys {
		q := queues[k]
		slices.SortStableFunc(q, func(a, b entry) int {
			ra, rb := a.w.Reason.Kind == Reserved, b.w.Reason.Kind == Reserved
			if ra != rb {
				if ra {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(b.w.Priority, a.w.Priority); c != 0 {
				return c
			}
			return cmp.Compare(a.order, b.order)
		})
		for n, e := range q {
			e.w.Position = n + 1
		}
	}
}

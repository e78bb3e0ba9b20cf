// Package vcsim is the virtual-cluster demonstration: it replays a
// multi-tenant trace, each job one gang, on (a) a quota-only baseline (a VC
// may hold at most its quota in GPUs, counted globally; global placement on
// nodes), (b) HiveD's cell allocator (allocator/cells), and, for each VC,
// its private cluster (its quota as dedicated cells, alone, under either
// logic). It reports per-VC queuing delays, sharing anomalies (a VC waiting
// longer on the shared cluster than on its private one), utilization, the
// opportunistic share of GPU time and preemptions.
//
// Jobs run for their duration (no time sharing); inside each VC, jobs are
// served FIFO: the VC layer alone is simulated.
package vcsim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/philly"
)

// Tolerance decides when a shared delay exceeds a private one: shared >
// private × (1 + Rel) + AbsS.
type Tolerance struct {
	AbsS, Rel float64
}

// DefaultTolerance is one minute plus 1%.
var DefaultTolerance = Tolerance{AbsS: 60, Rel: 0.01}

func (t Tolerance) exceeds(shared, private float64) bool {
	return shared > private*(1+t.Rel)+t.AbsS
}

// Options configure a comparison.
type Options struct {
	Spec cells.Spec
	// NodeGPUs splits jobs into gang members (a job of more GPUs is
	// ⌈g/NodeGPUs⌉ members); default: the largest machine of the cluster.
	NodeGPUs int
	// FirstFit makes the baseline place by first fit instead of best fit.
	FirstFit  bool
	Tolerance Tolerance
	// Check verifies the cell allocator's invariants after every change
	// (slow; for tests).
	Check bool
}

// Delay summarizes guaranteed jobs' queuing delays (start − arrival), s.
type Delay struct {
	Avg float64 `json:"avg_s"`
	P95 float64 `json:"p95_s"`
	Max float64 `json:"max_s"`
}

// VCResult is one VC's outcome.
type VCResult struct {
	VC            string `json:"vc"`
	QuotaGPUs     int    `json:"quota_gpus"`
	Guaranteed    int    `json:"guaranteed_jobs"`
	Opportunistic int    `json:"opportunistic_jobs"`
	// Private delays under each logic, and shared delays.
	PrivateCells Delay `json:"private_cells"`
	PrivateQuota Delay `json:"private_quota"`
	Cells        Delay `json:"cells"`
	Quota        Delay `json:"quota"`
	// Guaranteed jobs that waited longer than on the private cluster
	// (same logic), beyond the tolerance.
	CellsAnomalyJobs int `json:"cells_anomaly_jobs"`
	QuotaAnomalyJobs int `json:"quota_anomaly_jobs"`
	// VC-level anomaly: the average delay exceeds the private one.
	CellsAnomaly bool `json:"cells_anomaly"`
	QuotaAnomaly bool `json:"quota_anomaly"`
	// Opportunistic jobs' average wait (finish − arrival − duration), s.
	CellsOppWaitS float64 `json:"cells_opp_wait_s"`
	QuotaOppWaitS float64 `json:"quota_opp_wait_s"`
}

// System is one shared run's cluster-wide outcome.
type System struct {
	// Utilization is busy GPU time over GPUs × the arrival window
	// [0, last arrival].
	Utilization float64 `json:"utilization"`
	// OppShare is the opportunistic share of all GPU time used.
	OppShare    float64 `json:"opportunistic_share"`
	Preemptions int     `json:"preemptions"`
	EndS        float64 `json:"end_s"`
}

// Result is a whole comparison.
type Result struct {
	Jobs  int        `json:"jobs"`
	GPUs  int        `json:"gpus"`
	VCs   []VCResult `json:"vcs"`
	Cells System     `json:"cells"`
	Quota System     `json:"quota"`
}

// cluster is the static view the simulations need.
type cluster struct {
	vcs      []string
	vcIdx    map[string]int
	machines []int   // shared cluster: GPUs per machine
	private  [][]int // per VC: machines of its quota
	quota    []int   // per VC: GPUs
	nodeGPUs int
}

func newCluster(spec cells.Spec, nodeGPUs int) (*cluster, error) {
	types := map[string]cells.CellType{}
	for _, t := range spec.Types {
		types[t.Name] = t
	}
	gpus := func(name string) int {
		n := 1
		for t := types[name]; t.Child != ""; t = types[t.Child] {
			n *= t.Count
		}
		return n
	}
	// machinesOf splits a cell into machines at its node level (or one
	// machine when no node level lies at or below it).
	machinesOf := func(name string) []int {
		for t := types[name]; ; t = types[t.Child] {
			if t.Node {
				return slices.Repeat([]int{gpus(t.Name)}, gpus(name)/gpus(t.Name))
			}
			if t.Child == "" {
				return []int{gpus(name)}
			}
		}
	}
	c := &cluster{vcIdx: map[string]int{}, nodeGPUs: nodeGPUs}
	for _, tc := range spec.Cells {
		if tc.Pinned != "" || len(tc.Bad) > 0 {
			return nil, fmt.Errorf("vcsim: cell %q: pinned and bad cells are not modelled by the quota baseline", tc.Name)
		}
		if _, ok := types[tc.Type]; !ok {
			return nil, fmt.Errorf("vcsim: cell %q: unknown type %q", tc.Name, tc.Type)
		}
		c.machines = append(c.machines, machinesOf(tc.Type)...)
	}
	for i, v := range spec.VCs {
		c.vcs = append(c.vcs, v.Name)
		c.vcIdx[v.Name] = i
		var ms []int
		for _, q := range v.Quota {
			if _, ok := types[q.Type]; !ok {
				return nil, fmt.Errorf("vcsim: vc %q: unknown type %q", v.Name, q.Type)
			}
			for k := 0; k < q.Count; k++ {
				ms = append(ms, machinesOf(q.Type)...)
			}
		}
		c.private = append(c.private, ms)
		c.quota = append(c.quota, sum(ms))
	}
	if c.nodeGPUs <= 0 {
		c.nodeGPUs = slices.Max(c.machines)
	}
	return c, nil
}

// privateSpec is VC v's quota as a cluster of its own: one top cell per
// quota cell, the VC alone with the whole of it as quota.
func privateSpec(spec cells.Spec, v int) cells.Spec {
	vc := spec.VCs[v]
	ps := cells.Spec{Types: spec.Types, VCs: []cells.VC{{Name: vc.Name}}}
	for _, q := range vc.Quota {
		for k := 0; k < q.Count; k++ {
			ps.Cells = append(ps.Cells, cells.TopCell{Name: fmt.Sprintf("p%d", len(ps.Cells)), Type: q.Type})
		}
		ps.VCs[0].Quota = append(ps.VCs[0].Quota, cells.Quota{Chain: q.Type, Type: q.Type, Count: q.Count})
	}
	return ps
}

func newCellsPlacer(spec cells.Spec, check bool) (*cellsPlacer, error) {
	a, err := cells.New(spec)
	if err != nil {
		return nil, err
	}
	a.SetChecking(check)
	p := &cellsPlacer{a: a}
	for _, v := range spec.VCs {
		p.vcs = append(p.vcs, v.Name)
	}
	return p, nil
}

// Compare runs the trace on the baseline, on cells, and every VC's
// guaranteed jobs on its private cluster under both logics.
func Compare(trace []philly.Job, o Options) (*Result, error) {
	if len(trace) == 0 {
		return nil, errors.New("vcsim: empty trace")
	}
	if o.Tolerance == (Tolerance{}) {
		o.Tolerance = DefaultTolerance
	}
	c, err := newCluster(o.Spec, o.NodeGPUs)
	if err != nil {
		return nil, err
	}
	cp, err := newCellsPlacer(o.Spec, o.Check)
	if err != nil {
		return nil, err
	}
	cellsRun, err := simulate(trace, c.vcIdx, len(c.vcs), sum(c.machines), c.nodeGPUs, cp)
	if err != nil {
		return nil, fmt.Errorf("cells: %w", err)
	}
	quotaRun, err := simulate(trace, c.vcIdx, len(c.vcs), sum(c.machines), c.nodeGPUs, newQuotaPlacer(c.machines, c.quota, o.FirstFit))
	if err != nil {
		return nil, fmt.Errorf("quota baseline: %w", err)
	}
	res := &Result{Jobs: len(trace), GPUs: sum(c.machines), Cells: system(cellsRun), Quota: system(quotaRun)}
	for v, name := range c.vcs {
		var own []philly.Job
		for _, j := range trace {
			if j.VC == name && !j.Opportunistic {
				own = append(own, j)
			}
		}
		vr := VCResult{VC: name, QuotaGPUs: c.quota[v], Guaranteed: len(own)}
		for _, j := range trace {
			if j.VC == name && j.Opportunistic {
				vr.Opportunistic++
			}
		}
		if len(own) > 0 {
			one := map[string]int{name: 0}
			pp, err := newCellsPlacer(privateSpec(o.Spec, v), o.Check)
			if err != nil {
				return nil, fmt.Errorf("vc %s private cluster: %w", name, err)
			}
			privCells, err := simulate(own, one, 1, c.quota[v], c.nodeGPUs, pp)
			if err != nil {
				return nil, fmt.Errorf("vc %s private cluster (cells): %w", name, err)
			}
			privQuota, err := simulate(own, one, 1, c.quota[v], c.nodeGPUs, newQuotaPlacer(c.private[v], []int{c.quota[v]}, o.FirstFit))
			if err != nil {
				return nil, fmt.Errorf("vc %s private cluster (quota): %w", name, err)
			}
			pc, pq := delays(privCells.jobs), delays(privQuota.jobs)
			sc, sq := delays(guaranteedOf(cellsRun.jobs, v)), delays(guaranteedOf(quotaRun.jobs, v))
			vr.PrivateCells, vr.PrivateQuota, vr.Cells, vr.Quota = summarize(pc), summarize(pq), summarize(sc), summarize(sq)
			for i := range pc {
				if o.Tolerance.exceeds(sc[i], pc[i]) {
					vr.CellsAnomalyJobs++
				}
				if o.Tolerance.exceeds(sq[i], pq[i]) {
					vr.QuotaAnomalyJobs++
				}
			}
			vr.CellsAnomaly = o.Tolerance.exceeds(vr.Cells.Avg, vr.PrivateCells.Avg)
			vr.QuotaAnomaly = o.Tolerance.exceeds(vr.Quota.Avg, vr.PrivateQuota.Avg)
		}
		vr.CellsOppWaitS, vr.QuotaOppWaitS = oppWait(cellsRun.jobs, v), oppWait(quotaRun.jobs, v)
		res.VCs = append(res.VCs, vr)
	}
	return res, nil
}

func guaranteedOf(jobs []*job, v int) []*job {
	var out []*job
	for _, j := range jobs {
		if j.vc == v && !j.Opportunistic {
			out = append(out, j)
		}
	}
	return out
}

// delays lists start − arrival in trace order.
func delays(jobs []*job) []float64 {
	out := make([]float64, len(jobs))
	for i, j := range jobs {
		out[i] = j.start - j.ArrivalS
	}
	return out
}

func summarize(d []float64) Delay {
	if len(d) == 0 {
		return Delay{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	total := 0.0
	for _, x := range s {
		total += x
	}
	// p95: nearest rank.
	k := (95*len(s)+99)/100 - 1
	return Delay{Avg: total / float64(len(s)), P95: s[max(k, 0)], Max: s[len(s)-1]}
}

func oppWait(jobs []*job, v int) float64 {
	n, total := 0, 0.0
	for _, j := range jobs {
		if j.vc == v && j.Opportunistic {
			n++
			total += max(0, j.finish-j.ArrivalS-j.DurationS) // float rounding after preemptions
		}
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

func system(r *run) System {
	s := System{Preemptions: r.preemptions, EndS: r.endS}
	if r.windowS > 0 {
		s.Utilization = (r.busyWindow[0] + r.busyWindow[1]) / (float64(r.gpus) * r.windowS)
	}
	if t := r.busy[0] + r.busy[1]; t > 0 {
		s.OppShare = r.busy[1] / t
	}
	return s
}

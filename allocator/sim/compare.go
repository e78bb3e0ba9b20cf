package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// The VC comparison (docs/virtual-clusters.md): the same jobs on
// (a) quota-only VCs (each VC's quota as a share in GPUs per type over the
// whole cluster, round.Quota), (b) VCs of cells (round.Cells), and, for each
// VC, its guaranteed jobs alone on a private cluster made of its quota
// under each logic. Every run is this simulator in VC mode with rounds on
// a fixed grid (Options.RoundGrid), so that a VC's rounds fall at the same
// times shared and private; the deciders are the agent's, built by the
// caller.

// Setup is one system of a comparison: its cluster and a fresh decider.
type Setup struct {
	Nodes   []Node
	Decider loop.Decider
}

// CompareVC is one VC of a comparison: its name, its quota in GPUs, and
// its private clusters under each logic.
type CompareVC struct {
	Name                       string
	QuotaGPUs                  int
	PrivateCells, PrivateQuota func() (Setup, error)
}

// CompareOptions configure Compare. Base gives the round length,
// throughputs and costs of every run (its Nodes, Decider, RoundGrid and
// BusyWindowS are set per run).
type CompareOptions struct {
	Base      Options
	VCs       []CompareVC
	Cells     func() (Setup, error)
	Quota     func() (Setup, error)
	Tolerance Tolerance
}

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

// Delay summarizes guaranteed jobs' queuing delays (first start −
// arrival) or JCTs (finish − arrival), s; p95 is the nearest rank.
type Delay struct {
	Avg float64 `json:"avg_s"`
	P95 float64 `json:"p95_s"`
	Max float64 `json:"max_s"`
}

// CompareVCResult is one VC's outcome.
type CompareVCResult struct {
	VC            string `json:"vc"`
	QuotaGPUs     int    `json:"quota_gpus"`
	Guaranteed    int    `json:"guaranteed_jobs"`
	Opportunistic int    `json:"opportunistic_jobs"`
	// Delays on the private cluster under each logic, and shared.
	PrivateCells Delay `json:"private_cells"`
	PrivateQuota Delay `json:"private_quota"`
	Cells        Delay `json:"cells"`
	Quota        Delay `json:"quota"`
	// JCTs likewise.
	PrivateCellsJCT Delay `json:"private_cells_jct"`
	PrivateQuotaJCT Delay `json:"private_quota_jct"`
	CellsJCT        Delay `json:"cells_jct"`
	QuotaJCT        Delay `json:"quota_jct"`
	// Guaranteed jobs that waited longer than on the private cluster (same
	// logic) beyond the tolerance, and whether the VC's average did.
	CellsAnomalyJobs int  `json:"cells_anomaly_jobs"`
	QuotaAnomalyJobs int  `json:"quota_anomaly_jobs"`
	CellsAnomaly     bool `json:"cells_anomaly"`
	QuotaAnomaly     bool `json:"quota_anomaly"`
	// Opportunistic jobs' average wait (JCT − duration), s.
	CellsOppWaitS float64 `json:"cells_opp_wait_s"`
	QuotaOppWaitS float64 `json:"quota_opp_wait_s"`
}

// System is one shared run's cluster-wide outcome. Utilization is busy
// GPU time over GPUs × [0, last arrival]; OppShare the opportunistic
// fraction of all busy GPU time; Preemptions the opportunistic jobs
// preempted for guaranteed work; Stops every stop the plans made
// (suspend, preempt, migrate; both classes).
type System struct {
	Utilization float64 `json:"utilization"`
	OppShare    float64 `json:"opportunistic_share"`
	Preemptions int     `json:"preemptions"`
	Stops       int     `json:"stops"`
	Rounds      int     `json:"rounds"`
	EndS        float64 `json:"end_s"`
}

// CompareResult is one comparison.
type CompareResult struct {
	Jobs  int               `json:"jobs"`
	GPUs  int               `json:"gpus"`
	VCs   []CompareVCResult `json:"vcs"`
	Cells System            `json:"cells"`
	Quota System            `json:"quota"`
}

// Compare runs the jobs (arrival order, each with its VC and class) on
// both shared systems and every VC's guaranteed jobs on its private
// clusters.
func Compare(jobs []trace.Job, o CompareOptions) (*CompareResult, error) {
	if len(jobs) == 0 {
		return nil, errors.New("sim: empty trace")
	}
	if o.Tolerance == (Tolerance{}) {
		o.Tolerance = DefaultTolerance
	}
	window := jobs[len(jobs)-1].ArrivalS
	known := map[string]bool{}
	for _, v := range o.VCs {
		known[v.Name] = true
	}
	for _, j := range jobs {
		if !known[j.VC] {
			return nil, fmt.Errorf("sim: job %d: unknown vc %q", j.ID, j.VC)
		}
	}
	gpus := 0 // the shared cluster's (the cells setup's)
	run := func(what string, mk func() (Setup, error), js []trace.Job) (*Result, error) {
		su, err := mk()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if what == "cells" {
			for _, n := range su.Nodes {
				for _, c := range n.GPUs {
					gpus += c
				}
			}
		}
		opt := o.Base
		opt.Nodes, opt.Decider, opt.RoundGrid, opt.BusyWindowS = su.Nodes, su.Decider, true, window
		opt.WindowStart, opt.WindowEnd = 0, 0
		r, err := Run(&SliceSource{Jobs: js}, opt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if !r.Finished || r.JobsDone != len(js) {
			return nil, fmt.Errorf("%s: %d of %d jobs done (a job fits nowhere, or a limit stopped the run)", what, r.JobsDone, len(js))
		}
		return r, nil
	}
	cr, err := run("cells", o.Cells, jobs)
	if err != nil {
		return nil, err
	}
	qr, err := run("quota-only", o.Quota, jobs)
	if err != nil {
		return nil, err
	}
	res := &CompareResult{Jobs: len(jobs), GPUs: gpus, Cells: system(cr, gpus), Quota: system(qr, gpus)}
	cellsBy, quotaBy := byJob(cr), byJob(qr)
	for _, v := range o.VCs {
		vr := CompareVCResult{VC: v.Name, QuotaGPUs: v.QuotaGPUs}
		var own []trace.Job
		for _, j := range jobs {
			switch {
			case j.VC != v.Name:
			case j.Opportunistic:
				vr.Opportunistic++
			default:
				own = append(own, j)
			}
		}
		vr.Guaranteed = len(own)
		if len(own) > 0 {
			pc, err := run("vc "+v.Name+" private cluster (cells)", v.PrivateCells, own)
			if err != nil {
				return nil, err
			}
			pq, err := run("vc "+v.Name+" private cluster (quota)", v.PrivateQuota, own)
			if err != nil {
				return nil, err
			}
			pcBy, pqBy := byJob(pc), byJob(pq)
			var pcd, pqd, scd, sqd, pcj, pqj, scj, sqj []float64
			for _, j := range own {
				pcd, pcj = appendJob(pcd, pcj, pcBy[j.ID])
				pqd, pqj = appendJob(pqd, pqj, pqBy[j.ID])
				scd, scj = appendJob(scd, scj, cellsBy[j.ID])
				sqd, sqj = appendJob(sqd, sqj, quotaBy[j.ID])
			}
			for i := range own {
				if o.Tolerance.exceeds(scd[i], pcd[i]) {
					vr.CellsAnomalyJobs++
				}
				if o.Tolerance.exceeds(sqd[i], pqd[i]) {
					vr.QuotaAnomalyJobs++
				}
			}
			vr.PrivateCells, vr.PrivateQuota, vr.Cells, vr.Quota = summarize(pcd), summarize(pqd), summarize(scd), summarize(sqd)
			vr.PrivateCellsJCT, vr.PrivateQuotaJCT, vr.CellsJCT, vr.QuotaJCT = summarize(pcj), summarize(pqj), summarize(scj), summarize(sqj)
			vr.CellsAnomaly = o.Tolerance.exceeds(vr.Cells.Avg, vr.PrivateCells.Avg)
			vr.QuotaAnomaly = o.Tolerance.exceeds(vr.Quota.Avg, vr.PrivateQuota.Avg)
		}
		vr.CellsOppWaitS, vr.QuotaOppWaitS = oppWait(jobs, cellsBy, v.Name), oppWait(jobs, quotaBy, v.Name)
		res.VCs = append(res.VCs, vr)
	}
	return res, nil
}

func byJob(r *Result) map[int]JobResult {
	m := make(map[int]JobResult, len(r.Jobs))
	for _, j := range r.Jobs {
		m[j.ID] = j
	}
	return m
}

func appendJob(delays, jcts []float64, j JobResult) ([]float64, []float64) {
	return append(delays, j.StartS-j.ArrivalS), append(jcts, j.JCTS)
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
	k := (95*len(s)+99)/100 - 1 // nearest rank
	return Delay{Avg: total / float64(len(s)), P95: s[max(k, 0)], Max: s[len(s)-1]}
}

func oppWait(jobs []trace.Job, by map[int]JobResult, vc string) float64 {
	n, total := 0, 0.0
	for _, j := range jobs {
		if j.VC == vc && j.Opportunistic {
			n++
			total += max(0, by[j.ID].JCTS-j.DurationS)
		}
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

func system(r *Result, gpus int) System {
	s := System{Rounds: r.Rounds, EndS: r.EndS}
	for _, v := range r.VCs {
		s.Stops += v.Preemptions
	}
	if r.Opportunistic != nil {
		s.Stops += r.Opportunistic.Preemptions
	}
	if b := r.ClassBusy; b != nil {
		s.Preemptions = b.Evicted
		if b.WindowS > 0 && gpus > 0 {
			s.Utilization = (b.GuaranteedWindow + b.OpportunisticWindow) / (float64(gpus) * b.WindowS)
		}
		if t := b.Guaranteed + b.Opportunistic; t > 0 {
			s.OppShare = b.Opportunistic / t
		}
	}
	return s
}

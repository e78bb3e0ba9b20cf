package vcsim

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/philly"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/vcround"
)

// TimeShareOptions configure CompareTimeSharing: both layers, rounds.
type TimeShareOptions struct {
	Spec cells.Spec
	// Policies per VC in Spec order ("" or missing: max_min_fairness_perf).
	Policies []string
	// OppPolicy orders opportunistic jobs on the GPUs the VCs leave
	// (default max_min_fairness_perf).
	OppPolicy string
	RoundS    float64 // default 360
	Seed      int64
	// Throughputs (default: Gavel's table). Each job gets a model measured
	// at its GPU count on the cluster's GPU type: the (ID mod n)-th.
	Throughputs *throughputs.Table
	Tolerance   Tolerance
	Check       bool
}

// TimeShareVC is one VC's outcome with time sharing.
type TimeShareVC struct {
	VC            string `json:"vc"`
	Policy        string `json:"policy"`
	QuotaGPUs     int    `json:"quota_gpus"`
	Guaranteed    int    `json:"guaranteed_jobs"`
	Opportunistic int    `json:"opportunistic_jobs"`
	// Queuing delay (first start − arrival) and JCT (finish − arrival) of
	// guaranteed jobs, on the private cluster and shared.
	PrivateDelay Delay `json:"private_delay"`
	Delay        Delay `json:"delay"`
	PrivateJCT   Delay `json:"private_jct"`
	JCT          Delay `json:"jct"`
	// Jobs whose shared JCT exceeds the private one beyond the tolerance,
	// and whether the VC's average does.
	AnomalyJobs int  `json:"anomaly_jobs"`
	Anomaly     bool `json:"anomaly"`
	// Opportunistic jobs' average JCT, s.
	OppJCTS float64 `json:"opp_jct_s"`
}

// TimeShareResult is a whole time-sharing comparison.
type TimeShareResult struct {
	Jobs   int           `json:"jobs"`
	GPUs   int           `json:"gpus"`
	RoundS float64       `json:"round_s"`
	Rounds int           `json:"rounds"`
	VCs    []TimeShareVC `json:"vcs"`
	// Utilization: busy GPU time over GPUs × [0, last arrival].
	Utilization float64 `json:"utilization"`
	OppShare    float64 `json:"opportunistic_share"`
	// Preemptions: opportunistic jobs evicted by guaranteed placements.
	// Restarts: jobs started again after running before (resumed after a
	// suspension or moved), both classes.
	Preemptions int     `json:"preemptions"`
	Restarts    int     `json:"restarts"`
	Regrouped   int     `json:"regrouped"`
	EndS        float64 `json:"end_s"`
}

type tsJob struct {
	philly.Job
	ej            engine.Job
	start, finish float64
	ran           bool
}

type tsRun struct {
	jobs        []*tsJob
	rounds      int
	busyWindow  [2]float64
	busy        [2]float64
	windowS     float64
	preemptions int
	restarts    int
	regrouped   int
	endS        float64
}

// CompareTimeSharing replays the trace with both layers: each round the
// cell layer gives each VC its cells and the VC's engine (its policy)
// decides which of its jobs run there (vcround); opportunistic jobs share
// the rest. Every VC's guaranteed jobs are also run alone on its private
// cluster with the same policy, and per-job delays and JCTs compared.
func CompareTimeSharing(trace []philly.Job, o TimeShareOptions) (*TimeShareResult, error) {
	if len(trace) == 0 {
		return nil, errors.New("vcsim: empty trace")
	}
	if o.RoundS <= 0 {
		o.RoundS = 360
	}
	if o.Tolerance == (Tolerance{}) {
		o.Tolerance = DefaultTolerance
	}
	if o.Throughputs == nil {
		o.Throughputs = throughputs.Default()
	}
	if o.OppPolicy == "" {
		o.OppPolicy = "max_min_fairness_perf"
	}
	policy := func(v int) string {
		if v < len(o.Policies) && o.Policies[v] != "" {
			return o.Policies[v]
		}
		return "max_min_fairness_perf"
	}
	c, err := newCluster(o.Spec, 0)
	if err != nil {
		return nil, err
	}
	shared, err := newRounds(o.Spec, o, policy, true)
	if err != nil {
		return nil, err
	}
	jobs, err := tsJobs(trace, o.Spec, o.Throughputs)
	if err != nil {
		return nil, err
	}
	sr, err := runRounds(jobs, shared, o.RoundS)
	if err != nil {
		return nil, fmt.Errorf("shared: %w", err)
	}
	res := &TimeShareResult{Jobs: len(trace), GPUs: sum(c.machines), RoundS: o.RoundS, Rounds: sr.rounds,
		Preemptions: sr.preemptions, Restarts: sr.restarts, Regrouped: sr.regrouped, EndS: sr.endS}
	if sr.windowS > 0 {
		res.Utilization = (sr.busyWindow[0] + sr.busyWindow[1]) / (float64(res.GPUs) * sr.windowS)
	}
	if t := sr.busy[0] + sr.busy[1]; t > 0 {
		res.OppShare = sr.busy[1] / t
	}
	for v, name := range c.vcs {
		vr := TimeShareVC{VC: name, Policy: policy(v), QuotaGPUs: c.quota[v]}
		var own []philly.Job
		var sharedOwn []*tsJob
		oppN, oppT := 0, 0.0
		for _, j := range sr.jobs {
			if j.VC != name {
				continue
			}
			if j.Opportunistic {
				oppN++
				oppT += j.finish - j.ArrivalS
				continue
			}
			sharedOwn = append(sharedOwn, j)
			own = append(own, j.Job)
		}
		vr.Guaranteed, vr.Opportunistic = len(own), oppN
		if oppN > 0 {
			vr.OppJCTS = oppT / float64(oppN)
		}
		if len(own) > 0 {
			priv, err := newRounds(privateSpec(o.Spec, v), o, func(int) string { return policy(v) }, false)
			if err != nil {
				return nil, fmt.Errorf("vc %s private cluster: %w", name, err)
			}
			fresh, err := tsJobs(own, o.Spec, o.Throughputs)
			if err != nil {
				return nil, err
			}
			pr, err := runRounds(fresh, priv, o.RoundS)
			if err != nil {
				return nil, fmt.Errorf("vc %s private cluster: %w", name, err)
			}
			var pd, sd, pj, sj []float64
			for i := range pr.jobs {
				p, s := pr.jobs[i], sharedOwn[i]
				pd, sd = append(pd, p.start-p.ArrivalS), append(sd, s.start-s.ArrivalS)
				pj, sj = append(pj, p.finish-p.ArrivalS), append(sj, s.finish-s.ArrivalS)
				if o.Tolerance.exceeds(sj[i], pj[i]) {
					vr.AnomalyJobs++
				}
			}
			vr.PrivateDelay, vr.Delay, vr.PrivateJCT, vr.JCT = summarize(pd), summarize(sd), summarize(pj), summarize(sj)
			vr.Anomaly = o.Tolerance.exceeds(vr.JCT.Avg, vr.PrivateJCT.Avg)
		}
		res.VCs = append(res.VCs, vr)
	}
	return res, nil
}

// newRounds builds a two-layer scheduler on spec; opp adds the
// opportunistic engine.
func newRounds(spec cells.Spec, o TimeShareOptions, policy func(int) string, opp bool) (*vcround.Scheduler, error) {
	a, err := cells.New(spec)
	if err != nil {
		return nil, err
	}
	a.SetChecking(o.Check)
	var vcs []vcround.VC
	for v, vc := range spec.VCs {
		e, err := engine.New(engine.Config{Policy: policy(v), RoundS: o.RoundS, Seed: o.Seed})
		if err != nil {
			return nil, fmt.Errorf("vc %s: %w", vc.Name, err)
		}
		vcs = append(vcs, vcround.VC{Name: vc.Name, Engine: e})
	}
	var oe *engine.Engine
	if opp {
		if oe, err = engine.New(engine.Config{Policy: o.OppPolicy, RoundS: o.RoundS, Seed: o.Seed}); err != nil {
			return nil, fmt.Errorf("opportunistic: %w", err)
		}
	}
	return vcround.New(a, vcs, oe)
}

// tsJobs gives each trace job a model measured at its GPU count.
func tsJobs(trace []philly.Job, spec cells.Spec, tb *throughputs.Table) ([]*tsJob, error) {
	gpuType := ""
	for _, t := range spec.Types {
		if t.Child == "" {
			if gpuType = t.GPUType; gpuType == "" {
				gpuType = t.Name
			}
			break
		}
	}
	bySF := map[int][]throughputs.Key{}
	for _, k := range tb.Keys(gpuType) {
		bySF[k.ScaleFactor] = append(bySF[k.ScaleFactor], k)
	}
	var out []*tsJob
	for i, j := range trace {
		if i > 0 && j.ArrivalS < trace[i-1].ArrivalS {
			return nil, fmt.Errorf("vcsim: job %d arrives before job %d", j.ID, trace[i-1].ID)
		}
		keys := bySF[j.GPUs]
		if len(keys) == 0 {
			return nil, fmt.Errorf("vcsim: job %d: no model measured on %s at %d GPUs", j.ID, gpuType, j.GPUs)
		}
		k := keys[j.ID%len(keys)]
		tput, _ := tb.Isolated(k, gpuType)
		if tput <= 0 {
			return nil, fmt.Errorf("vcsim: job %d: model %v has no throughput on %s", j.ID, k, gpuType)
		}
		steps := j.DurationS * tput
		out = append(out, &tsJob{Job: j, start: -1, finish: -1, ej: engine.Job{ID: strconv.Itoa(j.ID), ScaleFactor: j.GPUs,
			Throughput: map[string]float64{gpuType: tput}, Weight: 1, ArrivalS: j.ArrivalS, TotalSteps: steps, RemainingSteps: steps,
			ReceivedS: map[string]float64{}}})
	}
	return out, nil
}

// runRounds simulates rounds of roundS on the grid k × roundS: a job
// arriving during a round joins at the next boundary; a job in the plan
// runs for the round, or until it finishes (its GPUs then idle to the end
// of the round). Empty stretches are skipped to the next arrival.
func runRounds(jobs []*tsJob, s *vcround.Scheduler, roundS float64) (*tsRun, error) {
	r := &tsRun{jobs: jobs}
	byID := map[string]*tsJob{}
	for _, j := range jobs {
		if byID[j.ej.ID] != nil {
			return nil, fmt.Errorf("vcsim: duplicate job id %s", j.ej.ID)
		}
		byID[j.ej.ID] = j
		r.windowS = j.ArrivalS
	}
	var active []*tsJob
	next := 0
	for now := 0.0; next < len(jobs) || len(active) > 0; now += roundS {
		if len(active) == 0 && jobs[next].ArrivalS > now {
			now = math.Ceil(jobs[next].ArrivalS/roundS) * roundS
		}
		for next < len(jobs) && jobs[next].ArrivalS <= now {
			active = append(active, jobs[next])
			next++
		}
		snap := vcround.Snapshot{TimeS: now}
		for _, j := range active {
			snap.Jobs = append(snap.Jobs, vcround.Job{Job: j.ej, VC: j.VC, Opportunistic: j.Opportunistic})
		}
		res, err := s.Round(snap)
		if err != nil {
			return nil, err
		}
		r.rounds++
		r.preemptions += len(res.Preempted)
		r.regrouped += res.Regrouped
		if len(res.Dropped) > 0 {
			return nil, fmt.Errorf("vcsim: t=%.0f: the cell layer could not place %v", now, res.Dropped)
		}
		for _, a := range res.Plan.Assignments {
			j := byID[a.Jobs[0]]
			if a.Action == engine.Start && j.ran {
				r.restarts++
			}
			if j.start < 0 {
				j.start = now
			}
			j.ran = true
			tput := j.ej.Throughput[a.Type]
			dt := math.Min(roundS, j.ej.RemainingSteps/tput)
			j.ej.RemainingSteps -= dt * tput
			j.ej.ReceivedS[a.Type] += dt
			c := 0
			if j.Opportunistic {
				c = 1
			}
			g := float64(len(a.GPUs))
			r.busy[c] += g * dt
			if hi := math.Min(now+dt, r.windowS); hi > now {
				r.busyWindow[c] += g * (hi - now)
			}
			if j.ej.RemainingSteps <= 1e-9*j.ej.TotalSteps {
				j.finish = now + dt
				r.endS = math.Max(r.endS, j.finish)
			}
		}
		kept := active[:0]
		for _, j := range active {
			if j.finish < 0 {
				kept = append(kept, j)
			}
		}
		active = kept
		if r.rounds > 10_000_000 {
			return nil, errors.New("vcsim: the simulation does not end")
		}
	}
	return r, nil
}

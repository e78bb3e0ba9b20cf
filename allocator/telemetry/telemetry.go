// Package telemetry publishes the allocator's metrics, named after
// Prometheus' and Nomad's conventions (counters end in _total, timings are
// histograms in seconds): rounds, decisions and preemptions, round and
// policy solve time, admission wait, jobs by state and VC, pending jobs by
// reason, GPUs used per type and VC, each VC's quota, use and borrowing,
// leadership and the build.
//
// Counters and gauges go through go-metrics: a Prometheus sink on the
// Telemetry's own registry (tests and several allocators in one process do
// not collide) and, when configured, further sinks (statsd) fanned out
// from a second go-metrics instance that may prefix the host name. The
// go-metrics Prometheus sink turns samples into summaries, not histograms,
// so the three timings are native client_golang histograms on the same
// registry (and timer samples, in milliseconds, on the further sinks).
package telemetry

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/internal/version"
)

// DecisionKinds are the kinds of decision rondo_decisions_total counts.
var DecisionKinds = []string{"admit", "suspend", "resume", "migrate", "preempt", "retune", "grow", "shrink"}

// JobStates are the values of rondo_jobs' state label.
var JobStates = []string{"running", "queued", "suspended"}

// Options configures a Telemetry beyond the Prometheus registry.
type Options struct {
	// Sinks are further go-metrics sinks (statsd) every counter, gauge
	// and timer also goes to.
	Sinks []metrics.MetricSink
	// DisableHostname: the further sinks' gauges are not prefixed with the
	// host name (the Prometheus sink's never are).
	DisableHostname bool
	// CollectionInterval is how often the gauges are sent again to the
	// further sinks (statsd keeps no gauge between flushes); default 1s.
	CollectionInterval time.Duration
}

// VCQuota is one VC's guaranteed GPUs per type (rondo_vc_quota_gpus).
type VCQuota struct {
	Name string
	GPUs map[string]int
}

// VCUsage is one VC's GPUs per type in the last round as the agent's VC
// view counts them (agent.VC: quota, distinct GPUs its jobs hold, those
// beyond the quota): rondo_vc_quota_gpus, rondo_vc_used_gpus and
// rondo_vc_borrowed_gpus show exactly what `rondo vc status` shows.
type VCUsage struct {
	Name                  string
	Quota, Used, Borrowed map[string]int
}

// Telemetry is one allocator's metrics.
type Telemetry struct {
	reg  *prometheus.Registry
	prom *metrics.Metrics // the Prometheus sink
	ext  *metrics.Metrics // the further sinks; nil without

	roundSeconds, solveSeconds, waitSeconds prometheus.Histogram

	mu sync.Mutex
	// gauges are the last value of every gauge series, by flat name;
	// round marks those Round sets (a series it does not set again drops
	// to 0).
	gauges map[string]*gauge
	vcs    []VCQuota
	usage  []VCUsage
	// admitted are the jobs whose admission wait was observed, while they
	// are in the snapshot.
	admitted map[string]bool

	stop, done chan struct{}
	once       sync.Once
}

type gauge struct {
	key    []string
	labels []metrics.Label
	val    float32
	round  bool
}

// New returns metrics named "rondo_…" with a Prometheus registry only.
func New() (*Telemetry, error) { return NewWith(Options{}) }

// NewWith returns metrics with o's further sinks. Close stops sending to
// them.
func NewWith(o Options) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	// Expiration 0: a series stays until the process ends (Round sets the
	// series it no longer sees to 0 itself; rounds may be longer than any
	// expiration).
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: reg, Name: "rondo_gometrics_sink"})
	if err != nil {
		return nil, err
	}
	cfg := metrics.DefaultConfig("rondo")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.EnableServiceLabel = false
	cfg.EnableTypePrefix = false
	prom, err := metrics.New(cfg, sink)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{reg: reg, prom: prom, gauges: map[string]*gauge{}, admitted: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if len(o.Sinks) > 0 {
		ecfg := metrics.DefaultConfig("rondo")
		ecfg.EnableHostname = !o.DisableHostname
		ecfg.EnableRuntimeMetrics = false
		if t.ext, err = metrics.New(ecfg, metrics.FanoutSink(o.Sinks)); err != nil {
			return nil, err
		}
		iv := o.CollectionInterval
		if iv <= 0 {
			iv = time.Second
		}
		go t.resend(iv)
	}
	t.roundSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rondo_round_duration_seconds",
		Help: "Wall time of a scheduling round: observe, decide, record, enforce.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 15)})
	t.solveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rondo_policy_solve_seconds",
		Help: "Time the policy took to recompute the allocation.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	t.waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rondo_admission_wait_seconds",
		Help:    "A job's wait from its arrival to its first start, observed when it is admitted.",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800}})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rondo_build_info",
		Help: "The agent's build: 1, labelled with its version and Go version."}, []string{"version", "goversion"})
	info.WithLabelValues(version.Version, version.GoVersion()).Set(1)
	for _, c := range []prometheus.Collector{t.roundSeconds, t.solveSeconds, t.waitSeconds, info} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every counter and the leader gauge exist from the start: a rate
	// over a counter that appears late misses its first increments.
	for _, k := range DecisionKinds {
		t.counter([]string{"decisions", "total"}, 0, metrics.Label{Name: "kind", Value: k})
	}
	for _, name := range [][]string{{"preemptions", "total"}, {"rounds", "total"}, {"rounds", "failed", "total"}} {
		t.counter(name, 0)
	}
	t.mu.Lock()
	t.setGauge([]string{"leader"}, 0, false)
	t.mu.Unlock()
	return t, nil
}

// Close stops sending gauges to the further sinks (it returns once the
// sending has stopped: the sinks may be shut down after it).
func (t *Telemetry) Close() {
	t.once.Do(func() {
		close(t.stop)
		if t.ext != nil {
			<-t.done
		}
	})
}

// Registry is the Prometheus registry the metrics are on.
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// Handler serves the metrics in Prometheus' text format (mount at /metrics).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{})
}

func (t *Telemetry) resend(iv time.Duration) {
	defer close(t.done)
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.mu.Lock()
			for _, g := range t.gauges {
				t.ext.SetGaugeWithLabels(g.key, g.val, g.labels)
			}
			t.mu.Unlock()
		}
	}
}

func (t *Telemetry) counter(key []string, v float32, labels ...metrics.Label) {
	t.prom.IncrCounterWithLabels(key, v, labels)
	if t.ext != nil && v != 0 {
		t.ext.IncrCounterWithLabels(key, v, labels)
	}
}

// setGauge sets one series (t.mu held); round: Round owns it.
func (t *Telemetry) setGauge(key []string, v float32, round bool, labels ...metrics.Label) {
	id := strings.Join(key, ".")
	for _, l := range labels {
		id += "|" + l.Name + "=" + l.Value
	}
	g := t.gauges[id]
	if g == nil {
		g = &gauge{key: key, labels: labels}
		t.gauges[id] = g
	}
	g.val, g.round = v, round
	t.prom.SetGaugeWithLabels(key, v, labels)
	if t.ext != nil {
		t.ext.SetGaugeWithLabels(key, v, labels)
	}
}

func (t *Telemetry) timer(key []string, d time.Duration) {
	if t.ext != nil {
		t.ext.AddSample(key, float32(d.Seconds()*1000))
	}
}

// SetVCs sets the VCs' quotas (rondo_vc_quota_gpus), from the config: a
// quota-only VC's share per type, a cell VC's cells' GPUs. A job without a
// VC counts toward the only VC when there is one.
func (t *Telemetry) SetVCs(vcs []VCQuota) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.vcs = vcs
}

// SetVCUsage sets the VCs' use for the next Round (the agent calls it as
// it records the round's status).
func (t *Telemetry) SetVCUsage(us []VCUsage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.usage = us
}

// SetLeader sets rondo_leader: 1 while this agent holds the leader lock
// (or runs without one), 0 on a standby.
func (t *Telemetry) SetLeader(leader bool) {
	v := float32(0)
	if leader {
		v = 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setGauge([]string{"leader"}, v, false)
}

// RoundEnded counts a round (rondo_rounds_total) and, when err is not nil,
// a failed one (rondo_rounds_failed_total).
func (t *Telemetry) RoundEnded(err error) {
	t.counter([]string{"rounds", "total"}, 1)
	if err != nil {
		t.counter([]string{"rounds", "failed", "total"}, 1)
	}
}

// Round records one round: its wall duration, the policy solve time (when
// the allocation was recomputed), the admission wait of the jobs it admits
// and what the plan means for jobs, GPUs and VCs.
func (t *Telemetry) Round(d time.Duration, s *engine.Snapshot, p *engine.Plan) {
	t.roundSeconds.Observe(d.Seconds())
	t.timer([]string{"round", "duration"}, d)
	if p.Recomputed {
		solve := time.Duration(p.SolveMS * float64(time.Millisecond))
		t.solveSeconds.Observe(solve.Seconds())
		t.timer([]string{"policy", "solve"}, solve)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	vcOf := t.vcOf()
	// Admission wait: a job started for the first time.
	jobs := make(map[string]*engine.Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for _, a := range p.Assignments {
		if a.Action != engine.Start {
			continue
		}
		for _, id := range a.Jobs {
			j := jobs[id]
			if j == nil || j.Started || t.admitted[id] || received(j) > 0 {
				continue
			}
			t.admitted[id] = true
			if w := s.TimeS - j.ArrivalS; w >= 0 {
				t.waitSeconds.Observe(w)
				t.timer([]string{"admission", "wait"}, time.Duration(w*float64(time.Second)))
			}
		}
	}
	for id := range t.admitted {
		if jobs[id] == nil {
			delete(t.admitted, id)
		}
	}

	// This round's series; the ones of earlier rounds it does not set
	// drop to 0.
	var prev []*gauge
	for _, g := range t.gauges {
		if g.round {
			g.round = false
			prev = append(prev, g)
		}
	}
	defer func() {
		for _, g := range prev {
			if !g.round && g.val != 0 {
				t.setGauge(g.key, 0, false, g.labels...)
			}
		}
	}()
	u := Summarize(s, p)
	byVC := map[string]map[string]int{}
	for _, vc := range t.vcs {
		byVC[vc.Name] = map[string]int{}
	}
	for _, j := range s.Jobs {
		vc := vcOf(j.VC)
		if byVC[vc] == nil {
			byVC[vc] = map[string]int{}
		}
		byVC[vc][u.State[j.ID]]++
	}
	for _, vc := range sortedKeys(byVC) {
		for _, st := range JobStates {
			t.setGauge([]string{"jobs"}, float32(byVC[vc][st]), true, metrics.Label{Name: "state", Value: st},
				metrics.Label{Name: "vc", Value: vc})
		}
	}
	for _, typ := range sortedKeys(u.Utilization) {
		t.setGauge([]string{"gpu", "utilization"}, float32(u.Utilization[typ]), true, metrics.Label{Name: "type", Value: typ})
	}
	// GPUs used per type and VC: a GPU shared by two jobs counts half to
	// each job's VC.
	used := map[string]map[string]float64{} // vc → type → GPUs
	for _, vc := range t.vcs {
		used[vc.Name] = map[string]float64{}
		for typ := range vc.GPUs {
			used[vc.Name][typ] = 0
		}
	}
	for _, a := range p.Assignments {
		for _, id := range a.Jobs {
			vc := ""
			if j := jobs[id]; j != nil {
				vc = j.VC
			}
			vc = vcOf(vc)
			if used[vc] == nil {
				used[vc] = map[string]float64{}
			}
			used[vc][a.Type] += float64(len(a.GPUs)) / float64(len(a.Jobs))
		}
	}
	for _, vc := range sortedKeys(used) {
		for _, typ := range sortedKeys(used[vc]) {
			t.setGauge([]string{"gpus", "used"}, float32(used[vc][typ]), true,
				metrics.Label{Name: "type", Value: typ}, metrics.Label{Name: "vc", Value: vc})
		}
	}
	for _, u := range t.usage {
		types := map[string]float64{}
		for typ := range u.Quota {
			types[typ] = 0
		}
		for typ := range u.Used {
			types[typ] = 0
		}
		for _, typ := range sortedKeys(types) {
			vl := []metrics.Label{{Name: "vc", Value: u.Name}, {Name: "type", Value: typ}}
			if q, ok := u.Quota[typ]; ok {
				t.setGauge([]string{"vc", "quota", "gpus"}, float32(q), true, vl...)
			}
			t.setGauge([]string{"vc", "used", "gpus"}, float32(u.Used[typ]), true, vl...)
			t.setGauge([]string{"vc", "borrowed", "gpus"}, float32(u.Borrowed[typ]), true, vl...)
		}
	}
	pending := map[string]int{}
	waiting := map[string]bool{}
	for _, w := range p.Waiting {
		if r := w.Reason.WaitKey(); r != "" {
			pending[r]++
			waiting[w.Job] = true
		}
	}
	for _, r := range p.Reservations {
		if !waiting[r.Job] {
			pending["reserved"]++
		}
	}
	pending[engine.RejectedKey] += len(s.Rejected)
	for _, r := range engine.WaitKeys {
		t.setGauge([]string{"jobs", "pending"}, float32(pending[r]), true, metrics.Label{Name: "reason", Value: r})
	}
}

// vcOf names a job's VC label: its VC, or the only VC for a job without
// one (t.mu held).
func (t *Telemetry) vcOf() func(string) string {
	only := ""
	if len(t.vcs) == 1 {
		only = t.vcs[0].Name
	}
	return func(vc string) string {
		if vc == "" {
			return only
		}
		return vc
	}
}

func received(j *engine.Job) float64 {
	var r float64
	for _, v := range j.ReceivedS {
		r += v
	}
	return r
}

// Decision counts one enforcement decision of the given kind (admit,
// suspend, resume, migrate, preempt, retune, grow, shrink). A preemption
// and a retune (a restart with other cores and memory, allocator/placement)
// count as preemptions.
func (t *Telemetry) Decision(kind string) {
	t.counter([]string{"decisions", "total"}, 1, metrics.Label{Name: "kind", Value: kind})
	if kind == "preempt" || kind == "retune" {
		t.counter([]string{"preemptions", "total"}, 1)
	}
}

// Usage is what a plan does with the cluster.
type Usage struct {
	// Jobs by state: running (assigned this round), suspended (ran last
	// round, not this one), queued (active, neither).
	Jobs map[string]int
	// State is each job's state.
	State map[string]string
	// Utilization per GPU type: assigned / healthy GPUs.
	Utilization map[string]float64
}

// Summarize derives Usage from a snapshot and the plan made for it.
func Summarize(s *engine.Snapshot, p *engine.Plan) Usage {
	u := Usage{Jobs: map[string]int{}, State: map[string]string{}, Utilization: map[string]float64{}}
	healthy := map[string]int{}
	for _, g := range s.GPUs {
		if !g.Failed {
			healthy[g.Type]++
		}
	}
	used := map[string]int{}
	running := map[string]bool{}
	for _, a := range p.Assignments {
		used[a.Type] += len(a.GPUs)
		for _, j := range a.Jobs {
			running[j] = true
		}
	}
	suspended := map[string]bool{}
	for _, j := range p.Suspend {
		suspended[j] = true
	}
	for _, j := range s.Jobs {
		st := "queued"
		switch {
		case running[j.ID]:
			st = "running"
		case suspended[j.ID]:
			st = "suspended"
		}
		u.Jobs[st]++
		u.State[j.ID] = st
	}
	for typ, n := range healthy {
		if n > 0 {
			u.Utilization[typ] = float64(used[typ]) / float64(n)
		}
	}
	return u
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Package telemetry publishes the allocator's metrics through go-metrics
// with a Prometheus sink on a private registry: round duration, policy solve
// time, jobs by state, GPU utilization by type, preemptions and one counter
// per kind of decision (admit, suspend, resume, migrate, preempt).
package telemetry

import (
	"net/http"
	"sort"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// Telemetry is one allocator's metrics.
type Telemetry struct {
	m   *metrics.Metrics
	reg *prometheus.Registry
}

// New returns metrics named "rondo_…". Each instance has its own registry,
// so tests and several allocators in one process do not collide.
func New() (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: reg})
	if err != nil {
		return nil, err
	}
	cfg := metrics.DefaultConfig("rondo")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.EnableServiceLabel = false
	m, err := metrics.New(cfg, sink)
	if err != nil {
		return nil, err
	}
	return &Telemetry{m: m, reg: reg}, nil
}

// Handler serves the metrics in Prometheus' text format (mount at /metrics).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{})
}

// Round records one round: its wall duration, the policy solve time (when
// the allocation was recomputed) and what the plan means for jobs and GPUs.
func (t *Telemetry) Round(d time.Duration, s *engine.Snapshot, p *engine.Plan) {
	t.m.AddSample([]string{"round", "duration_ms"}, float32(d.Seconds()*1000))
	if p.Recomputed {
		t.m.AddSample([]string{"policy", "solve_ms"}, float32(p.SolveMS))
	}
	u := Summarize(s, p)
	for _, state := range []string{"running", "queued", "suspended"} {
		t.m.SetGaugeWithLabels([]string{"jobs"}, float32(u.Jobs[state]), []metrics.Label{{Name: "state", Value: state}})
	}
	for _, typ := range sortedKeys(u.Utilization) {
		t.m.SetGaugeWithLabels([]string{"gpu", "utilization"}, float32(u.Utilization[typ]), []metrics.Label{{Name: "type", Value: typ}})
	}
}

// Decision counts one enforcement decision of the given kind (admit,
// suspend, resume, migrate, preempt, retune). A preemption and a retune (a
// restart with other cores and memory, allocator/placement) count as
// preemptions.
func (t *Telemetry) Decision(kind string) {
	t.m.IncrCounterWithLabels([]string{"decisions"}, 1, []metrics.Label{{Name: "kind", Value: kind}})
	if kind == "preempt" || kind == "retune" {
		t.m.IncrCounter([]string{"preemptions"}, 1)
	}
}

// Usage is what a plan does with the cluster.
type Usage struct {
	// Jobs by state: running (assigned this round), suspended (ran last
	// round, not this one), queued (active, neither).
	Jobs map[string]int
	// Utilization per GPU type: assigned / healthy GPUs.
	Utilization map[string]float64
}

// Summarize derives Usage from a snapshot and the plan made for it.
func Summarize(s *engine.Snapshot, p *engine.Plan) Usage {
	u := Usage{Jobs: map[string]int{}, Utilization: map[string]float64{}}
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
		switch {
		case running[j.ID]:
			u.Jobs["running"]++
		case suspended[j.ID]:
			u.Jobs["suspended"]++
		default:
			u.Jobs["queued"]++
		}
	}
	for typ, n := range healthy {
		if n > 0 {
			u.Utilization[typ] = float64(used[typ]) / float64(n)
		}
	}
	return u
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

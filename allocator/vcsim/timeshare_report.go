package vcsim

import (
	"fmt"
	"io"
	"strings"
)

// WriteTimeShareMarkdown writes per-VC tables (means over runs of each
// run's average / p95, hours; anomalies summed, VC-level anomalies counted
// in runs) and a system table for time-sharing results of several seeds.
func WriteTimeShareMarkdown(w io.Writer, rs []*TimeShareResult) error {
	if len(rs) == 0 {
		return fmt.Errorf("vcsim: no results")
	}
	n := float64(len(rs))
	h := func(f func(r *TimeShareResult) float64) string {
		t := 0.0
		for _, r := range rs {
			t += f(r)
		}
		return fmt.Sprintf("%.2f", t/n/3600)
	}
	var b strings.Builder
	b.WriteString("| VC | policy | quota GPUs | guaranteed jobs | private delay: avg / p95 (h) | shared delay: avg / p95 (h) | private JCT: avg / p95 (h) | shared JCT: avg / p95 (h) | anomalies: jobs, seeds | opportunistic JCT avg (h) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for v, vr := range rs[0].VCs {
		jobs, anom, seeds := 0, 0, 0
		for _, r := range rs {
			if len(r.VCs) != len(rs[0].VCs) || r.VCs[v].VC != vr.VC {
				return fmt.Errorf("vcsim: results of different clusters")
			}
			jobs += r.VCs[v].Guaranteed
			anom += r.VCs[v].AnomalyJobs
			if r.VCs[v].Anomaly {
				seeds++
			}
		}
		at := func(f func(x TimeShareVC) float64) func(r *TimeShareResult) float64 {
			return func(r *TimeShareResult) float64 { return f(r.VCs[v]) }
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s / %s | %s / %s | %s / %s | %s / %s | %d, %d of %d | %s |\n", vr.VC, vr.Policy, vr.QuotaGPUs, jobs,
			h(at(func(x TimeShareVC) float64 { return x.PrivateDelay.Avg })), h(at(func(x TimeShareVC) float64 { return x.PrivateDelay.P95 })),
			h(at(func(x TimeShareVC) float64 { return x.Delay.Avg })), h(at(func(x TimeShareVC) float64 { return x.Delay.P95 })),
			h(at(func(x TimeShareVC) float64 { return x.PrivateJCT.Avg })), h(at(func(x TimeShareVC) float64 { return x.PrivateJCT.P95 })),
			h(at(func(x TimeShareVC) float64 { return x.JCT.Avg })), h(at(func(x TimeShareVC) float64 { return x.JCT.P95 })),
			anom, seeds, len(rs), h(at(func(x TimeShareVC) float64 { return x.OppJCTS })))
	}
	util, opp := 0.0, 0.0
	pre, rst, rounds, regr := 0, 0, 0, 0
	for _, r := range rs {
		util += r.Utilization
		opp += r.OppShare
		pre += r.Preemptions
		rst += r.Restarts
		rounds += r.Rounds
		regr += r.Regrouped
	}
	b.WriteString("\n| GPU utilization (arrival window) | opportunistic share of GPU time | opportunistic jobs preempted by guaranteed | restarts (resumed or moved) | regrouped starts | rounds |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %.3f | %.3f | %d | %d | %d | %d |\n", util/n, opp/n, pre, rst, regr, rounds)
	_, err := io.WriteString(w, b.String())
	return err
}

package sim

import (
	"fmt"
	"io"
	"strings"
)

// CompareSummary aggregates comparisons over seeds: delays are means over
// seeds of each seed's average (or p95), anomaly counts and preemptions
// are totals.
type CompareSummary struct {
	Seeds int           `json:"seeds"`
	VCs   []VCSummary   `json:"vcs"`
	Cells SystemSummary `json:"cells"`
	Quota SystemSummary `json:"quota"`
}

// VCSummary is one VC over seeds.
type VCSummary struct {
	VC         string `json:"vc"`
	QuotaGPUs  int    `json:"quota_gpus"`
	Guaranteed int    `json:"guaranteed_jobs"`
	PrivateCells, PrivateQuota,
	Cells, Quota Delay
	CellsAnomalyJobs  int `json:"cells_anomaly_jobs"`
	QuotaAnomalyJobs  int `json:"quota_anomaly_jobs"`
	CellsAnomalySeeds int `json:"cells_anomaly_seeds"`
	QuotaAnomalySeeds int `json:"quota_anomaly_seeds"`
}

// SystemSummary is one system over seeds (means; counts total).
type SystemSummary struct {
	Utilization float64 `json:"utilization"`
	OppShare    float64 `json:"opportunistic_share"`
	Preemptions int     `json:"preemptions"`
	Stops       int     `json:"stops"`
}

// Summarize aggregates comparisons of the same cluster over seeds.
func Summarize(rs []*CompareResult) (CompareSummary, error) {
	s := CompareSummary{Seeds: len(rs)}
	if len(rs) == 0 {
		return s, nil
	}
	n := float64(len(rs))
	add := func(d *Delay, x Delay) { d.Avg += x.Avg / n; d.P95 += x.P95 / n; d.Max = max(d.Max, x.Max) }
	for _, v := range rs[0].VCs {
		s.VCs = append(s.VCs, VCSummary{VC: v.VC, QuotaGPUs: v.QuotaGPUs})
	}
	for _, r := range rs {
		if len(r.VCs) != len(s.VCs) {
			return s, fmt.Errorf("sim: comparisons of different clusters")
		}
		for i, v := range r.VCs {
			t := &s.VCs[i]
			if v.VC != t.VC {
				return s, fmt.Errorf("sim: comparisons of different clusters (%s vs %s)", v.VC, t.VC)
			}
			t.Guaranteed += v.Guaranteed
			add(&t.PrivateCells, v.PrivateCells)
			add(&t.PrivateQuota, v.PrivateQuota)
			add(&t.Cells, v.Cells)
			add(&t.Quota, v.Quota)
			t.CellsAnomalyJobs += v.CellsAnomalyJobs
			t.QuotaAnomalyJobs += v.QuotaAnomalyJobs
			if v.CellsAnomaly {
				t.CellsAnomalySeeds++
			}
			if v.QuotaAnomaly {
				t.QuotaAnomalySeeds++
			}
		}
		for _, p := range []struct {
			d *SystemSummary
			x System
		}{{&s.Cells, r.Cells}, {&s.Quota, r.Quota}} {
			p.d.Utilization += p.x.Utilization / n
			p.d.OppShare += p.x.OppShare / n
			p.d.Preemptions += p.x.Preemptions
			p.d.Stops += p.x.Stops
		}
	}
	return s, nil
}

func hours(s float64) string { return fmt.Sprintf("%.2f", s/3600) }

// WriteMarkdown prints the summary as two Markdown tables: per VC, then per
// system. Delays are in hours.
func WriteMarkdown(w io.Writer, s CompareSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| VC | quota GPUs | guaranteed jobs | private, cells logic: avg / p95 (h) | cells: avg / p95 (h) | cells anomalies: jobs, seeds | private, quota logic: avg / p95 (h) | quota-only: avg / p95 (h) | quota-only anomalies: jobs, seeds |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, v := range s.VCs {
		fmt.Fprintf(&b, "| %s | %d | %d | %s / %s | %s / %s | %d, %d of %d | %s / %s | %s / %s | %d, %d of %d |\n",
			v.VC, v.QuotaGPUs, v.Guaranteed,
			hours(v.PrivateCells.Avg), hours(v.PrivateCells.P95),
			hours(v.Cells.Avg), hours(v.Cells.P95), v.CellsAnomalyJobs, v.CellsAnomalySeeds, s.Seeds,
			hours(v.PrivateQuota.Avg), hours(v.PrivateQuota.P95),
			hours(v.Quota.Avg), hours(v.Quota.P95), v.QuotaAnomalyJobs, v.QuotaAnomalySeeds, s.Seeds)
	}
	fmt.Fprintf(&b, "\n| system | GPU utilization (arrival window) | opportunistic share of GPU time | preemptions (opportunistic, for guaranteed work) | jobs stopped (all plans) |\n|---|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| quota-only | %.3f | %.3f | %d | %d |\n", s.Quota.Utilization, s.Quota.OppShare, s.Quota.Preemptions, s.Quota.Stops)
	fmt.Fprintf(&b, "| cells | %.3f | %.3f | %d | %d |\n", s.Cells.Utilization, s.Cells.OppShare, s.Cells.Preemptions, s.Cells.Stops)
	_, err := io.WriteString(w, b.String())
	return err
}

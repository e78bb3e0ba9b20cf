// Package names is the registry of Gavel policy names: the canonical names,
// their aliases and Canonical. It is pure Go with no solver behind it, so
// that configuration parsing (hcl/) can check a policy name without linking
// the cgo LP solver; package policies binds each name to its solver and
// checks at init that the two lists agree.
package names

import (
	"fmt"
	"sort"
	"strings"
)

// canonical lists every policy a solver is defined for, sorted.
var canonical = []string{
	"allox",
	"dl2",
	"fifo",
	"fifo_packed",
	"fifo_perf",
	"finish_time_fairness",
	"finish_time_fairness_packed",
	"finish_time_fairness_perf",
	"gandiva",
	"gandiva_fair",
	"isolated",
	"max_min_fairness",
	"max_min_fairness_packed",
	"max_min_fairness_perf",
	"max_min_fairness_water_filling",
	"max_min_fairness_water_filling_packed",
	"max_min_fairness_water_filling_perf",
	"max_sum_throughput_normalized_by_cost_perf",
	"max_sum_throughput_normalized_by_cost_perf_SLOs",
	"max_sum_throughput_perf",
	"min_total_duration",
	"min_total_duration_packed",
	"min_total_duration_perf",
	"shortest_job_first",
	"shortest_job_first_perf",
}

// aliases are shorter names for common policies.
var aliases = map[string]string{
	"las":            "max_min_fairness_perf",
	"las_agnostic":   "max_min_fairness",
	"ftf":            "finish_time_fairness_perf",
	"makespan":       "min_total_duration_perf",
	"max_throughput": "max_sum_throughput_perf",
	"min_cost":       "max_sum_throughput_normalized_by_cost_perf",
	"min_cost_slo":   "max_sum_throughput_normalized_by_cost_perf_SLOs",
	"hierarchical":   "max_min_fairness_water_filling_perf",
	// Shortest remaining time first: shortest_job_first orders by remaining
	// steps over the fastest type's throughput, re-ordered at every
	// recompute (arrival, completion).
	"srtf": "shortest_job_first_perf",
	"sjf":  "shortest_job_first_perf",
}

// Names lists every canonical policy name (aliases excluded), sorted.
func Names() []string { return append([]string(nil), canonical...) }

// Aliases maps each alias to its canonical name (a copy).
func Aliases() map[string]string {
	out := make(map[string]string, len(aliases))
	for a, c := range aliases {
		out[a] = c
	}
	return out
}

// IsCanonical reports whether name is a canonical policy name.
func IsCanonical(name string) bool {
	i := sort.SearchStrings(canonical, name)
	return i < len(canonical) && canonical[i] == name
}

// Canonical resolves an alias; it returns an error for an unknown name.
func Canonical(name string) (string, error) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	if !IsCanonical(name) {
		return "", fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(canonical, ", "))
	}
	return name, nil
}

// Packs reports whether a policy (a canonical name or an alias) colocates
// jobs in pairs on one GPU (space sharing): the *_packed policies and
// Gandiva. An unknown name does not.
func Packs(name string) bool {
	c, err := Canonical(name)
	return err == nil && (strings.HasSuffix(c, "_packed") || c == "gandiva")
}

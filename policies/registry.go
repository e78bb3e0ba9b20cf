package policies

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// solverFunc solves one policy on a validated instance.
type solverFunc func(in *instance, p *Problem) (*Allocation, error)

var registry = map[string]solverFunc{}

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
}

func define(name string, f solverFunc) {
	if _, dup := registry[name]; dup {
		panic("policies: defined twice: " + name)
	}
	registry[name] = f
}

// Names lists every policy name (aliases excluded), sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Canonical resolves an alias; it returns an error for an unknown name.
func Canonical(name string) (string, error) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	if _, ok := registry[name]; !ok {
		return "", fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return name, nil
}

// Solve validates the problem and runs the named policy.
func Solve(name string, p *Problem) (*Allocation, error) {
	canon, err := Canonical(name)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	in := newInstance(p)
	var a *Allocation
	if in.n() == 0 {
		a = newAllocation(canon, in)
	} else {
		a, err = registry[canon](in, p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", canon, err)
		}
	}
	a.Policy = canon
	a.finish(in)
	a.SolveMS = float64(time.Since(start).Microseconds()) / 1000
	return a, nil
}

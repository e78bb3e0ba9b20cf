package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sizer"
	"github.com/rondo-sched/rondo/policies/dl2"
)

// dl2Policy is the learned sizer's policy name; the baselines are
// dl2.Baselines()'s names.
const dl2Policy = "dl2"

// sizerNames are the policies that size two-role elastic jobs, sorted.
func sizerNames() []string {
	out := []string{dl2Policy}
	for n := range dl2.Baselines() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// dl2Sizer is the sizer a policy names: "dl2", the learned one, with the
// model of modelFile (""; no model: DRF in its place, logged once by the
// sizer through logf), or a baseline (drf, fifo, optimus, srtf, tetris).
// An unknown name is an error listing the valid ones.
func dl2Sizer(policy, modelFile string, logf func(string, ...any)) (dl2.Sizer, error) {
	if policy == dl2Policy {
		var m *dl2.Model
		if modelFile != "" {
			var err error
			if m, err = dl2.LoadModel(modelFile); err != nil {
				return nil, err
			}
		}
		return dl2.NewPolicy(m, logf), nil
	}
	if sz, ok := dl2.Baselines()[policy]; ok {
		return sz, nil
	}
	return nil, fmt.Errorf("unknown sizing policy %q (known: %s)", policy, strings.Join(sizerNames(), ", "))
}

// sizerMechanism is the round mechanism of a sizing policy
// (allocator/sizer) over the whole cluster, as `rondo simulate
// --trace-format dl2` and the agent (a "dl2" VC) run it: servers' CPUs
// from their nodes' cores, else cpus; the sizers' speed model is models'.
func sizerMechanism(sz dl2.Sizer, models dl2.Models, cpus int) (*round.Single, error) {
	m, err := sizer.New(sizer.Options{Sizer: sz, Speed: models.Speed(), CPUsPerServer: cpus})
	if err != nil {
		return nil, err
	}
	return &round.Single{Mechanism: m}, nil
}

package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sizer"
	rhcl "github.com/rondo-sched/rondo/hcl"
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
// model of modelFile ("": the shipped model, dl2.DefaultModel; a model
// that cannot be used: DRF in its place, logged once by the sizer through
// logf), or a baseline (drf, fifo, optimus, srtf, tetris).
// An unknown name is an error listing the valid ones.
func dl2Sizer(policy, modelFile string, logf func(string, ...any)) (dl2.Sizer, error) {
	if policy == dl2Policy {
		var m *dl2.Model
		var err error
		if modelFile != "" {
			if m, err = dl2.LoadModel(modelFile); err != nil {
				return nil, err
			}
		} else if m, err = dl2.DefaultModel(); err != nil {
			logf("%v", err)
			m = nil
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

// isDL2 reports whether a VC runs DL2's sizing (policy "dl2").
func isDL2(v rhcl.VC) bool { return v.IsDL2() }

// ownMechanism reports whether a VC runs a mechanism of its own instead
// of Gavel's engine: gandiva_fair (allocator/fair) or dl2 (allocator/sizer).
func ownMechanism(v rhcl.VC) bool { return v.GandivaFair() || isDL2(v) }

// vcSizer is a dl2 VC's sizer as its dl2 block says (rhcl.VC.DL2Sizer):
// the learned sizer (the default) with the block's model file, else the
// shipped model; or the baseline the block names. A model file that
// cannot be read or used is an error at the model value's file:line:col
// naming the file, never a fallback to another sizer.
func vcSizer(v rhcl.VC, logf func(string, ...any)) (dl2.Sizer, error) {
	name, model := v.DL2Sizer()
	if name != rhcl.DL2Learned {
		return dl2Sizer(name, "", logf)
	}
	sz, err := dl2Sizer(dl2Policy, model, logf)
	if err != nil {
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid dl2 model",
			Detail: fmt.Sprintf("vc %q: dl2: model: %v", v.Name, err)}
		if v.DL2 != nil && v.DL2.ModelRange != (hcl.Range{}) {
			d.Subject = v.DL2.ModelRange.Ptr()
		}
		return nil, errors.New(rhcl.FormatDiagnostic(d))
	}
	return sz, nil
}

// checkVCSizers loads every dl2 VC's sizer (vcSizer: its model file
// read and checked), so that a config naming a missing or corrupt model
// fails where it is loaded: the agent's start and reload, `rondo simulate
// --vc-config`, `rondo config validate`. One line per VC at fault.
func checkVCSizers(cfg *rhcl.Config) error {
	var errs []error
	for _, v := range cfg.VCs {
		if !isDL2(v) {
			continue
		}
		if _, err := vcSizer(v, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dl2Key is what a VC's sizer is built from, for the agent's deciderKey:
// its sizer, model file and the file's content ("" for other VCs).
func dl2Key(v rhcl.VC) string {
	if !isDL2(v) {
		return ""
	}
	name, model := v.DL2Sizer()
	k := fmt.Sprintf(" dl2 %q %q", name, model)
	if model != "" {
		// The file's content: an edited model rebuilds the decider.
		if data, err := os.ReadFile(model); err == nil {
			k += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
	}
	return k
}

// vcMechanism is a VC's mechanism when it is not the engine: a
// gandiva_fair VC's (fairMechanism) or a dl2 VC's (allocator/sizer with
// the sizer of its dl2 block, vcSizer: by default the learned one with the
// shipped model); nil for any other VC. Servers' CPUs are their nodes'
// cores (else sizer.DefaultCPUsPerServer) and the sizers' speed model
// DL2's Table 1. The agent and `rondo simulate --vc-config` both build a
// VC's mechanism here.
func vcMechanism(v rhcl.VC, roundS float64, reset bool, warn func(msg string, args ...any)) (round.Mechanism, error) {
	if !isDL2(v) {
		return fairMechanism(v, roundS, reset)
	}
	logf := func(format string, args ...any) { warn(fmt.Sprintf(format, args...), "vc", v.Name) }
	sz, err := vcSizer(v, logf)
	if err != nil {
		return nil, err
	}
	m, err := sizer.New(sizer.Options{Sizer: sz, Speed: dl2.Table1().Speed()})
	if err != nil {
		return nil, err
	}
	return m, nil
}

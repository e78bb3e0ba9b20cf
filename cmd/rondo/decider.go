package main

import (
	"strings"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/synergy"
	rhcl "github.com/rondo-sched/rondo/hcl"
	"github.com/rondo-sched/rondo/policies"
	"github.com/rondo-sched/rondo/policies/names"
)

// vcDecider is the per-VC decider a cluster config declares. `rondo agent`
// and `rondo simulate --vc-config` both build it here, so that what the
// simulator runs is what the agent runs: with quota-only VCs (gpus shares,
// no cells), per-VC engines each on at most its share of the cluster
// (round.Quota); with cells and VCs, per-VC engines (each VC's policy) over
// the cell layer, cells mapped to nodes by nomad_node(s) or by node
// pool/class (round.Cells). Opportunistic jobs run under the default VC policy
// on what the VCs leave free. Each engine gets its VC's entities and its
// preemption that respects the work (min_runtime, checkpoint_aware,
// reserve_after: the VC's, else the top level's; the opportunistic
// engine the top level's); reset:
// every engine recomputes at its first round (a reload). Nil, without
// error, when the config declares neither: one engine for the whole
// cluster.
func vcDecider(cfg *rhcl.Config, roundS float64, reset bool, warn func(msg string, args ...any)) (agent.Decider, error) {
	var entities []map[string]policies.Entity
	for _, v := range cfg.VCs {
		entities = append(entities, vcEntities(v))
	}
	if cfg.QuotaOnly() {
		var qs []round.QuotaVC
		for i, v := range cfg.VCs {
			m, err := vcMechanism(v, roundS, reset, warn)
			if err != nil {
				return nil, err
			}
			qs = append(qs, round.QuotaVC{Name: v.Name, Policy: v.Policy, GPUs: v.GPUs, Entities: entities[i],
				NoSpaceSharing: !v.SpaceSharing, Mechanism: m, Preemption: preemptionOf(cfg, v.Name)})
		}
		q, err := round.NewQuotaPreempt(qs, rhcl.DefaultVCPolicy, preemptionOf(cfg, ""), roundS, reset, warn)
		if err != nil {
			return nil, err
		}
		return q, nil
	}
	if !cfg.CellVCs() {
		return nil, nil
	}
	var sels []round.Selector
	for _, c := range cfg.Cells {
		sel := round.Selector{Cell: c.Name, Nodes: c.NomadNodes, Pool: c.NodePool, Class: c.NodeClass}
		if c.NomadNode != "" {
			sel.Nodes = []string{c.NomadNode}
		}
		sels = append(sels, sel)
	}
	var pols []string
	var mechs []round.Mechanism
	var pres []round.Preemption
	for _, v := range cfg.VCs {
		p := v.Policy
		if p == "" {
			p = rhcl.DefaultVCPolicy
		}
		pols = append(pols, p)
		pres = append(pres, preemptionOf(cfg, v.Name))
		m, err := vcMechanism(v, roundS, reset, warn)
		if err != nil {
			return nil, err
		}
		mechs = append(mechs, m)
	}
	noSharing := map[string]bool{}
	for _, v := range cfg.VCs {
		noSharing[v.Name] = !v.SpaceSharing
	}
	cc := round.CellsConfig{Spec: specFromConfig(cfg), Selectors: sels, Policies: pols,
		OppPolicy: rhcl.DefaultVCPolicy, RoundS: roundS, Entities: entities, ResetFirst: reset, Warn: warn,
		NoSpaceSharing: noSharing, Mechanisms: mechs, Preemption: pres, OppPreemption: preemptionOf(cfg, "")}
	if len(cfg.FromTopology) > 0 {
		// Cells derived from the observed nodes' topology every round,
		// beside the written ones (round.TopoCells).
		var from []round.TopoSelector
		for _, f := range cfg.FromTopology {
			from = append(from, round.TopoSelector{Pool: f.NodePool, Class: f.NodeClass})
		}
		return round.NewTopoCells(cc, from), nil
	}
	v, err := round.NewCells(cc)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// preemptionOf is the preemption that respects the work of a VC's engine
// (vc "": the opportunistic engine's, the top level's), as the round
// takes it.
func preemptionOf(cfg *rhcl.Config, vc string) round.Preemption {
	p := cfg.PreemptionOf(vc)
	return round.Preemption{MinRuntimeS: p.MinRuntime.Seconds(), CheckpointAware: p.CheckpointAware,
		ReserveAfterS: p.ReserveAfter.Seconds()}
}

// singlePreemption is the single engine's (a config without VC shares
// or cells): its first VC's, as it takes that VC's policy and entities,
// else the top level's.
func singlePreemption(cfg *rhcl.Config) round.Preemption {
	if len(cfg.VCs) > 0 {
		return preemptionOf(cfg, cfg.VCs[0].Name)
	}
	return preemptionOf(cfg, "")
}

// vcEntities is a VC's entity blocks as the hierarchical policies take them
// (nil: none): an entity runs FIFO inside when its policy is a fifo*
// policy, weighted fairness for any other (the two the hierarchical policy
// runs inside an entity).
func vcEntities(v rhcl.VC) map[string]policies.Entity {
	if len(v.Entities) == 0 {
		return nil
	}
	out := make(map[string]policies.Entity, len(v.Entities))
	for _, e := range v.Entities {
		inside := "fairness"
		if c, err := policies.Canonical(e.Policy); err == nil && strings.HasPrefix(c, "fifo") {
			inside = "fifo"
		}
		out[e.Name] = policies.Entity{Weight: e.Weight, Policy: inside}
	}
	return out
}

// shareGroup is the Nomad backend's ShareGroup for a config (space
// sharing): which jobs the round may be offered as pairs. Jobs of one VC
// (quota-only or of cells) whose policy packs and whose space_sharing is
// on share among themselves; opportunistic jobs among themselves when
// their policy packs; without VC shares or cells, every job when the
// cluster's policy packs and the VC (if declared) allows it. nil: no
// pairs at all. The deciders filter the pairs the same way (round.Quota,
// round.Cells), so the simulator, which offers every pair, decides alike.
func shareGroup(cfg *rhcl.Config, policy string) func(vc string, opportunistic bool) (string, bool) {
	switch {
	case cfg.QuotaOnly() || cfg.CellVCs():
		ok := map[string]bool{}
		any := names.Packs(rhcl.DefaultVCPolicy)
		for _, v := range cfg.VCs {
			ok[v.Name] = v.SpaceSharing && names.Packs(v.Policy)
			any = any || ok[v.Name]
		}
		if !any {
			return nil
		}
		return func(vc string, opp bool) (string, bool) {
			if opp {
				return "", names.Packs(rhcl.DefaultVCPolicy)
			}
			return vc, ok[vc]
		}
	case !names.Packs(policy) || (len(cfg.VCs) > 0 && !cfg.VCs[0].SpaceSharing):
		return nil
	}
	return func(string, bool) (string, bool) { return "", true }
}

// withPlacement puts the CPU and memory placement stage around d when the
// config sets a placement (top level or per VC); d as it is otherwise. The
// profiles are the config's file, else the embedded ones.
func withPlacement(cfg *rhcl.Config, d agent.Decider, warn func(msg string, args ...any)) (agent.Decider, error) {
	if !cfg.Placing() {
		return d, nil
	}
	st, err := placementStage(cfg)
	if err != nil {
		return nil, err
	}
	st.Next = d
	st.Warn = func(job, msg string) { warn("placement: job "+job+": "+msg, "job", job) }
	return st, nil
}

// placementStage is the stage a config asks for, without its decider.
func placementStage(cfg *rhcl.Config) (*placement.Stage, error) {
	tb, err := profileTable(cfg)
	if err != nil {
		return nil, err
	}
	// One engine for the whole cluster: the stage may re-pick starting
	// jobs' GPUs; with VCs their quota partitions or cells own them. A
	// kept job regrows to its best case when that saves more than a
	// restart's order of magnitude (placement.DefaultRetuneCostS).
	st := &placement.Stage{Profiles: tb, Options: placement.Options{Leftover: true, Choose: !cfg.QuotaOnly() && !cfg.CellVCs(),
		Regrow: true, RetuneCostS: placement.DefaultRetuneCostS},
		Mode: func(vc string) placement.Mode { return placement.Mode(cfg.PlacementOf(vc)) }}
	if cfg.LearnProfiles {
		st.Learn = &placement.Learning{}
	}
	return st, nil
}

// profileTable is the config's profile file, else the embedded profiles.
func profileTable(cfg *rhcl.Config) (*synergy.Table, error) {
	if cfg.Profiles == "" {
		return synergy.Default(), nil
	}
	return synergy.Load(cfg.Profiles)
}

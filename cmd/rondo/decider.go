package main

import (
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/vcnomad"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// vcDecider is the per-VC decider a cluster config declares. `rondo agent`
// and `rondo simulate --vc-config` both build it here, so that what the
// simulator runs is what the agent runs: with quota-only VCs (gpus shares,
// no cells), per-VC engines each on at most its share of the cluster
// (round.Quota); with cells and VCs, per-VC engines (each VC's policy) over
// the cell layer, cells mapped to nodes by nomad_node(s) or by node
// pool/class (vcnomad). Opportunistic jobs run under the default VC policy
// on what the VCs leave free. Nil, without error, when the config declares
// neither: one engine for the whole cluster.
func vcDecider(cfg *rhcl.Config, roundS float64, warn func(msg string, args ...any)) (agent.Decider, error) {
	if cfg.QuotaOnly() {
		var qs []round.QuotaVC
		for _, v := range cfg.VCs {
			qs = append(qs, round.QuotaVC{Name: v.Name, Policy: v.Policy, GPUs: v.GPUs})
		}
		return round.NewQuota(qs, rhcl.DefaultVCPolicy, roundS, warn)
	}
	if len(cfg.Cells) == 0 || len(cfg.VCs) == 0 {
		return nil, nil
	}
	var sels []vcnomad.Selector
	for _, c := range cfg.Cells {
		sel := vcnomad.Selector{Cell: c.Name, Nodes: c.NomadNodes, Pool: c.NodePool, Class: c.NodeClass}
		if c.NomadNode != "" {
			sel.Nodes = []string{c.NomadNode}
		}
		sels = append(sels, sel)
	}
	var pols []string
	for _, v := range cfg.VCs {
		p := v.Policy
		if p == "" {
			p = rhcl.DefaultVCPolicy
		}
		pols = append(pols, p)
	}
	return vcnomad.New(vcnomad.Config{Spec: specFromConfig(cfg), Selectors: sels, Policies: pols,
		OppPolicy: rhcl.DefaultVCPolicy, RoundS: roundS, Warn: warn})
}

package preflight

import (
	"context"
	"errors"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/state"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// Options says what the agent will run with.
type Options struct {
	// Pool is the agent's GPU node pool (default rnomad.DefaultPool).
	Pool string
	// Namespaces the agent manages (default "default").
	Namespaces []string
	// StatePath is the durable state's variable path (default
	// state.DefaultPath); Namespaces[0] holds it.
	StatePath string
	// TypeOf maps a device group to Rondo's GPU type (default
	// rnomad.DeviceType without gpu_type blocks): what the agent's Observe
	// uses.
	TypeOf func(*api.NodeDeviceResource) string
}

// Run checks the cluster c reaches against cfg: the token and its
// capabilities (probed unless ACLs are off), the nodes and GPUs the cells
// name, the GPU clients' plugin, and preemption.
func Run(ctx context.Context, c *api.Client, cfg *rhcl.Config, o Options) []Finding {
	if o.Pool == "" {
		o.Pool = rnomad.DefaultPool
	}
	if len(o.Namespaces) == 0 {
		o.Namespaces = []string{""}
	}
	for i, ns := range o.Namespaces {
		if ns == "" {
			o.Namespaces[i] = "default" // as Nomad reads an unset namespace
		}
	}
	if o.StatePath == "" {
		o.StatePath = state.DefaultPath
	}
	if o.TypeOf == nil {
		o.TypeOf = func(d *api.NodeDeviceResource) string { return rnomad.DeviceType(d, nil) }
	}
	q := (&api.QueryOptions{}).WithContext(ctx)
	var out []Finding
	self, _, err := c.ACLTokens().Self(q)
	tok := TokenOf(self, err)
	out = append(out, CheckToken(tok))
	if tok.Err != nil && rnomad.Forbidden(tok.Err) {
		return out // every other request would be refused too
	}

	stubs, _, nerr := c.Nodes().List(&api.QueryOptions{Params: map[string]string{"resources": "true"}})
	if nerr != nil {
		out = append(out, fail("nodes", "listing the nodes: %v", nerr))
	} else {
		nodes := Nodes(stubs, o.TypeOf)
		pools := GPUPools(cfg, o.Pool)
		out = append(out, CheckCells(cfg, nodes, pools)...)
		out = append(out, CheckGPUs(cfg, nodes, pools)...)
	}

	sched, _, serr := c.Operator().SchedulerGetConfiguration(q)
	if !tok.Disabled {
		var probes []Probe
		for _, ns := range o.Namespaces {
			probes = append(probes, ProbeNamespace(ctx, c, ns)...)
		}
		probes = append(probes, ProbeVariables(ctx, c, o.Namespaces[0], o.StatePath)...)
		probes = append(probes,
			Probe{Capability: "node read", Scope: "node", Why: "observing the GPU clients", Err: allowed(nerr)},
			Probe{Capability: "operator read", Scope: "operator", Why: "checking that preemption is on", Err: allowed(serr)})
		out = append(out, CheckProbes(probes)...)
	}
	var conf *api.SchedulerConfiguration
	if sched != nil {
		conf = sched.SchedulerConfig
	}
	if serr == nil && conf == nil {
		serr = errors.New("nomad returned no scheduler configuration")
	}
	return append(out, CheckPreemption(conf, serr))
}

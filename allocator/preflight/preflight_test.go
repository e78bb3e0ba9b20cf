package preflight

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// stub is a node as Nodes().List with resources=true lists it: GPUs of
// one model from nomad-device-rondo (rondo) or another plugin.
func stub(name, pool, class, model string, gpus, unhealthy int, rondo bool) *api.NodeListStub {
	d := &api.NodeDeviceResource{Vendor: "nvidia", Type: "gpu", Name: model, Attributes: map[string]*api.Attribute{}}
	if rondo {
		v := "board,pcie-switch,system"
		d.Attributes["topology_levels"] = &api.Attribute{StringVal: &v}
	}
	for i := 0; i < gpus; i++ {
		d.Instances = append(d.Instances, &api.NodeDevice{ID: name + "-gpu" + string(rune('0'+i)), Healthy: i >= unhealthy})
	}
	return &api.NodeListStub{ID: name + "-id", Name: name, NodePool: pool, NodeClass: class, Status: "ready",
		SchedulingEligibility: "eligible", NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{d}}}
}

func parse(t *testing.T, src string) *rhcl.Config {
	t.Helper()
	cfg, diags := rhcl.Parse(rhcl.Source{Name: "cluster.hcl", Src: []byte(src)})
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	return cfg
}

const cellsHCL = `
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 2
  node  = true
}
cell "v100-node" "a" {
  nomad_node = "v100-a"
}
cell "v100-node" "e" {
  node_pool  = "gpu-east"
  node_class = "dgx"
}
vc "research" {
  quota = { "v100-node" = 2 }
}
`

// levels returns the findings of a level, as text.
func levels(fs []Finding, l Level) []string {
	var out []string
	for _, f := range fs {
		if f.Level == l {
			out = append(out, f.String())
		}
	}
	return out
}

func has(t *testing.T, fs []Finding, l Level, words ...string) {
	t.Helper()
	for _, f := range fs {
		if f.Level != l {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(f.String(), w)
		}
		if all {
			return
		}
	}
	var lines []string
	for _, f := range fs {
		lines = append(lines, f.String())
	}
	t.Errorf("no %s finding with %q in:\n%s", l, words, strings.Join(lines, "\n"))
}

func TestNodesReadsDevices(t *testing.T) {
	ns := Nodes([]*api.NodeListStub{stub("b", "rondo", "", "Tesla K80", 2, 1, false), stub("a", "rondo", "", "Tesla V100-SXM2-16GB", 2, 0, true)}, deviceType)
	if len(ns) != 2 || ns[0].Name != "a" {
		t.Fatalf("nodes %+v", ns)
	}
	if g := ns[0].GPUs[0]; g.Type != "v100" || g.Instances != 2 || g.Unhealthy != 0 || !g.Rondo || !ns[0].Ready {
		t.Errorf("a: %+v", ns[0])
	}
	if g := ns[1].GPUs[0]; g.Type != "k80" || g.Unhealthy != 1 || g.Rondo {
		t.Errorf("b: %+v", g)
	}
}

func TestCheckCells(t *testing.T) {
	cfg := parse(t, cellsHCL)
	pools := GPUPools(cfg, "rondo")
	if strings.Join(pools, ",") != "rondo,gpu-east" {
		t.Fatalf("pools %v", pools)
	}
	good := Nodes([]*api.NodeListStub{
		stub("v100-a", "rondo", "", "Tesla V100-SXM2-16GB", 2, 0, true),
		stub("e1", "gpu-east", "dgx", "Tesla V100-SXM2-16GB", 2, 0, true),
	}, deviceType)
	fs := CheckCells(cfg, good, pools)
	if e := append(levels(fs, Error), levels(fs, Warning)...); len(e) > 0 || len(fs) != 2 {
		t.Fatalf("a good cluster: %v", fs)
	}
	has(t, fs, OK, `cell "v100-node" "a" (cluster.hcl:`, "v100-a (2 v100)")

	// The named node missing, the selector's pool and class missing.
	fs = CheckCells(cfg, Nodes([]*api.NodeListStub{stub("v100-b", "rondo", "", "Tesla V100-SXM2-16GB", 2, 0, true)}, deviceType), pools)
	has(t, fs, Error, `nomad_node "v100-a": no such node`, "v100-b")
	has(t, fs, Error, `node_pool "gpu-east" node_class "dgx" matches no node`, `no node is in pool "gpu-east"`, `no node has class "dgx"`)

	// Wrong GPU type; a node outside the GPU pools; a short node.
	fs = CheckCells(cfg, Nodes([]*api.NodeListStub{
		stub("v100-a", "rondo", "", "Tesla K80", 2, 0, true),
		stub("e1", "gpu-east", "dgx", "Tesla V100-SXM2-16GB", 1, 0, true),
	}, deviceType), pools)
	has(t, fs, Error, `node "v100-a" has no GPU of type "v100"`, "2 k80 (Tesla K80)")
	has(t, fs, Warning, `node "e1" has 1 v100 GPUs, its cell needs 2`)
	fs = CheckCells(cfg, Nodes([]*api.NodeListStub{stub("v100-a", "default", "", "Tesla V100-SXM2-16GB", 2, 0, true)}, deviceType), pools)
	has(t, fs, Error, `node "v100-a" is in node pool "default", not a GPU pool`)
}

func TestCheckCellsFromTopology(t *testing.T) {
	cfg := parse(t, `
cells_from_topology {
  node_pool = "boxes"
}
vc "a" {
  quota = {}
}
`)
	pools := GPUPools(cfg, "rondo")
	fs := CheckCells(cfg, Nodes([]*api.NodeListStub{stub("box", "boxes", "", "Tesla V100-SXM2-16GB", 4, 0, false)}, deviceType), pools)
	has(t, fs, Error, "cells_from_topology", "box", "without nomad-device-rondo's topology")
	fs = CheckCells(cfg, Nodes([]*api.NodeListStub{stub("box", "boxes", "", "Tesla V100-SXM2-16GB", 4, 0, true)}, deviceType), pools)
	has(t, fs, OK, `node_pool "boxes" matches box`)
}

func TestCheckGPUs(t *testing.T) {
	cfg := parse(t, `
vc "a" {
  gpus = { v100 = 2, a100 = 1 }
}
vc "b" {
  gpus = { v100 = 2 }
}
`)
	nodes := Nodes([]*api.NodeListStub{
		stub("v100-a", "rondo", "", "Tesla V100-SXM2-16GB", 2, 0, true),
		stub("k80-a", "rondo", "", "Tesla K80", 2, 1, true),
		stub("other", "rondo", "", "NVIDIA L4", 1, 0, false),
		{ID: "cpu", Name: "cpu-0", NodePool: "rondo", Status: "ready", SchedulingEligibility: "eligible"},
		{ID: "web", Name: "web-0", NodePool: "default", Status: "ready", SchedulingEligibility: "eligible"},
	}, deviceType)
	fs := CheckGPUs(cfg, nodes, []string{"rondo", "east"})
	has(t, fs, OK, `node "v100-a" (pool "rondo")`, "2 v100 (Tesla V100-SXM2-16GB) from nomad-device-rondo")
	has(t, fs, Warning, `node "k80-a"`, "1 of 2 k80 GPUs are unhealthy")
	has(t, fs, Warning, `node "other"`, "another device plugin")
	has(t, fs, Error, `node "cpu-0" (pool "rondo") has no nvidia/gpu devices`, "nomad-device-rondo")
	has(t, fs, Warning, `no node is in GPU pool "east"`)
	has(t, fs, OK, "healthy GPUs of the GPU pools: 1 k80, 1 l4, 2 v100")
	has(t, fs, Error, `vc "a" (cluster.hcl:3) asks for 1 "a100" GPUs`)
	has(t, fs, Warning, "the VCs ask for 4 v100 GPUs in all, the cluster has 2")
	for _, f := range fs {
		if strings.Contains(f.Msg, "web-0") {
			t.Errorf("a node outside the GPU pools is checked: %s", f)
		}
	}
	fs = CheckGPUs(parse(t, `vc "a" {}`), nil, []string{"rondo"})
	has(t, fs, Error, "no healthy GPU on a ready node")
}

func TestCheckACL(t *testing.T) {
	if f := CheckToken(TokenOf(&api.ACLToken{AccessorID: "acls-disabled"}, nil)); f.Level != Warning || !strings.Contains(f.Msg, "ACLs are disabled") {
		t.Errorf("ACLs off: %s", f)
	}
	if f := CheckToken(TokenOf(nil, errors.New("Unexpected response code: 400 (ACL support disabled)"))); f.Level != Warning {
		t.Errorf("ACLs off (old Nomad): %s", f)
	}
	if f := CheckToken(TokenOf(nil, errors.New("Unexpected response code: 403 (ACL token not found)"))); f.Level != Error || !strings.Contains(f.Msg, "NOMAD_TOKEN") {
		t.Errorf("unknown token: %s", f)
	}
	if f := CheckToken(TokenOf(&api.ACLToken{Name: "root", Type: "management"}, nil)); f.Level != Warning || !strings.Contains(f.Msg, PolicyFile) {
		t.Errorf("management: %s", f)
	}
	if f := CheckToken(TokenOf(&api.ACLToken{Name: "rondo-allocator", Type: "client", Policies: []string{"rondo-allocator"}}, nil)); f.Level != OK ||
		!strings.Contains(f.Msg, `"rondo-allocator" (client, policies rondo-allocator`) {
		t.Errorf("client: %s", f)
	}
	fs := CheckProbes([]Probe{
		{Capability: "list-jobs", Scope: `namespace "default"`},
		{Capability: "submit-job", Scope: `namespace "default"`, Why: "admitting jobs", Err: errors.New("Unexpected response code: 403 (Permission denied)")},
		{Capability: "operator read", Scope: "operator", Err: errors.New("connection refused")},
	})
	has(t, fs, OK, `token may list-jobs in namespace "default"`)
	has(t, fs, Error, `token lacks submit-job in namespace "default" (admitting jobs)`, PolicyFile)
	has(t, fs, Warning, "could not check operator read", "connection refused")
}

func TestAllowed(t *testing.T) {
	for _, c := range []struct {
		err  error
		pass bool
	}{
		{nil, true},
		{errors.New("Unexpected response code: 404 (job not found)"), true},
		{errors.New("Unexpected response code: 500 (Enforcing job modify index 1099511627776: job does not exist)"), true},
		{api.ErrCASConflict{CheckIndex: 1, Conflict: &api.Variable{}}, true},
		{errors.New("Unexpected response code: 403 (Permission denied)"), false},
		{errors.New("dial tcp: connection refused"), false},
	} {
		if got := allowed(c.err) == nil; got != c.pass {
			t.Errorf("allowed(%v) passes %v, want %v", c.err, got, c.pass)
		}
	}
}

func TestCheckPreemption(t *testing.T) {
	on := &api.SchedulerConfiguration{PreemptionConfig: api.PreemptionConfig{BatchSchedulerEnabled: true, ServiceSchedulerEnabled: true}}
	if f := CheckPreemption(on, nil); f.Level != OK {
		t.Errorf("on: %s", f)
	}
	half := &api.SchedulerConfiguration{PreemptionConfig: api.PreemptionConfig{BatchSchedulerEnabled: true}}
	if f := CheckPreemption(half, nil); f.Level != Error || !strings.Contains(f.Msg, "off for service jobs") || !strings.Contains(f.Msg, rnomad.EnablePreemption) {
		t.Errorf("service off: %s", f)
	}
	if f := CheckPreemption(&api.SchedulerConfiguration{}, nil); !strings.Contains(f.Msg, "off for batch and service jobs") {
		t.Errorf("off: %s", f)
	}
	if f := CheckPreemption(nil, errors.New("Unexpected response code: 403 (Permission denied)")); f.Level != Warning || !strings.Contains(f.Msg, "operator read") {
		t.Errorf("forbidden: %s", f)
	}
}

func deviceType(d *api.NodeDeviceResource) string { return rnomad.DeviceType(d, nil) }

package preflight

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/nomad/api"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// Node is what the checks read of a Nomad node.
type Node struct {
	ID, Name, Pool, Class string
	// Status and Eligibility as Nomad reports them; Ready when "ready"
	// and "eligible" (the agent observes only those).
	Status, Eligibility string
	Ready               bool
	GPUs                []GPUGroup
}

// GPUGroup is one nvidia/gpu device group of a node (one per model).
type GPUGroup struct {
	Model string
	// Type is Rondo's GPU type for Model (Options.TypeOf).
	Type                 string
	Instances, Unhealthy int
	// Rondo: the group carries nomad-device-rondo's topology attribute
	// (topology_levels), which the official plugin does not write.
	Rondo bool
}

// Types counts the node's GPUs per type.
func (n Node) Types() map[string]int {
	out := map[string]int{}
	for _, g := range n.GPUs {
		out[g.Type] += g.Instances
	}
	return out
}

// Nodes reads node stubs listed with resources (Nodes().List with
// resources=true) into Nodes, each GPU model's type from typeOf.
func Nodes(stubs []*api.NodeListStub, typeOf func(*api.NodeDeviceResource) string) []Node {
	var out []Node
	for _, s := range stubs {
		n := Node{ID: s.ID, Name: s.Name, Pool: s.NodePool, Class: s.NodeClass, Status: s.Status,
			Eligibility: s.SchedulingEligibility, Ready: s.Status == "ready" && s.SchedulingEligibility == "eligible"}
		if s.NodeResources != nil {
			for _, d := range s.NodeResources.Devices {
				if d == nil || d.Vendor != "nvidia" || d.Type != "gpu" {
					continue
				}
				g := GPUGroup{Model: d.Name, Type: typeOf(d), Instances: len(d.Instances)}
				for _, in := range d.Instances {
					if !in.Healthy {
						g.Unhealthy++
					}
				}
				_, g.Rondo = d.Attributes["topology_levels"]
				n.GPUs = append(n.GPUs, g)
			}
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GPUPools are the node pools whose GPUs the agent observes: its own pool
// and those cells select (node_pool, cells_from_topology).
func GPUPools(cfg *rhcl.Config, pool string) []string {
	out := []string{pool}
	for _, c := range cfg.Cells {
		if c.NodePool != "" && !slices.Contains(out, c.NodePool) {
			out = append(out, c.NodePool)
		}
	}
	for _, f := range cfg.FromTopology {
		if f.NodePool != "" && !slices.Contains(out, f.NodePool) {
			out = append(out, f.NodePool)
		}
	}
	return out
}

func pos(r hcl.Range) string {
	if r.Filename == "" {
		return "?"
	}
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

func typesText(types map[string]int) string {
	if len(types) == 0 {
		return "none"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(types)) {
		parts = append(parts, fmt.Sprintf("%d %s", types[t], t))
	}
	return strings.Join(parts, ", ")
}

// CheckCells checks that the nodes, node pools and node classes the
// config's cells name exist, that each cell's nodes are in a GPU pool and
// have GPUs of the cell's leaf type (derived from the plugin's model names)
// and how many (a missing GPU is a bad leaf: a warning), and that nodes
// for cells_from_topology exist and carry the plugin's topology.
func CheckCells(cfg *rhcl.Config, nodes []Node, pools []string) []Finding {
	var out []Finding
	tree := rhcl.NewTypeTree(cfg.CellTypes)
	byName := map[string]Node{}
	var names []string
	for _, n := range nodes {
		byName[n.Name] = n
		names = append(names, n.Name)
	}
	for _, c := range cfg.Cells {
		where := fmt.Sprintf("cell %q %q (%s)", c.Type, c.Name, pos(c.Range))
		gpuType := c.GPUType
		if gpuType == "" {
			gpuType = tree.GPUType(c.Type)
		}
		nl := tree.NodeLevel(c.Type)
		perNode, nodeCells := 0, 1
		if nl > 0 {
			perNode = tree.Count(tree.TypeAt(c.Type, nl), 1)
			nodeCells = tree.Count(c.Type, nl)
		}
		named := c.NomadNodes
		if c.NomadNode != "" {
			named = []string{c.NomadNode}
		}
		var matched []Node
		var problems []Finding
		if len(named) > 0 {
			for _, name := range named {
				n, found := byName[name]
				if !found {
					problems = append(problems, fail("nodes", "%s: nomad_node %q: no such node in the cluster (nodes: %s); fix the name or start that client",
						where, name, strings.Join(names, ", ")))
					continue
				}
				matched = append(matched, n)
			}
		} else {
			sel := selector(c.NodePool, c.NodeClass)
			ready := 0
			for _, n := range nodes {
				if (c.NodePool == "" || n.Pool == c.NodePool) && (c.NodeClass == "" || n.Class == c.NodeClass) {
					matched = append(matched, n)
					if n.Ready {
						ready++
					}
				}
			}
			switch {
			case len(matched) == 0:
				problems = append(problems, fail("nodes", "%s: %s matches no node (%s); fix the selector or the clients' node_pool/node_class",
					where, sel, poolsAndClasses(nodes, c.NodePool, c.NodeClass)))
			case ready < nodeCells:
				problems = append(problems, warn("nodes", "%s: %s matches %d ready nodes, its node cells need %d: the missing nodes' GPUs are bad leaves until they join",
					where, sel, ready, nodeCells))
			}
		}
		var held []string
		for _, n := range matched {
			if p, bad := checkCellNode(where, n, gpuType, perNode, pools); bad {
				problems = append(problems, p)
			} else {
				held = append(held, fmt.Sprintf("%s (%d %s)", n.Name, n.Types()[gpuType], gpuType))
			}
		}
		out = append(out, problems...)
		if len(problems) == 0 {
			out = append(out, ok("nodes", "%s: %s", where, strings.Join(held, ", ")))
		}
	}
	for _, f := range cfg.FromTopology {
		where := fmt.Sprintf("cells_from_topology (%s)", pos(f.Range))
		sel := selector(f.NodePool, f.NodeClass)
		var matched, plain []string
		for _, n := range nodes {
			if (f.NodePool == "" || n.Pool == f.NodePool) && (f.NodeClass == "" || n.Class == f.NodeClass) {
				matched = append(matched, n.Name)
				for _, g := range n.GPUs {
					if !g.Rondo {
						plain = append(plain, n.Name)
						break
					}
				}
			}
		}
		switch {
		case len(matched) == 0:
			out = append(out, fail("nodes", "%s: %s matches no node (%s); fix the selector or the clients' node_pool/node_class",
				where, sel, poolsAndClasses(nodes, f.NodePool, f.NodeClass)))
		case len(plain) > 0:
			out = append(out, fail("gpus", "%s: nodes %s have GPUs without nomad-device-rondo's topology attributes: install the plugin there",
				where, strings.Join(plain, ", ")))
		default:
			out = append(out, ok("nodes", "%s: %s matches %s", where, sel, strings.Join(matched, ", ")))
		}
	}
	return out
}

// checkCellNode is one node of a cell: in a GPU pool, ready, with the
// cell's GPU type; bad is true for a finding that is not ok.
func checkCellNode(where string, n Node, gpuType string, perNode int, pools []string) (f Finding, bad bool) {
	types := n.Types()
	switch {
	case !slices.Contains(pools, n.Pool):
		return fail("nodes", "%s: node %q is in node pool %q, not a GPU pool of the agent (%s): its GPUs are not observed; set the client's node_pool or the agent's pool",
			where, n.Name, n.Pool, strings.Join(pools, ", ")), true
	case types[gpuType] == 0 && gpuType != "":
		return fail("gpus", "%s: node %q has no GPU of type %q (it has %s); fix the cell's type or the GPU type mapping",
			where, n.Name, gpuType, gpuModels(n)), true
	case !n.Ready:
		return warn("nodes", "%s: node %q is %s and %s: its GPUs are bad leaves until it is ready and eligible",
			where, n.Name, n.Status, n.Eligibility), true
	case perNode > 0 && types[gpuType] < perNode:
		return warn("gpus", "%s: node %q has %d %s GPUs, its cell needs %d: the missing ones are bad leaves",
			where, n.Name, types[gpuType], gpuType, perNode), true
	}
	return Finding{}, false
}

func selector(pool, class string) string {
	var parts []string
	if pool != "" {
		parts = append(parts, fmt.Sprintf("node_pool %q", pool))
	}
	if class != "" {
		parts = append(parts, fmt.Sprintf("node_class %q", class))
	}
	return strings.Join(parts, " ")
}

// poolsAndClasses says what the cluster has where a selector found nothing.
func poolsAndClasses(nodes []Node, pool, class string) string {
	pools, classes := map[string]bool{}, map[string]bool{}
	for _, n := range nodes {
		pools[n.Pool] = true
		if n.Class != "" {
			classes[n.Class] = true
		}
	}
	var parts []string
	if pool != "" && !pools[pool] {
		parts = append(parts, fmt.Sprintf("no node is in pool %q; pools with nodes: %s", pool, quoteList(slices.Sorted(maps.Keys(pools)))))
	}
	if class != "" && !classes[class] {
		parts = append(parts, fmt.Sprintf("no node has class %q; classes: %s", class, quoteList(slices.Sorted(maps.Keys(classes)))))
	}
	if len(parts) == 0 {
		parts = append(parts, "no node has both")
	}
	return strings.Join(parts, "; ")
}

func gpuModels(n Node) string {
	if len(n.GPUs) == 0 {
		return "no nvidia/gpu devices"
	}
	var parts []string
	for _, g := range n.GPUs {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", g.Instances, g.Type, g.Model))
	}
	return strings.Join(parts, ", ")
}

// CheckGPUs checks the GPU clients: every node of the GPU pools offers
// nvidia/gpu devices from nomad-device-rondo (another plugin's GPUs work
// without health, topology or shares: a warning), healthy; the cluster has
// GPUs at all; and each GPU type a quota-only VC asks for exists there.
func CheckGPUs(cfg *rhcl.Config, nodes []Node, pools []string) []Finding {
	var out []Finding
	have := map[string]int{}
	inPool := map[string]int{}
	for _, n := range nodes {
		if !slices.Contains(pools, n.Pool) {
			continue
		}
		inPool[n.Pool]++
		where := fmt.Sprintf("node %q (pool %q)", n.Name, n.Pool)
		if !n.Ready {
			out = append(out, warn("gpus", "%s is %s and %s: its GPUs are not scheduled until it is ready and eligible", where, n.Status, n.Eligibility))
			continue
		}
		if len(n.GPUs) == 0 {
			out = append(out, fail("plugin", "%s has no nvidia/gpu devices: install nomad-device-rondo in the client's plugin_dir with a plugin \"nomad-device-rondo\" {} block, or move the node out of the GPU pool", where))
			continue
		}
		plugin := "nomad-device-rondo"
		for _, g := range n.GPUs {
			have[g.Type] += g.Instances - g.Unhealthy
			if !g.Rondo {
				plugin = "another device plugin"
			}
		}
		switch {
		case plugin != "nomad-device-rondo":
			out = append(out, warn("plugin", "%s: GPUs %s come from another device plugin (no topology_levels attribute): Rondo's health checks, topology cells and MPS shares need nomad-device-rondo",
				where, gpuModels(n)))
		default:
			line := ok("plugin", "%s: %s from nomad-device-rondo", where, gpuModels(n))
			for _, g := range n.GPUs {
				if g.Unhealthy > 0 {
					line = warn("gpus", "%s: %d of %d %s GPUs are unhealthy (the plugin's health check): they are not scheduled", where, g.Unhealthy, g.Instances, g.Type)
				}
			}
			out = append(out, line)
		}
	}
	for _, p := range pools {
		if inPool[p] == 0 {
			out = append(out, warn("nodes", "no node is in GPU pool %q: set the GPU clients' client { node_pool = %q } (or the agent's pool)", p, p))
		}
	}
	if len(have) == 0 {
		out = append(out, fail("gpus", "no healthy GPU on a ready node of the GPU pools (%s): the agent has nothing to schedule", strings.Join(pools, ", ")))
	} else {
		out = append(out, ok("gpus", "healthy GPUs of the GPU pools: %s", typesText(have)))
	}
	asked := map[string]int{}
	for _, v := range cfg.VCs {
		for _, t := range slices.Sorted(maps.Keys(v.GPUs)) {
			asked[t] += v.GPUs[t]
			if have[t] == 0 {
				out = append(out, fail("gpus", "vc %q (%s) asks for %d %q GPUs, the cluster has none of that type (it has %s); fix the type or the GPU type mapping",
					v.Name, pos(v.GPURanges[t]), v.GPUs[t], t, typesText(have)))
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(asked)) {
		if have[t] > 0 && asked[t] > have[t] {
			out = append(out, warn("gpus", "the VCs ask for %d %s GPUs in all, the cluster has %d healthy: quotas beyond it are never met", asked[t], t, have[t]))
		}
	}
	return out
}

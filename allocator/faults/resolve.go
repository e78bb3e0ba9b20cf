package faults

import (
	"fmt"
	"sort"
	"strings"
)

// GPU is one GPU of a cluster, in layout order.
type GPU struct {
	ID, Type, Server string
}

type typeGroup struct {
	gpus    []string
	servers [][]string // in order of first appearance
}

type byType map[string]*typeGroup

// ByType resolves the plain simulator's targets: gpu:<type>:<i> is the
// i-th GPU of that type and node:<type>:<i> every GPU of the type's i-th
// server, both counted from 0 in the order gpus lists them (the
// simulator's layout: `--cluster` types, `--gpus-per-server` GPUs each).
func ByType(gpus []GPU) Resolver {
	r := byType{}
	srv := map[string]int{}
	for _, g := range gpus {
		tg := r[g.Type]
		if tg == nil {
			tg = &typeGroup{}
			r[g.Type] = tg
		}
		tg.gpus = append(tg.gpus, g.ID)
		k := g.Type + "\x00" + g.Server
		i, ok := srv[k]
		if !ok {
			i = len(tg.servers)
			srv[k] = i
			tg.servers = append(tg.servers, nil)
		}
		tg.servers[i] = append(tg.servers[i], g.ID)
	}
	return r
}

func (r byType) Resolve(t Target) ([]string, error) {
	tg := r[t.Group]
	if tg == nil {
		return nil, fmt.Errorf("unknown GPU type %q (the cluster has %s)", t.Group, names(r))
	}
	if t.Index < 0 {
		return nil, fmt.Errorf("want %s:<type>:<index>", t.Level)
	}
	if t.Level == "gpu" {
		if t.Index >= len(tg.gpus) {
			return nil, fmt.Errorf("index %d out of range: %s has %s", t.Index, t.Group, count(len(tg.gpus), "GPU"))
		}
		return []string{tg.gpus[t.Index]}, nil
	}
	if t.Index >= len(tg.servers) {
		return nil, fmt.Errorf("index %d out of range: %s has %s", t.Index, t.Group, count(len(tg.servers), "server"))
	}
	return tg.servers[t.Index], nil
}

type byNode map[string][]string

// ByNode resolves virtual-cluster targets, where a node is named by its
// cell's nomad_node: node:<nomad_node> is every GPU of the node and
// gpu:<nomad_node>:<i> its i-th GPU (nodes maps a name to its GPU ids in
// index order).
func ByNode(nodes map[string][]string) Resolver { return byNode(nodes) }

func (r byNode) Resolve(t Target) ([]string, error) {
	ids, ok := r[t.Group]
	if !ok {
		return nil, fmt.Errorf("unknown node %q (the cluster has %s)", t.Group, names(r))
	}
	if t.Level == "node" {
		if t.Index >= 0 {
			return nil, fmt.Errorf("want node:<nomad_node>")
		}
		return ids, nil
	}
	if t.Index >= len(ids) {
		return nil, fmt.Errorf("index %d out of range: %s has %s", t.Index, t.Group, count(len(ids), "GPU"))
	}
	return []string{ids[t.Index]}, nil
}

func names[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > 8 {
		out = append(out[:8], "...")
	}
	return strings.Join(out, ", ")
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

package sim

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// VC mode (Options.Decider, usually with Options.Nodes): the rounds are
// decided by the agent's per-VC deciders (round.Quota, round.Cells) on
// an explicit cluster of named nodes, with each job's VC and class from
// the trace. The time model and metrics are the plain simulator's; the
// result adds per-VC metrics (vcResult).

// Node is one machine of an explicit cluster layout: a server named Name
// (engine.Node ID and Name, the GPUs' Server) with its GPUs per type, laid
// out in type order with ids `<Name>:<i>` (i counted over the node's GPUs,
// zero-padded so that id order is index order: the per-VC cell decider
// maps a node's GPUs to its cell leaves in id order). Pool and Class are
// what cells selected by node_pool/node_class match.
type Node struct {
	Name        string
	Pool, Class string
	GPUs        map[string]int
}

// ServerNodes lays per-type counts out as the plain simulator does:
// servers `<type>-s<i>` of perServer GPUs each (the last may hold fewer).
func ServerNodes(types map[string]int, perServer int) []Node {
	perServer = max(perServer, 1)
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	sort.Strings(names)
	var out []Node
	for _, t := range names {
		for i := 0; i*perServer < types[t]; i++ {
			out = append(out, Node{Name: fmt.Sprintf("%s-s%d", t, i), GPUs: map[string]int{t: min(perServer, types[t]-i*perServer)}})
		}
	}
	return out
}

// buildNodes lays out Options.Nodes (buildCluster's VC-mode branch).
func (s *simulator) buildNodes() error {
	counts := map[string]int{}
	s.nodeGPUs = map[string][]string{}
	for _, n := range s.o.Nodes {
		if n.Name == "" {
			return fmt.Errorf("sim: a node without a name")
		}
		if _, dup := s.nodeGPUs[n.Name]; dup {
			return fmt.Errorf("sim: node %q listed twice", n.Name)
		}
		types := make([]string, 0, len(n.GPUs))
		total := 0
		for t, c := range n.GPUs {
			if c < 0 {
				return fmt.Errorf("sim: node %q: %d GPUs of %s", n.Name, c, t)
			}
			types = append(types, t)
			total += c
		}
		sort.Strings(types)
		width := len(strconv.Itoa(max(total-1, 0)))
		ids := make([]string, 0, total)
		for _, t := range types {
			for range n.GPUs[t] {
				id := fmt.Sprintf("%s:%0*d", n.Name, width, len(ids))
				ids = append(ids, id)
				s.gpus = append(s.gpus, engine.GPU{ID: id, Type: t, Server: n.Name})
			}
			counts[t] += n.GPUs[t]
		}
		s.nodeGPUs[n.Name] = ids
		s.nodes = append(s.nodes, engine.Node{ID: n.Name, Name: n.Name, Pool: n.Pool, Class: n.Class, Ready: true})
		s.nGPUs += total
	}
	for t := range counts {
		s.types = append(s.types, t)
	}
	sort.Strings(s.types)
	// isoTput reads the cluster's size per type from Cluster.Types.
	s.o.Cluster.Types = counts
	if s.nGPUs == 0 {
		return fmt.Errorf("sim: the cluster has no GPUs")
	}
	return nil
}

// packs reports whether the snapshot offers colocated pairs: to a packing
// single engine, or to the per-VC deciders when Options.Pairs.
func (s *simulator) packs() bool {
	return s.eng != nil && s.eng.Packing() || s.o.Decider != nil && s.o.Pairs
}

// vcIntents counts, in VC mode, the jobs each plan stops (suspend, preempt,
// migrate) per VC (guaranteed jobs) and for the opportunistic class.
func (s *simulator) vcIntents(plan *engine.Plan) {
	if s.o.Decider == nil || plan == nil {
		return
	}
	if s.vcStops == nil {
		s.vcStops = map[string]int{}
	}
	for _, in := range plan.Intents {
		if !in.Intent.Stops() {
			continue
		}
		if js := s.byIDs[in.Job]; js != nil && js.tj.Opportunistic {
			s.oppStops++
			if in.Reason.Kind == engine.GuaranteedNeedsGPUs {
				s.oppEvict++
			}
		} else if js != nil {
			s.vcStops[js.tj.VC]++
		}
	}
}

// VCResult is one virtual cluster's (or the opportunistic class's)
// metrics over its measured jobs. Preemptions counts the rounds' plans
// stopping one of its jobs (suspend, preempt or migrate; cuts by a GPU
// failure are in the run's preemptions only).
type VCResult struct {
	Name        string  `json:"name"`
	Jobs        int     `json:"jobs"`
	JobsDone    int     `json:"jobs_done"`
	AvgJCTS     float64 `json:"avg_jct_s"`
	P50JCTS     float64 `json:"p50_jct_s"`
	P95JCTS     float64 `json:"p95_jct_s"`
	AvgQueueS   float64 `json:"avg_queue_s"`
	Preemptions int     `json:"preemptions"`
}

// vcResult adds the per-VC metrics (VC mode only): guaranteed jobs per
// VC, by VC name, and opportunistic jobs of every VC together. The queue
// time is a job's first start minus its arrival (jobs that started).
func (s *simulator) vcResult(r *Result) {
	if s.o.Decider == nil {
		return
	}
	type acc struct {
		jcts   []float64
		queue  float64
		queued int
		jobs   int
	}
	groups := map[string]*acc{}
	var opp *acc
	for _, js := range s.all {
		if !s.inWindow(js.tj.ID) {
			continue
		}
		var a *acc
		if js.tj.Opportunistic {
			if opp == nil {
				opp = &acc{}
			}
			a = opp
		} else {
			if a = groups[js.tj.VC]; a == nil {
				a = &acc{}
				groups[js.tj.VC] = a
			}
		}
		a.jobs++
		if js.started >= 0 {
			a.queue += js.started - js.tj.ArrivalS
			a.queued++
		}
		if js.done {
			a.jcts = append(a.jcts, js.finish-js.tj.ArrivalS)
		}
	}
	for name := range s.vcStops {
		if groups[name] == nil {
			groups[name] = &acc{}
		}
	}
	metrics := func(name string, a *acc, stops int) VCResult {
		v := VCResult{Name: name, Jobs: a.jobs, JobsDone: len(a.jcts), Preemptions: stops}
		if len(a.jcts) > 0 {
			sum := 0.0
			for _, x := range a.jcts {
				sum += x
			}
			v.AvgJCTS = sum / float64(len(a.jcts))
			sj := sortedCopy(a.jcts)
			v.P50JCTS, v.P95JCTS = Percentile(sj, 50), Percentile(sj, 95)
		}
		if a.queued > 0 {
			v.AvgQueueS = a.queue / float64(a.queued)
		}
		return v
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	r.VCs = []VCResult{}
	for _, n := range names {
		r.VCs = append(r.VCs, metrics(n, groups[n], s.vcStops[n]))
	}
	if opp != nil || s.oppStops > 0 {
		if opp == nil {
			opp = &acc{}
		}
		o := metrics("opportunistic", opp, s.oppStops)
		r.Opportunistic = &o
	}
}

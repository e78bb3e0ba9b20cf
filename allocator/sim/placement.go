package sim

import (
	"fmt"
	"math"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// Placement runs the CPU and memory placement stage (allocator/placement)
// in the simulator: servers get cores and memory, jobs a sensitivity
// profile (trace.Job.Profile), and a job runs at its profile's throughput
// under its grant relative to the proportional share.
type Placement struct {
	// Mode of a job's VC ("" : the only one).
	Mode func(vc string) placement.Mode
	// CoresPerServer and MemGBPerServer size every server (a node of
	// Options.Nodes too).
	CoresPerServer, MemGBPerServer float64
	// Profiles (nil: synergy.Default()).
	Profiles *synergy.Table
	// Compat is --synergy-compat: as the reference simulator, every job is
	// re-placed each round at no cost, no leftover step, and a job is
	// credited only two speeds: its profile's speedup when it holds its
	// best-case demand (both cores and memory), else the proportional 1.
	Compat bool
	// Learn hides the jobs' profiles from the stage, which learns them
	// (placement.Learning) from the throughputs the jobs report: what they
	// ran at under their grant (measure.go), with --measure-noise's noise
	// when set. The simulator still runs them at their profiles.
	Learn bool
}

// initPlacement gives the servers cores and memory and wraps the decider
// in the placement stage (Options.Placement).
func (s *simulator) initPlacement(next loop.Decider) (loop.Decider, error) {
	p := s.o.Placement
	if p == nil {
		return next, nil
	}
	if !(p.CoresPerServer > 0) || !(p.MemGBPerServer > 0) || math.IsInf(p.CoresPerServer+p.MemGBPerServer, 0) {
		return nil, fmt.Errorf("sim: placement needs servers with cores and memory (cpus per server %v, memory per server %v GB)", p.CoresPerServer, p.MemGBPerServer)
	}
	if s.o.Ideal {
		return nil, fmt.Errorf("sim: placement needs the round-based mechanism, not the ideal one")
	}
	if len(s.nodes) == 0 {
		seen := map[string]bool{}
		for _, g := range s.gpus {
			if !seen[g.Server] {
				seen[g.Server] = true
				s.nodes = append(s.nodes, engine.Node{ID: g.Server, Name: g.Server, Ready: true})
			}
		}
	}
	s.srvGPUs = map[string]int{}
	for _, g := range s.gpus {
		s.srvGPUs[g.Server]++
	}
	for i := range s.nodes {
		s.nodes[i].Cores, s.nodes[i].MemGB = p.CoresPerServer, p.MemGBPerServer
	}
	s.profiles = p.Profiles
	if s.profiles == nil {
		s.profiles = synergy.Default()
	}
	st := &placement.Stage{Next: next, Mode: p.Mode, Profiles: s.profiles,
		Options: placement.Options{Leftover: !p.Compat, Fresh: p.Compat, FirstFit: p.Compat && s.o.Decider == nil}}
	if p.Learn {
		if p.Compat {
			return nil, fmt.Errorf("sim: placement learning with --synergy-compat: the reference knows every profile")
		}
		st.Learn = &placement.Learning{}
		return hideProfiles{st}, nil
	}
	return st, nil
}

// hideProfiles hands the stage the snapshot without the jobs' profile
// names (Placement.Learn; the snapshot's job list is built each round).
type hideProfiles struct{ next loop.Decider }

func (h hideProfiles) Round(snap *engine.Snapshot) (*engine.Plan, error) {
	for i := range snap.Jobs {
		snap.Jobs[i].Profile = ""
	}
	return h.next.Round(snap)
}

// cpuFactor is how fast job k of assignment a runs for its cores and
// memory, relative to the proportional share (1 without placement, for a
// job without a profile, or without a grant).
func (s *simulator) cpuFactor(js *jobState, a engine.Assignment, k int) float64 {
	if s.o.Placement == nil || js.tj.Profile == "" || k >= len(a.Resources) || len(a.Jobs) > 1 || len(a.GPUs) == 0 {
		return 1
	}
	servers := map[string]bool{}
	for _, g := range a.GPUs {
		servers[s.serverOf(g)] = true
	}
	if len(servers) > 1 {
		return 1 // a multi-server job holds its proportional share
	}
	srvGPUs := float64(s.srvGPUs[s.serverOf(a.GPUs[0])])
	shareC, shareM := s.o.Placement.CoresPerServer/srvGPUs, s.o.Placement.MemGBPerServer/srvGPUs
	p := js.prof
	if p == nil {
		var err error
		if p, err = s.profiles.Lookup(js.tj.Profile, len(a.GPUs), shareC); err != nil {
			return 1
		}
		js.prof = p
	}
	g := float64(len(a.GPUs))
	c, m := a.Resources[k].Cores/g, a.Resources[k].MemGB/g
	if s.o.Placement.Compat {
		if c+1e-9 >= math.Min(p.CoresPerGPUBest, shareC*srvGPUs/g) && m+1e-9 >= math.Min(p.MemGBPerGPUBest, shareM*srvGPUs/g) {
			return p.Speedup
		}
		return 1
	}
	base := p.Throughput(shareC, shareM)
	if base <= 0 {
		return 1
	}
	return p.Throughput(c, m) / base
}

// serverOf is a GPU's server.
func (s *simulator) serverOf(gpu string) string {
	if s.gpuServer == nil {
		s.gpuServer = make(map[string]string, len(s.gpus))
		for _, g := range s.gpus {
			s.gpuServer[g.ID] = g.Server
		}
	}
	return s.gpuServer[gpu]
}

package placement

import (
	"maps"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// Normalize divides each kept job's measured throughput by its speed-up
// under the cores and memory it ran with (relative to its proportional
// share, from its named or learned profile), so that the estimating stage
// (round.Estimating.Before) learns the job's throughput per GPU type at the
// proportional share, which is what the policies compare, not the grant's.
// The raw reports are kept for the stage's own profile learning.
func (st *Stage) Normalize(s *engine.Snapshot) {
	st.raw = nil
	servers := Servers(s)
	if len(servers) == 0 {
		return
	}
	srv := make(map[string]*Server, len(servers))
	for i := range servers {
		srv[servers[i].ID] = &servers[i]
	}
	gpuServer := make(map[string]string, len(s.GPUs))
	for _, g := range s.GPUs {
		gpuServer[g.ID] = g.Server
	}
	jobs := make(map[string]*engine.Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for _, a := range s.Running {
		if len(a.Jobs) != 1 || len(a.Resources) != 1 || len(a.GPUs) == 0 || !oneServer(a.GPUs, gpuServer) {
			continue
		}
		j := jobs[a.Jobs[0]]
		sv := srv[gpuServer[a.GPUs[0]]]
		if j == nil || sv == nil || !(j.Measured[a.Type] > 0) {
			continue
		}
		g := float64(len(a.GPUs))
		p := st.profileFor(j, a.Type, len(a.GPUs), sv)
		if p == nil {
			continue
		}
		base := p.Throughput(sv.shareCores(), sv.shareMem())
		rel := p.Throughput(a.Resources[0].Cores/g, a.Resources[0].MemGB/g)
		if !(base > 0) || !(rel > 0) || rel == base {
			continue
		}
		if st.raw == nil {
			st.raw = map[string]map[string]float64{}
		}
		st.raw[j.ID] = j.Measured
		j.Measured = maps.Clone(j.Measured) // the backend may share the map
		j.Measured[a.Type] *= base / rel
	}
}

// measured is a job's report on typ as the backend gave it (before
// Normalize).
func (st *Stage) measured(j *engine.Job, typ string) float64 {
	if r := st.raw[j.ID]; r != nil {
		return r[typ]
	}
	return j.Measured[typ]
}

// profileFor is the profile a job is placed with: its named one, else its
// learned one (when learning), else none (insensitive).
func (st *Stage) profileFor(j *engine.Job, typ string, gpus int, sv *Server) *synergy.Profile {
	if j.Profile != "" {
		return st.profile(j, gpus, sv)
	}
	if st.Learn != nil {
		if l := st.learnt[learnKey{j.ID, typ}]; l != nil && l.gpus == gpus {
			return l.prof
		}
	}
	return nil
}

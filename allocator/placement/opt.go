package placement

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rondo-sched/rondo/policies/lp"
)

// OptTimeLimit bounds one OPT solve; the best integer solution found by then
// is used (it is never worse than proportional: that point is always a
// candidate).
var OptTimeLimit = 10 * time.Second

// OptKeepBonus is what keeping a running job's grant is worth in OPT's
// objective, in units of the job's proportional throughput: a retune
// restarts the job, so OPT moves it only for a gain above this.
const OptKeepBonus = 0.1

// opt is the paper's first program on the mechanism's GPU placement: each
// tunable job (single-server, not shared) takes one (cores, memory) point,
// the servers hold what they take, no job runs below its proportional
// throughput, and the sum of the jobs' throughputs relative to proportional
// is the largest. Candidate points per GPU: the profile grid, the
// proportional share and the (capped) best case on each axis, so TUNE's
// grants, leftover steps included, are always candidates: OPT's throughput
// is at least TUNE's. The paper's second program (fewest jobs split across
// servers) concerns GPUs, which the mechanism already places compactly.
// Multi-server and shared jobs hold their proportional share.
//
// A kept job's grant is a candidate too, worth OptKeepBonus more: OPT
// changes a running job's grant (a restart) only for a larger gain. With
// Options.Fresh (every job placed anew) there is no bonus.
func opt(js []*job, srvs map[string]*srv) error {
	// Single-server jobs meet only on their server: one program per
	// server is the same optimum as one for the cluster, and much cheaper.
	byServer := map[*srv][]*job{}
	for _, j := range js {
		if j.server == nil || j.Shared {
			j.take(srvs, j.propC, j.propM)
			continue
		}
		byServer[j.server] = append(byServer[j.server], j)
	}
	for _, s := range sortedServers(srvs) {
		if err := optServer(s, byServer[s], srvs); err != nil {
			return err
		}
	}
	return nil
}

// optServer is opt's program for the tunable jobs of one server.
func optServer(s *srv, tunable []*job, srvs map[string]*srv) error {
	type cand struct {
		j    *job
		c, m float64
		v    int
	}
	var cands []cand
	m := &lp.Model{}
	m.Maximize()
	// The program's content, to reuse an earlier solution of the same
	// one (a server whose jobs did not change since the last round).
	key := strconv.AppendFloat(nil, s.freeC, 'g', -1, 64)
	key = strconv.AppendFloat(append(key, ' '), s.freeM, 'g', -1, 64)
	for _, j := range tunable {
		g := float64(j.gpus)
		held := !j.starting && j.Held != nil && j.Held.Cores > 0 && j.Held.MemGB > 0
		cs := axisWith(j.prof.CoresAxis, j.propC/g, j.bestC/g)
		ms := axisWith(j.prof.MemAxis, j.propM/g, j.bestM/g)
		if held {
			cs = axisWith(cs, j.Held.Cores/g)
			ms = axisWith(ms, j.Held.MemGB/g)
		}
		first := len(cands)
		key = append(key, '|')
		for _, c := range cs {
			for _, mm := range ms {
				C, M := c*g, mm*g
				if C > s.Cores+eps || M > s.MemGB+eps {
					continue
				}
				r := j.rel(C, M)
				prop := math.Abs(C-j.propC) < eps && math.Abs(M-j.propM) < eps
				if !prop && r < 1-1e-9 {
					continue
				}
				if prop {
					r = math.Max(r, 1)
				}
				if held && math.Abs(C-j.Held.Cores) < eps && math.Abs(M-j.Held.MemGB) < eps {
					r += OptKeepBonus
				}
				v := m.AddVar(0, 1, r)
				m.SetInteger(v)
				cands = append(cands, cand{j: j, c: C, m: M, v: v})
				for _, x := range []float64{C, M, r} {
					key = strconv.AppendFloat(append(key, ' '), x, 'g', -1, 64)
				}
			}
		}
		idx := make([]int, 0, len(cands)-first)
		one := make([]float64, 0, len(cands)-first)
		for k := first; k < len(cands); k++ {
			idx, one = append(idx, cands[k].v), append(one, 1)
		}
		m.AddRow(idx, one, 1, 1)
	}
	if len(cands) == 0 {
		return nil
	}
	chosen, ok := optMemo.get(string(key))
	if !ok {
		idx := make([]int, len(cands))
		vc := make([]float64, len(cands))
		vm := make([]float64, len(cands))
		for n, k := range cands {
			idx[n], vc[n], vm[n] = k.v, k.c, k.m
		}
		m.AddRow(idx, vc, -lp.Inf, s.freeC+eps)
		m.AddRow(idx, vm, -lp.Inf, s.freeM+eps)
		sol, err := m.SolveMIP(lp.MIPOptions{TimeLimit: OptTimeLimit})
		if err != nil {
			return fmt.Errorf("placement opt: %w", err)
		}
		for n, k := range cands {
			if sol.X[k.v] > 0.5 {
				chosen = append(chosen, n)
			}
		}
		optMemo.put(string(key), chosen)
	}
	for _, n := range chosen {
		cands[n].j.take(srvs, cands[n].c, cands[n].m)
	}
	return nil
}

// optMemo keeps recent per-server solutions by program (deterministic:
// the same program, the same answer), so a round re-solves only the
// servers whose jobs changed. Bounded: emptied when full.
var optMemo = memo{m: map[string][]int{}}

type memo struct {
	mu sync.Mutex
	m  map[string][]int
}

func (c *memo) get(k string) ([]int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memo) put(k string, v []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 4096 {
		clear(c.m)
	}
	c.m[k] = v
}

// axisWith is a profile axis with the extra points added, sorted, unique.
func axisWith(axis []float64, extra ...float64) []float64 {
	out := append(slices.Clone(axis), extra...)
	slices.Sort(out)
	return slices.CompactFunc(out, func(a, b float64) bool { return math.Abs(a-b) < eps })
}

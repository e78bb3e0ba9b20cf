package placement

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"sync"
)

// OptSearchNodes bounds one server's search; the best choice found by
// then is used (never worse than proportional: that point is always a
// candidate, and the search reaches a complete choice first thing).
const OptSearchNodes = 1 << 20

// OptKeepBonus is what keeping a running job's grant is worth in OPT's
// objective, in units of the job's proportional throughput: a retune
// restarts the job, so OPT moves it only for a gain above this.
const OptKeepBonus = 0.1

// opt is the paper's first program on the mechanism's GPU placement, solved
// exactly per server (optSearch; Cbc aborted the process on some of these
// small programs, and a scheduler must not crash): each
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
		j       *job
		c, m, r float64
	}
	var cands []cand
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
				cands = append(cands, cand{j: j, c: C, m: M, r: r})
				for _, x := range []float64{C, M, r} {
					key = strconv.AppendFloat(append(key, ' '), x, 'g', -1, 64)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	chosen, ok := optMemo.get(string(key))
	if !ok {
		groups := make([][]optCand, 0, len(tunable))
		for n, cd := range cands {
			if n == 0 || cands[n-1].j != cd.j {
				groups = append(groups, nil)
			}
			groups[len(groups)-1] = append(groups[len(groups)-1], optCand{n: n, c: cd.c, m: cd.m, r: cd.r})
		}
		chosen = optSearch(s.freeC+eps, s.freeM+eps, groups)
		optMemo.put(string(key), chosen)
	}
	for _, n := range chosen {
		cands[n].j.take(srvs, cands[n].c, cands[n].m)
	}
	return nil
}

// optCand is candidate n of a job: its cores, memory and value.
type optCand struct {
	n       int
	c, m, r float64
}

// optSearch picks one candidate per group (job) with the largest total
// value whose cores and memory fit in (capC, capM), exactly: depth first,
// each job's candidates best value first, a branch cut when even every
// later job's best value cannot beat the best found, or when the later
// jobs' smallest demands no longer fit. A server holds a handful of jobs,
// so this is fast. Returns the chosen candidates' n.
func optSearch(capC, capM float64, groups [][]optCand) []int {
	k := len(groups)
	for _, g := range groups {
		slices.SortStableFunc(g, func(a, b optCand) int { return cmp.Compare(b.r, a.r) })
	}
	// Suffix sums: the most value and the least demand of jobs i..k-1.
	maxR := make([]float64, k+1)
	minC := make([]float64, k+1)
	minM := make([]float64, k+1)
	for i := k - 1; i >= 0; i-- {
		mc, mm := math.Inf(1), math.Inf(1)
		for _, c := range groups[i] {
			mc, mm = math.Min(mc, c.c), math.Min(mm, c.m)
		}
		maxR[i], minC[i], minM[i] = maxR[i+1]+groups[i][0].r, minC[i+1]+mc, minM[i+1]+mm
	}
	best, bestV := []int(nil), math.Inf(-1)
	cur := make([]int, k)
	nodes := 0
	var dfs func(i int, usedC, usedM, v float64)
	dfs = func(i int, usedC, usedM, v float64) {
		if nodes++; nodes > OptSearchNodes && best != nil {
			return
		}
		if i == k {
			if v > bestV+1e-12 {
				bestV, best = v, slices.Clone(cur)
			}
			return
		}
		if v+maxR[i] <= bestV+1e-12 || usedC+minC[i] > capC || usedM+minM[i] > capM {
			return
		}
		for _, c := range groups[i] {
			if usedC+c.c+minC[i+1] > capC || usedM+c.m+minM[i+1] > capM {
				continue
			}
			cur[i] = c.n
			dfs(i+1, usedC+c.c, usedM+c.m, v+c.r)
		}
	}
	dfs(0, 0, 0, 0)
	return best
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

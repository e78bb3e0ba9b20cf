package policies

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// LASSession solves LAS (max_min_fairness_perf) incrementally over a
// changing set of jobs on a fixed cluster: jobs arrive (Add) and leave
// (Remove) one at a time, and Solve re-solves from what the last solve left
// instead of from scratch. It is pure (no I/O, no clock) and deterministic:
// the same sequence of calls gives the same answers.
//
// A cold solve (Solve("max_min_fairness_perf", ...), maxMin.solve) rebuilds
// the per-job data, sorts every job's breakpoints and runs the
// decomposition from the zero column, about 35 pricing passes at 10,000
// jobs. A session keeps, between solves:
//
//   - each job's scaled data and sorted points in a slot (a leaving job's
//     slot is reused by the next arrival), and the breakpoints of all jobs
//     in sorted order: an arrival inserts its at most k breakpoints by
//     binary search, a departure deletes its, with no re-sort;
//   - the scale (fixed at the first solve with jobs: it only conditions the
//     master, and LAS's normalization keeps it near 1 whatever the jobs);
//   - the decomposition's columns, each with its GPU time per job. A column
//     is the point every job takes at level w·t under prices λ; when a job
//     leaves its point is subtracted from every column's use, when one
//     arrives its point under each column's (λ, t) is added (O(k) per
//     column). So every kept column stays exact for the current job set,
//     the master over them is a feasible lower bound, and a re-solve after
//     one arrival or departure usually needs one or two pricing passes.
//
// A column whose level the arriving job cannot reach (t above the job's
// highest level over its weight) is dropped and its prices are priced
// again at the next solve (a seed). The answer's certified gap is checked
// the same way as a cold solve's, by the pricing's upper bound, so the
// optimality guarantee does not depend on where the solve started.
type LASSession struct {
	gpuTypes map[string]GPUType
	types    []string
	counts   []float64
	cost     []float64
	d        *dw

	slotOf map[string]int32
	ids    []string  // per slot; "" for a free slot
	jobs   []Job     // per slot
	tput   []float64 // slots·k: each job's instance row (newInstance's tput)
	seq    []uint64  // per slot: arrival number (Problem and Allocation list jobs by it)
	next   uint64
	free   []int32 // free slots, popped from the end
	active int

	built bool    // scale fixed, d.e scaled, breakpoints sorted
	scale float64 // t in the session's units = objective / scale

	cols    []sessionCol // cols[0] is the zero column (always feasible: LAS has no floors)
	seeds   [][]float64  // prices of dropped columns, priced at the next solve
	spare   [][]float64  // GPU-time buffers of pruned columns, reused
	events  int          // arrivals and departures since use was last summed afresh
	tol     float64
	keyBuf  []radixKey
	viewBuf []column

	solved bool
	res    LASResult
	r      []float64 // slots·k: the last solve's GPU time per job and type
}

// sessionCol is a decomposition column with its GPU time per job: pts[m·k+j]
// is slot m's GPU time on type j at level w_m·t under prices lambda.
type sessionCol struct {
	t      float64   // session units
	lambda []float64 // session units; nil for the zero column
	use    []float64 // Σ over jobs of pts, per type
	pts    []float64
}

// LASResult is one LASSession solve.
type LASResult struct {
	// Objective is LAS's value: min over jobs of Σ_j T_mj·X_mj / (w_m·P_m),
	// as Solve's Allocation.Objective (0 with no jobs).
	Objective float64
	// Gap is certified: the optimum is at most Objective + Gap.
	Gap float64
	// Passes is the number of pricing passes this solve ran.
	Passes int
}

// ErrUnknownJob is returned by LASSession.Remove and X for a job id the
// session does not hold.
var ErrUnknownJob = errors.New("las session: unknown job")

// A session keeps at most lasSessionColsPerRow columns per master row
// (k+1 rows), and no more than lasSessionColBytes of per-job GPU time in
// all (but at least lasSessionMinColsPerRow per row): the zero column,
// those in the last optimal mix, then the newest. Measured at 10,000 jobs,
// 15 per row leaves 85% of re-solves at one pricing pass; 3 per row needs
// 4.6 times the passes on average (old columns, still near the optimum,
// let the master absorb a change without new ones).
const (
	lasSessionColsPerRow    = 15
	lasSessionMinColsPerRow = 3
	lasSessionColBytes      = 64 << 20
)

// NewLASSession starts a session on a cluster with no jobs. The GPU types
// are those of a Problem (validated the same way).
func NewLASSession(gpuTypes map[string]GPUType) (*LASSession, error) {
	if err := (&Problem{GPUTypes: gpuTypes}).Validate(); err != nil {
		return nil, err
	}
	s := &LASSession{gpuTypes: make(map[string]GPUType, len(gpuTypes)), slotOf: map[string]int32{}, tol: relTol}
	for name, t := range gpuTypes {
		s.gpuTypes[name] = t
	}
	in := newInstance(&Problem{GPUTypes: s.gpuTypes})
	s.types, s.counts, s.cost = in.types, in.counts, in.cost
	k := len(s.types)
	s.d = newDW(0, k)
	s.d.capacity = s.counts
	s.d.sv, s.d.styp = []float64{}, []int8{}
	s.cols = []sessionCol{{use: make([]float64, k)}}
	return s, nil
}

// SetTolerance sets the certified relative gap at which Solve stops
// (default: a cold solve's, 1e-9). It must be in (0, 1).
func (s *LASSession) SetTolerance(rel float64) error {
	if !(rel > 0 && rel < 1) {
		return fmt.Errorf("las session: tolerance %v not in (0, 1)", rel)
	}
	s.tol = rel
	s.solved = false
	return nil
}

// Types are the GPU type names, sorted: the order of X's entries.
func (s *LASSession) Types() []string { return append([]string(nil), s.types...) }

// Len is the number of jobs held.
func (s *LASSession) Len() int { return s.active }

// Add adds a job (validated as in a Problem; its id must be new).
func (s *LASSession) Add(j Job) error {
	if _, dup := s.slotOf[j.ID]; dup {
		return fmt.Errorf("las session: job %q already added", j.ID)
	}
	one := &Problem{GPUTypes: s.gpuTypes, Jobs: []Job{j}}
	if _, err := one.validate(); err != nil {
		return fmt.Errorf("las session: %w", err)
	}
	// The job's row of lasProblem: it depends only on the job and the
	// cluster, so the other jobs' rows never change.
	in := newInstance(one)
	mm := lasProblem(in, in.tput)
	d, k := s.d, s.d.k
	m := s.takeSlot()
	s.ids[m], s.jobs[m], s.seq[m] = j.ID, j, s.next
	copy(s.tput[m*k:m*k+k], in.tput[0])
	s.next++
	s.slotOf[j.ID] = int32(m)
	s.active++
	s.solved = false
	f := 1.0
	if s.built {
		f = 1 / s.scale
	}
	for jj, v := range mm.e[0] {
		d.e[m*k+jj] = v * f
	}
	d.cap[m], d.w[m], d.floor[m] = mm.cap[0], mm.w[0], 0
	if !s.built {
		return nil // prepared and sorted with all the others at the first solve
	}
	s.keyBuf = d.prepareJob(m, s.keyBuf[:0])
	for _, kk := range s.keyBuf {
		s.insertBreak(kk.slot)
	}
	// The arrival's point in every column, at the column's level.
	top := 0.0
	if np := int(d.np[m]); np > 0 {
		top = d.sv[m*k+np-1]
	}
	kept := s.cols[:1]
	for _, c := range s.cols[1:] {
		if d.w[m] > 0 && c.t > top/d.w[m] {
			// The job cannot reach this column's level: the column is
			// no longer feasible. Its prices are priced again next solve.
			s.seeds = append(s.seeds, c.lambda)
			s.spare = append(s.spare, c.pts)
			continue
		}
		row := c.pts[m*k : m*k+k]
		if d.w[m] > 0 {
			d.hullOf(m, c.lambda)
			d.point(m, d.w[m]*c.t, row)
		}
		for jj, v := range row {
			c.use[jj] += v
		}
		kept = append(kept, c)
	}
	clear(s.cols[len(kept):])
	s.cols = kept
	s.countEvent()
	return nil
}

// Remove removes the job with this id; ErrUnknownJob if there is none.
func (s *LASSession) Remove(id string) error {
	slot, ok := s.slotOf[id]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownJob, id)
	}
	d, k, m := s.d, s.d.k, int(slot)
	if s.built {
		// Its breakpoints, recomputed (prepareJob is idempotent), leave
		// the sorted order.
		s.keyBuf = d.prepareJob(m, s.keyBuf[:0])
		for _, kk := range s.keyBuf {
			s.deleteBreak(kk.slot)
		}
		for _, c := range s.cols[1:] {
			row := c.pts[m*k : m*k+k]
			for jj, v := range row {
				c.use[jj] -= v
			}
			clear(row)
		}
	}
	clear(d.e[m*k : m*k+k])
	d.cap[m], d.w[m], d.floor[m], d.np[m] = 0, 0, 0, 0
	clear(s.r[m*k : m*k+k])
	clear(s.tput[m*k : m*k+k])
	delete(s.slotOf, id)
	s.ids[m], s.jobs[m] = "", Job{}
	s.free = append(s.free, slot)
	s.active--
	s.solved = false
	if s.built {
		s.countEvent()
	}
	return nil
}

// takeSlot returns a free slot, growing every per-slot array by one if
// there is none.
func (s *LASSession) takeSlot() int {
	if n := len(s.free); n > 0 {
		m := s.free[n-1]
		s.free = s.free[:n-1]
		return int(m)
	}
	d, k := s.d, s.d.k
	m := d.n
	d.n++
	zk, zs := make([]float64, k), make([]float64, k+1)
	d.e = append(d.e, zk...)
	d.cap = append(d.cap, 0)
	d.w = append(d.w, 0)
	d.floor = append(d.floor, 0)
	d.slotT = append(d.slotT, zs...)
	d.dslope = append(d.dslope, zs...)
	d.sv = append(d.sv, zk...)
	d.styp = append(d.styp, make([]int8, k)...)
	d.np = append(d.np, 0)
	d.hullTyp = append(d.hullTyp, make([]int8, k+1)...)
	d.hullLen = append(d.hullLen, 0)
	s.ids = append(s.ids, "")
	s.jobs = append(s.jobs, Job{})
	s.tput = append(s.tput, zk...)
	s.seq = append(s.seq, 0)
	s.r = append(s.r, zk...)
	for i := range s.cols[1:] {
		s.cols[i+1].pts = append(s.cols[i+1].pts, zk...)
	}
	return m
}

// countEvent refreshes the columns' use from their per-job GPU time once
// there have been as many events as slots (amortized O(k) per column and
// event), so rounding from many additions and subtractions cannot build up.
func (s *LASSession) countEvent() {
	s.events++
	if s.events < max(s.d.n, 64) {
		return
	}
	s.events = 0
	k := s.d.k
	for _, c := range s.cols[1:] {
		clear(c.use)
		for m := 0; m < s.d.n; m++ {
			for j := 0; j < k; j++ {
				c.use[j] += c.pts[m*k+j]
			}
		}
	}
}

// breakLess orders breakpoint slots as prepare sorts them: by (t, slot).
func (s *LASSession) breakLess(a, b int32) bool {
	ta, tb := s.d.slotT[a], s.d.slotT[b]
	if ta != tb {
		return ta < tb
	}
	return a < b
}

func (s *LASSession) insertBreak(slot int32) {
	o := s.d.order
	i := sort.Search(len(o), func(i int) bool { return s.breakLess(slot, o[i]) })
	o = append(o, 0)
	copy(o[i+1:], o[i:])
	o[i] = slot
	s.d.order = o
}

func (s *LASSession) deleteBreak(slot int32) {
	o := s.d.order
	i := sort.Search(len(o), func(i int) bool { return !s.breakLess(o[i], slot) })
	if i == len(o) || o[i] != slot {
		panic("las session: breakpoint missing from the sorted order")
	}
	s.d.order = append(o[:i], o[i+1:]...)
}

// build fixes the scale as a cold solve would choose it for the jobs now
// held, scales their data and sorts all breakpoints (once per session).
func (s *LASSession) build() {
	d, k := s.d, s.d.k
	scale := math.Inf(1)
	for m := 0; m < d.n; m++ {
		if d.w[m] > 0 {
			top := 0.0
			for _, v := range d.e[m*k : m*k+k] {
				top = math.Max(top, v*d.cap[m])
			}
			scale = math.Min(scale, top/d.w[m])
		}
	}
	if math.IsInf(scale, 1) || scale <= 0 {
		scale = 1
	}
	s.scale = scale
	for i := range d.e {
		d.e[i] /= scale
	}
	d.prepare()
	s.built = true
}

// addColumn adds the column at prices lambda and level t; d.price(lambda)
// must have been the last pricing (its hulls are read).
func (s *LASSession) addColumn(lambda []float64, t float64) {
	d, k := s.d, s.d.k
	var pts []float64
	if n := len(s.spare); n > 0 {
		pts = s.spare[n-1][:0]
		s.spare = s.spare[:n-1]
	}
	if cap(pts) < d.n*k {
		pts = make([]float64, d.n*k)
	}
	pts = pts[:d.n*k]
	use := make([]float64, k)
	for m := 0; m < d.n; m++ {
		row := pts[m*k : m*k+k]
		if d.w[m] <= 0 {
			clear(row)
			continue
		}
		d.point(m, d.w[m]*t, row)
		for j, v := range row {
			use[j] += v
		}
	}
	s.cols = append(s.cols, sessionCol{t: t, lambda: append([]float64(nil), lambda...), use: use, pts: pts})
}

// Solve solves LAS over the jobs held, warm from the last solve. With no
// change since the last solve it returns that solve's result.
func (s *LASSession) Solve() (LASResult, error) {
	if s.solved {
		return s.res, nil
	}
	if s.active == 0 {
		s.res, s.solved = LASResult{}, true
		return s.res, nil
	}
	if !s.built {
		s.build()
	}
	d, k := s.d, s.d.k
	passes := 0
	// Dropped columns' prices, the newest k+1 (as many as a mix can use).
	if n := len(s.seeds); n > k+1 {
		s.seeds = append(s.seeds[:0], s.seeds[n-k-1:]...)
	}
	for _, lambda := range s.seeds {
		t, _ := d.price(lambda)
		s.addColumn(lambda, t)
		passes++
	}
	clear(s.seeds)
	s.seeds = s.seeds[:0]
	var mu, lambda []float64
	var lower, gap float64
	const maxPasses = 500
	for pass := 0; ; pass++ {
		if pass == maxPasses {
			return LASResult{}, fmt.Errorf("las session: no certified optimum after %d passes (gap %g)", maxPasses, gap)
		}
		view := s.viewBuf[:0]
		for _, c := range s.cols {
			view = append(view, column{t: c.t, use: c.use})
		}
		s.viewBuf = view
		var err error
		if mu, lambda, lower, err = solveMaster(view, d.capacity); err != nil {
			return LASResult{}, err
		}
		t, f := d.price(lambda)
		passes++
		upper := f
		for j := 0; j < k; j++ {
			upper += lambda[j] * d.capacity[j]
		}
		gap = upper - lower
		if gap <= s.tol*math.Max(math.Abs(lower), 1e-6) {
			break
		}
		s.addColumn(lambda, t)
	}
	// The allocation is the master's mix of the columns' GPU time.
	clear(s.r)
	for i, c := range s.cols {
		if i == 0 || i >= len(mu) || mu[i] <= 1e-13 {
			continue
		}
		w := mu[i]
		for q, v := range c.pts {
			s.r[q] += w * v
		}
	}
	s.prune(mu)
	s.res = LASResult{Objective: lower * s.scale, Gap: math.Max(gap, 0) * s.scale, Passes: passes}
	s.solved = true
	return s.res, nil
}

// prune keeps the zero column, the columns in the optimal mix and then the
// newest others, up to the limit above.
func (s *LASSession) prune(mu []float64) {
	rows := s.d.k + 1
	limit := lasSessionColBytes / max(8*s.d.n*s.d.k, 1)
	limit = min(max(limit, lasSessionMinColsPerRow*rows), lasSessionColsPerRow*rows)
	if len(s.cols) <= limit {
		return
	}
	keep := make([]bool, len(s.cols))
	keep[0] = true
	n := 1
	for i := 1; i < len(s.cols); i++ {
		if i < len(mu) && mu[i] > 0 {
			keep[i] = true
			n++
		}
	}
	for i := len(s.cols) - 1; i > 0 && n < limit; i-- {
		if !keep[i] {
			keep[i] = true
			n++
		}
	}
	kept := s.cols[:0]
	for i, c := range s.cols {
		if keep[i] {
			kept = append(kept, c)
		} else {
			s.spare = append(s.spare, c.pts)
		}
	}
	clear(s.cols[len(kept):])
	s.cols = kept
	if len(s.spare) > 2 {
		s.spare = s.spare[len(s.spare)-2:]
	}
}

// X returns job id's fraction of time per type (Types order) in the last
// solve's optimum (before fillLeftover). The job set must not have changed
// since that solve.
func (s *LASSession) X(id string) ([]float64, error) {
	slot, ok := s.slotOf[id]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, id)
	}
	if !s.solved {
		return nil, errors.New("las session: not solved since the last change")
	}
	k, m := s.d.k, int(slot)
	x := make([]float64, k)
	for j := range x {
		x[j] = s.r[m*k+j] / s.d.cap[m]
	}
	return x, nil
}

// slotsByArrival lists the occupied slots in arrival order.
func (s *LASSession) slotsByArrival() []int {
	out := make([]int, 0, s.active)
	for m, id := range s.ids {
		if id != "" {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(a, b int) bool { return s.seq[out[a]] < s.seq[out[b]] })
	return out
}

// Problem is the session's cluster and jobs (in arrival order) as a
// Problem: what a cold Solve of the same instance would take.
func (s *LASSession) Problem() *Problem {
	p := &Problem{GPUTypes: make(map[string]GPUType, len(s.gpuTypes))}
	for name, t := range s.gpuTypes {
		p.GPUTypes[name] = t
	}
	for _, m := range s.slotsByArrival() {
		p.Jobs = append(p.Jobs, s.jobs[m])
	}
	return p
}

// Allocation is the last solve as Solve("max_min_fairness_perf") returns
// it: jobs in arrival order, the idle capacity handed out by fillLeftover,
// effective throughputs. It costs O(n log n) (a cold solve's epilogue), so
// it is built on demand, not by Solve.
func (s *LASSession) Allocation() (*Allocation, error) {
	if !s.solved {
		return nil, errors.New("las session: not solved since the last change")
	}
	return s.allocation(s.Problem(), s.slotsByArrival()), nil
}

// AllocationFor is Allocation with the jobs in p's order: p must hold
// exactly the session's jobs (by id) on the session's GPU types, with the
// same data as far as LAS reads it (throughputs, scale factor, weight);
// fields LAS ignores may differ. It is what Solve("max_min_fairness_perf",
// p) returns for the session's optimum: the caller's job order decides
// fillLeftover's ties and the rows' order.
func (s *LASSession) AllocationFor(p *Problem) (*Allocation, error) {
	if !s.solved {
		return nil, errors.New("las session: not solved since the last change")
	}
	if len(p.Jobs) != s.active || len(p.GPUTypes) != len(s.gpuTypes) {
		return nil, fmt.Errorf("las session: the problem has %d jobs and %d GPU types, the session %d and %d",
			len(p.Jobs), len(p.GPUTypes), s.active, len(s.gpuTypes))
	}
	for name, t := range p.GPUTypes {
		if st, ok := s.gpuTypes[name]; !ok || st != t {
			return nil, fmt.Errorf("las session: GPU type %q differs from the session's", name)
		}
	}
	slots := make([]int, len(p.Jobs))
	seen := make([]bool, len(s.ids))
	for i := range p.Jobs {
		m, ok := s.slotOf[p.Jobs[i].ID]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownJob, p.Jobs[i].ID)
		}
		if seen[m] {
			return nil, fmt.Errorf("las session: job %q listed twice", p.Jobs[i].ID)
		}
		seen[m] = true
		slots[i] = int(m)
	}
	return s.allocation(p, slots), nil
}

// allocation builds the last solve's Allocation for p, whose job i is in
// slot slots[i].
func (s *LASSession) allocation(p *Problem, slots []int) *Allocation {
	const name = "max_min_fairness_perf"
	// p's instance from the slots' rows (newInstance's, kept by Add): no
	// map lookups per job and type.
	k, n := s.d.k, len(slots)
	in := &instance{types: append([]string(nil), s.types...), counts: s.counts, cost: s.cost, jobs: p.Jobs,
		ids: make([]string, n), tput: make([][]float64, n), sf: make([]float64, n), weight: make([]float64, n)}
	rows := make([]float64, n*k)
	for i, m := range slots {
		j := &s.jobs[m]
		in.ids[i] = j.ID
		in.tput[i] = rows[i*k : i*k+k : i*k+k]
		copy(in.tput[i], s.tput[m*k:m*k+k])
		in.sf[i] = float64(max(j.ScaleFactor, 1))
		in.weight[i] = j.Weight
		if in.weight[i] == 0 {
			in.weight[i] = 1
		}
	}
	a := newAllocation(name, in)
	for i, m := range slots {
		for j := 0; j < k; j++ {
			a.X[i][j] = s.r[m*k+j] / in.sf[i]
		}
	}
	mm := lasProblem(in, in.tput)
	fillLeftover(a, in, mm.e)
	a.Objective = s.res.Objective
	a.finish(in)
	return a
}

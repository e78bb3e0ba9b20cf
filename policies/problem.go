// Package policies holds Gavel's scheduling policies as pure functions from a
// Problem (GPU types, jobs with per-type throughputs, optional colocated pairs
// and entities) to an Allocation (fraction of time per job, or job pair, per
// GPU type). Nothing here knows about Nomad, rounds or cells.
package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"unsafe"

	"github.com/rondo-sched/rondo/policies/fairshare"
)

// GPUType is one kind of accelerator in the cluster.
type GPUType struct {
	Count       int     `json:"count"`
	CostPerHour float64 `json:"cost_per_hour"`
	// GPUsPerServer, when set, is the type's server size: a job wider than
	// a server cannot be consolidated there and runs at its unconsolidated
	// throughput (Gavel's placement sensitivity).
	GPUsPerServer int `json:"gpus_per_server,omitempty"`
}

// Job is one training job as a policy sees it.
type Job struct {
	ID string `json:"id"`
	// Throughput is the whole job's steps/s at its scale factor, per GPU type
	// (0 or absent: cannot run there).
	Throughput map[string]float64 `json:"throughput"`
	// UnconsolidatedThroughput is the throughput per type when the job's
	// workers are spread over servers; absent entries mean "same as
	// consolidated".
	UnconsolidatedThroughput map[string]float64 `json:"unconsolidated_throughput,omitempty"`
	ScaleFactor              int                `json:"scale_factor"`
	// Weight is the job's priority weight; 0 means the default, 1.
	Weight          float64 `json:"weight"`
	RemainingSteps  float64 `json:"remaining_steps"`
	TimeSinceStartS float64 `json:"time_since_start_s"`
	// IsolatedTimeS is finish-time fairness's running t_isolated; absent means
	// TimeSinceStartS.
	IsolatedTimeS *float64 `json:"isolated_time_s,omitempty"`
	SLOs          *float64 `json:"slo_s"`
	Entity        string   `json:"entity,omitempty"`
	// User owns the job under gandiva_fair (empty: user "default"); other
	// policies ignore it.
	User string `json:"user,omitempty"`
}

// DefaultUser owns the jobs that name no user.
const DefaultUser = "default"

// UserTickets is one user's weight under gandiva_fair: its tickets, a
// positive integer (decoded as a JSON number and checked by Validate).
type UserTickets struct {
	Tickets float64 `json:"tickets"`
}

// Pair is a measured colocation of two jobs sharing one GPU: the two jobs'
// throughputs (in that order) per GPU type.
type Pair struct {
	Jobs       [2]string             `json:"jobs"`
	Throughput map[string][2]float64 `json:"throughput"`
}

// Entity is a node of the hierarchical policy: a group of jobs with a weight
// and the policy used inside it ("fairness" or "fifo").
type Entity struct {
	Weight float64 `json:"weight"`
	Policy string  `json:"policy"`
}

// Problem is one policy instance. Jobs are listed in arrival order (FIFO and
// the hierarchical policy's FIFO entities read that order).
type Problem struct {
	GPUTypes map[string]GPUType `json:"gpu_types"`
	Jobs     []Job              `json:"jobs"`
	Pairs    []Pair             `json:"pairs,omitempty"`
	Entities map[string]Entity  `json:"entities,omitempty"`
	// Seed drives the randomized baselines (gandiva).
	Seed int64 `json:"seed,omitempty"`
	// Users are gandiva_fair's users and their tickets; a user named by a
	// job but absent here has fairshare.DefaultTickets. Other policies
	// ignore users.
	Users map[string]UserTickets `json:"users,omitempty"`
	// Trading turns gandiva_fair's trading between GPU generations on or
	// off (absent: on).
	Trading *bool `json:"trading,omitempty"`
}

// UnmarshalJSON reads a job with scale_factor 1 when the field is absent
// (the contract since the first release: old problem files keep working);
// an explicit value below 1 is refused by Validate. Unknown fields are
// refused as in ReadProblem.
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	v := plain{ScaleFactor: 1}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*j = Job(v)
	return nil
}

// ReadProblem decodes a Problem from JSON and validates it. Unknown fields are
// errors so that a misspelt field is not silently ignored.
func ReadProblem(r io.Reader) (*Problem, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Problem
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding problem: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func badNumber(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// Validate reports the first problem with the input, naming the field.
func (p *Problem) Validate() error {
	_, err := p.validate()
	return err
}

// validate is Validate that also returns each pair's job indices (the
// instance reuses them rather than hashing every id again).
func (p *Problem) validate() ([][2]int32, error) {
	if len(p.GPUTypes) == 0 {
		return nil, fmt.Errorf("gpu_types: no GPU types")
	}
	total := 0
	for name, t := range p.GPUTypes {
		if name == "" {
			return nil, fmt.Errorf("gpu_types: empty type name")
		}
		if t.Count < 0 {
			return nil, fmt.Errorf("gpu_types.%s.count: negative (%d)", name, t.Count)
		}
		if t.GPUsPerServer < 0 {
			return nil, fmt.Errorf("gpu_types.%s.gpus_per_server: negative (%d)", name, t.GPUsPerServer)
		}
		if badNumber(t.CostPerHour) || t.CostPerHour < 0 {
			return nil, fmt.Errorf("gpu_types.%s.cost_per_hour: must be a non-negative number", name)
		}
		total += t.Count
	}
	if total == 0 {
		return nil, fmt.Errorf("gpu_types: zero GPUs in all")
	}
	seen := make(map[string]int, len(p.Jobs))
	for i, j := range p.Jobs {
		if j.ID == "" {
			return nil, fmt.Errorf("jobs[%d].id: empty", i)
		}
		// The job's name is formatted only for an error: this runs at
		// every recompute.
		where := func() string { return fmt.Sprintf("jobs[%d] (%s)", i, j.ID) }
		if _, dup := seen[j.ID]; dup {
			return nil, fmt.Errorf("%s.id: duplicate job id", where())
		}
		seen[j.ID] = i
		if j.ScaleFactor < 1 {
			// A job runs on at least one GPU; 0 (or a missing field) is an
			// error, not a silent single GPU.
			return nil, fmt.Errorf("%s.scale_factor: must be at least 1, got %d", where(), j.ScaleFactor)
		}
		if badNumber(j.Weight) || j.Weight < 0 {
			return nil, fmt.Errorf("%s.weight: must be a non-negative number", where())
		}
		if badNumber(j.RemainingSteps) || j.RemainingSteps < 0 {
			return nil, fmt.Errorf("%s.remaining_steps: must be a non-negative number", where())
		}
		if badNumber(j.TimeSinceStartS) || j.TimeSinceStartS < 0 {
			return nil, fmt.Errorf("%s.time_since_start_s: must be a non-negative number", where())
		}
		if j.IsolatedTimeS != nil && (badNumber(*j.IsolatedTimeS) || *j.IsolatedTimeS < 0) {
			return nil, fmt.Errorf("%s.isolated_time_s: must be a non-negative number", where())
		}
		if j.SLOs != nil && (badNumber(*j.SLOs) || *j.SLOs <= 0) {
			return nil, fmt.Errorf("%s.slo_s: must be a positive number or null", where())
		}
		anyPositive := false
		for t, v := range j.Throughput {
			if _, ok := p.GPUTypes[t]; !ok {
				return nil, fmt.Errorf("%s.throughput.%s: unknown GPU type", where(), t)
			}
			if badNumber(v) || v < 0 {
				return nil, fmt.Errorf("%s.throughput.%s: must be a non-negative number, got %v", where(), t, v)
			}
			if v > 0 {
				anyPositive = true
			}
		}
		if !anyPositive {
			return nil, fmt.Errorf("%s.throughput: zero on every GPU type", where())
		}
		for t, v := range j.UnconsolidatedThroughput {
			if _, ok := p.GPUTypes[t]; !ok {
				return nil, fmt.Errorf("%s.unconsolidated_throughput.%s: unknown GPU type", where(), t)
			}
			if badNumber(v) || v < 0 {
				return nil, fmt.Errorf("%s.unconsolidated_throughput.%s: must be a non-negative number, got %v", where(), t, v)
			}
		}
		if len(p.Entities) > 0 && j.Entity != "" {
			if _, ok := p.Entities[j.Entity]; !ok {
				return nil, fmt.Errorf("%s.entity: unknown entity %q", where(), j.Entity)
			}
		}
	}
	// Pairs run into the tens of thousands at every recompute, but their
	// throughput maps are few and shared (one per model pair in the
	// simulator): a map already found valid is not checked again, and a
	// pair's first job is usually the previous pair's (pairs listed by
	// first job).
	var good map[unsafe.Pointer]struct{}
	var pairJobs [][2]int32
	if len(p.Pairs) > 0 {
		pairJobs = make([][2]int32, len(p.Pairs))
	}
	lastID := ""
	for i, pr := range p.Pairs {
		where := func() string { return fmt.Sprintf("pairs[%d]", i) }
		for k, id := range pr.Jobs {
			if k == 0 && i > 0 && id == lastID {
				pairJobs[i][0] = pairJobs[i-1][0]
				continue
			}
			m, ok := seen[id]
			if !ok {
				return nil, fmt.Errorf("%s.jobs: unknown job %q", where(), id)
			}
			pairJobs[i][k] = int32(m)
		}
		lastID = pr.Jobs[0]
		if pr.Jobs[0] == pr.Jobs[1] {
			return nil, fmt.Errorf("%s.jobs: a job cannot pair with itself", where())
		}
		key := mapKey(pr.Throughput)
		if _, ok := good[key]; ok {
			continue
		}
		for t, v := range pr.Throughput {
			if _, ok := p.GPUTypes[t]; !ok {
				return nil, fmt.Errorf("%s.throughput.%s: unknown GPU type", where(), t)
			}
			for _, x := range v {
				if badNumber(x) || x < 0 {
					return nil, fmt.Errorf("%s.throughput.%s: must be non-negative numbers", where(), t)
				}
			}
		}
		if good == nil {
			good = map[unsafe.Pointer]struct{}{}
		}
		good[key] = struct{}{}
	}
	for _, name := range sortedNames(p.Users) {
		if name == "" {
			return nil, fmt.Errorf("users: empty user name")
		}
		if v := p.Users[name].Tickets; badNumber(v) || v <= 0 || v != math.Trunc(v) {
			return nil, fmt.Errorf("users.%s.tickets: must be a positive integer", name)
		}
	}
	for name, e := range p.Entities {
		if badNumber(e.Weight) || e.Weight < 0 {
			return nil, fmt.Errorf("entities.%s.weight: must be a non-negative number", name)
		}
		switch e.Policy {
		case "", "fairness", "fifo":
		default:
			return nil, fmt.Errorf("entities.%s.policy: unknown %q (want fairness or fifo)", name, e.Policy)
		}
	}
	return pairJobs, nil
}

// sortedNames is a map's keys, sorted (errors name the first bad entry
// deterministically).
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mapKey is a map's identity: maps shared between pairs have the same key.
func mapKey[M ~map[K]V, K comparable, V any](m M) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// instance is the dense form every solver works on: types sorted by name,
// jobs in input order.
type instance struct {
	types  []string
	counts []float64 // N_j
	cost   []float64 // $/hour per GPU
	ids    []string
	tput   [][]float64 // T_mj, whole-job steps/s
	sf     []float64
	weight []float64
	jobs   []Job

	// seedPrices warm-start the decomposition (from a Hint); the solver
	// leaves what it learned for the next Hint in learnedPrices.
	seedPrices, learnedPrices [][]float64
	// seedPairs and learnedPairs do the same for space sharing: the pair
	// columns (by job ids and type) that had a share in the last solve.
	seedPairs, learnedPairs []pairCol
	// seedBasis and learnedBasis: the max-min LP's final simplex basis by
	// name (space sharing), which starts the next solve's LP.
	seedBasis, learnedBasis *namedBasis
	// coldLP: the LPs start from scratch (SolveCold).
	coldLP bool

	pairA, pairB []int          // job indices of each pair
	pairT        [][][2]float64 // pair x type -> (throughput of A, of B)
}

func newInstance(p *Problem) *instance { return newIndexedInstance(p, nil) }

// newIndexedInstance is newInstance with the pairs' job indices that
// validate returned (nil: look them up).
func newIndexedInstance(p *Problem, pairJobs [][2]int32) *instance {
	in := &instance{}
	for name := range p.GPUTypes {
		in.types = append(in.types, name)
	}
	sort.Strings(in.types)
	for _, name := range in.types {
		in.counts = append(in.counts, float64(p.GPUTypes[name].Count))
		in.cost = append(in.cost, p.GPUTypes[name].CostPerHour)
	}
	in.jobs = p.Jobs
	for _, j := range p.Jobs {
		in.ids = append(in.ids, j.ID)
		sf := float64(max(j.ScaleFactor, 1)) // validated ≥ 1; tests build instances directly
		row := make([]float64, len(in.types))
		for k, name := range in.types {
			row[k] = j.Throughput[name]
			// Wider than a server: the job cannot be consolidated there.
			if per := p.GPUTypes[name].GPUsPerServer; per > 0 && int(sf) > per {
				if u, ok := j.UnconsolidatedThroughput[name]; ok {
					row[k] = u
				}
			}
		}
		in.tput = append(in.tput, row)
		in.sf = append(in.sf, sf)
		w := j.Weight
		if w == 0 {
			w = 1
		}
		in.weight = append(in.weight, w)
	}
	if len(p.Pairs) == 0 {
		return in
	}
	if pairJobs == nil {
		index := make(map[string]int, len(p.Jobs))
		for i, j := range p.Jobs {
			index[j.ID] = i
		}
		pairJobs = make([][2]int32, len(p.Pairs))
		for i, pr := range p.Pairs {
			pairJobs[i] = [2]int32{int32(index[pr.Jobs[0]]), int32(index[pr.Jobs[1]])}
		}
	}
	// Pairs sharing a throughput map (one per model pair in the simulator)
	// share its dense row: solvers only read pairT. useful: some type
	// where both jobs progress.
	type pairRow struct {
		row    [][2]float64
		useful bool
	}
	rowOf := map[unsafe.Pointer]pairRow{}
	var pairBack [][2]float64 // pair rows are carved from shared chunks
	in.pairA = make([]int, 0, len(p.Pairs))
	in.pairB = make([]int, 0, len(p.Pairs))
	in.pairT = make([][][2]float64, 0, len(p.Pairs))
	for i, pr := range p.Pairs {
		a, b := int(pairJobs[i][0]), int(pairJobs[i][1])
		// Only pairs of equal scale factor can share GPUs (Gavel §3.1).
		if in.sf[a] != in.sf[b] {
			continue
		}
		key := mapKey(pr.Throughput)
		r, ok := rowOf[key]
		if !ok {
			if len(pairBack) < len(in.types) {
				pairBack = make([][2]float64, 256*len(in.types))
			}
			r.row = pairBack[:len(in.types):len(in.types)]
			pairBack = pairBack[len(in.types):]
			for k, name := range in.types {
				r.row[k] = pr.Throughput[name]
				if r.row[k][0] > 0 && r.row[k][1] > 0 {
					r.useful = true
				}
			}
			rowOf[key] = r
		}
		if !r.useful {
			continue
		}
		in.pairA = append(in.pairA, a)
		in.pairB = append(in.pairB, b)
		in.pairT = append(in.pairT, r.row)
	}
	return in
}

// rows is an n x k zero matrix on one backing array.
func rows(n, k int) [][]float64 {
	back := make([]float64, n*k)
	out := make([][]float64, n)
	for i := range out {
		out[i] = back[i*k : (i+1)*k : (i+1)*k]
	}
	return out
}

// pairCol names a pair column across solves: the pair's job ids and a type.
type pairCol struct{ a, b, typ string }

func (in *instance) n() int { return len(in.ids) }
func (in *instance) k() int { return len(in.types) }

// equalShareThroughput is P_m: the job's throughput on an equal share of
// every type, Σ_j T_mj N_j / Σ_j N_j (Gavel's normalization for LAS).
func (in *instance) equalShareThroughput(m int) float64 {
	var num, den float64
	for j := range in.types {
		num += in.tput[m][j] * in.counts[j]
		den += in.counts[j]
	}
	return num / den
}

// Allocation is a policy's answer: X[m][j] is the fraction of time job m
// spends on type j alone, PairX[p][j] the fraction pair p spends sharing j.
type Allocation struct {
	Policy    string
	Objective float64
	Types     []string
	JobIDs    []string
	X         [][]float64
	PairJobs  [][2]string
	PairX     [][]float64
	// Effective is each job's throughput under the allocation, steps/s.
	Effective []float64
	SolveMS   float64
	// gandiva_fair only: each user's GPUs per type from its tickets before
	// trading (FairShares) and after (UserShares), and the trades made.
	FairShares fairshare.Shares  `json:"fair_shares,omitempty"`
	UserShares fairshare.Shares  `json:"user_shares,omitempty"`
	Trades     []fairshare.Trade `json:"trades,omitempty"`
}

func newAllocation(policy string, in *instance) *Allocation {
	a := &Allocation{Policy: policy, Types: in.types, JobIDs: in.ids}
	a.X = rows(in.n(), in.k())
	if len(in.pairA) > 0 {
		// One backing array for all rows: thousands of pairs per solve.
		a.PairJobs = make([][2]string, len(in.pairA))
		for p := range in.pairA {
			a.PairJobs[p] = [2]string{in.ids[in.pairA[p]], in.ids[in.pairB[p]]}
		}
		a.PairX = rows(len(in.pairA), in.k())
	}
	return a
}

// finish clips numerical noise into [0, 1] and computes effective throughputs.
func (a *Allocation) finish(in *instance) {
	clip := func(v float64) float64 {
		if v < 1e-12 {
			return 0
		}
		if v > 1 {
			return 1
		}
		return v
	}
	for m := range a.X {
		for j := range a.X[m] {
			a.X[m][j] = clip(a.X[m][j])
		}
	}
	for p := range a.PairX {
		for j := range a.PairX[p] {
			a.PairX[p][j] = clip(a.PairX[p][j])
		}
	}
	a.Effective = effective(a, in)
}

// MarshalJSON writes the CLI contract's output shape.
func (a *Allocation) MarshalJSON() ([]byte, error) {
	type pairOut map[string]any
	out := struct {
		Policy     string                        `json:"policy"`
		Objective  float64                       `json:"objective"`
		Allocation map[string]map[string]float64 `json:"allocation"`
		Pairs      []pairOut                     `json:"pair_allocation"`
		Effective  map[string]float64            `json:"effective_throughput"`
		SolveMS    float64                       `json:"solve_ms"`
		FairShares fairshare.Shares              `json:"fair_shares,omitempty"`
		UserShares fairshare.Shares              `json:"user_shares,omitempty"`
		Trades     []fairshare.Trade             `json:"trades,omitempty"`
	}{Policy: a.Policy, Objective: jsonNumber(a.Objective), SolveMS: a.SolveMS,
		FairShares: a.FairShares, UserShares: a.UserShares, Trades: a.Trades,
		Allocation: map[string]map[string]float64{}, Effective: map[string]float64{}, Pairs: []pairOut{}}
	for m, id := range a.JobIDs {
		row := map[string]float64{}
		for j, t := range a.Types {
			row[t] = a.X[m][j]
		}
		out.Allocation[id] = row
		out.Effective[id] = a.Effective[m]
	}
	for p, jobs := range a.PairJobs {
		row := pairOut{"jobs": jobs}
		used := false
		for j, t := range a.Types {
			row[t] = a.PairX[p][j]
			used = used || a.PairX[p][j] > 0
		}
		if used {
			out.Pairs = append(out.Pairs, row)
		}
	}
	return json.Marshal(out)
}

// jsonNumber keeps the output valid JSON when an objective is unbounded.
func jsonNumber(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}

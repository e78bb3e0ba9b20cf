package round

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/cells"
	"github.com/rondo-sched/rondo/allocator/engine"
)

const roundS = 360

func v100Types() []cells.CellType {
	return []cells.CellType{
		{Name: "v100", GPUType: "v100"},
		{Name: "v100-pair", Child: "v100", Count: 2},
		{Name: "v100-quad", Child: "v100-pair", Count: 2},
		{Name: "v100-node", Child: "v100-quad", Count: 2, Node: true},
	}
}

// sharedSpec: four nodes, three VCs with quotas of different shapes.
func sharedSpec() cells.Spec {
	return cells.Spec{
		Types: v100Types(),
		Cells: []cells.TopCell{{Name: "n0", Type: "v100-node"}, {Name: "n1", Type: "v100-node"}, {Name: "n2", Type: "v100-node"}, {Name: "n3", Type: "v100-node"}},
		VCs: []cells.VC{
			{Name: "a", Quota: []cells.Quota{{Type: "v100-node", Count: 2}}},
			{Name: "b", Quota: []cells.Quota{{Type: "v100-quad", Count: 2}, {Type: "v100", Count: 2}}},
			{Name: "c", Quota: []cells.Quota{{Type: "v100-pair", Count: 1}, {Type: "v100", Count: 4}}},
		},
	}
}

// privateSpec is VC v's quota as a cluster of its own, same names.
func privateSpec(s cells.Spec, v int) cells.Spec {
	p := cells.Spec{Types: s.Types, VCs: []cells.VC{{Name: s.VCs[v].Name}}}
	for _, q := range s.VCs[v].Quota {
		p.VCs[0].Quota = append(p.VCs[0].Quota, cells.Quota{Chain: q.Type, Type: q.Type, Count: q.Count})
		for k := 0; k < q.Count; k++ {
			p.Cells = append(p.Cells, cells.TopCell{Name: fmt.Sprintf("p%d", len(p.Cells)), Type: q.Type})
		}
	}
	return p
}

type simJob struct {
	CellJob
	doneS, startS float64
}

// run simulates rounds of roundS on a round grid from 0: arrivals join at
// the next boundary, a job in the plan runs for the round (1 step/s).
// It returns each VC's plans (nil entries kept) and the jobs' outcomes.
func run(t *testing.T, spec cells.Spec, policies []string, oppPolicy string, jobs []CellJob) ([][]*engine.Plan, map[string]*simJob) {
	t.Helper()
	a, err := cells.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	a.SetChecking(true)
	var vcs []VC
	for i, v := range spec.VCs {
		e, err := engine.New(engine.Config{Policy: policies[i], RoundS: roundS})
		if err != nil {
			t.Fatal(err)
		}
		vcs = append(vcs, VC{Name: v.Name, Engine: e})
	}
	var opp *engine.Engine
	if oppPolicy != "" {
		if opp, err = engine.New(engine.Config{Policy: oppPolicy, RoundS: roundS}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewCellLayer(a, vcs, opp)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*simJob{}
	var order []*simJob
	for _, j := range jobs {
		sj := &simJob{CellJob: j, doneS: -1, startS: -1}
		out[j.ID] = sj
		order = append(order, sj)
	}
	plans := make([][]*engine.Plan, len(vcs))
	for now := 0.0; ; now += roundS {
		var snap CellSnapshot
		left := false
		for _, j := range order {
			if j.doneS < 0 {
				left = true
				if j.ArrivalS <= now {
					snap.Jobs = append(snap.Jobs, j.CellJob)
				}
			}
		}
		if !left {
			break
		}
		if now > 1e6 {
			t.Fatal("simulation does not end")
		}
		snap.TimeS = now
		res, err := s.Round(snap)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Dropped) > 0 {
			t.Fatalf("t=%v: dropped %v", now, res.Dropped)
		}
		for v, p := range res.VCPlans {
			plans[v] = append(plans[v], p)
		}
		checkPlan(t, a, res)
		for _, as := range res.Plan.Assignments {
			j := out[as.Jobs[0]]
			if j.startS < 0 {
				j.startS = now
			}
			step := min(float64(roundS), j.RemainingSteps)
			j.RemainingSteps -= step
			if j.ReceivedS == nil {
				j.ReceivedS = map[string]float64{}
			}
			j.ReceivedS[as.Type] += step
			if j.RemainingSteps <= 0 {
				j.doneS = now + step
			}
		}
	}
	return plans, out
}

// checkPlan: no GPU twice, each assignment is its gang, guaranteed gangs in
// their VC's GPUs' count, allocator invariants.
func checkPlan(t *testing.T, a *cells.Allocator, res *CellResult) {
	t.Helper()
	seen := map[string]string{}
	for _, as := range res.Plan.Assignments {
		g, ok := a.Gang(as.Jobs[0])
		if !ok || !slices.Equal(slices.Concat(g.Members...), as.GPUs) {
			t.Fatalf("assignment %v is not the gang %v", as, g)
		}
		for _, id := range as.GPUs {
			if o, dup := seen[id]; dup {
				t.Fatalf("GPU %s given to %s and %s", id, o, as.Jobs[0])
			}
			seen[id] = as.Jobs[0]
		}
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func randomJobs(rng *rand.Rand, spec cells.Spec, n int, opp bool) []CellJob {
	var out []CellJob
	at := 0.0
	for i := 0; i < n; i++ {
		at += float64(rng.Intn(4 * roundS))
		sf := []int{1, 1, 1, 2, 4, 8}[rng.Intn(6)]
		steps := float64(roundS * (1 + rng.Intn(12)))
		j := CellJob{Job: engine.Job{ID: fmt.Sprint(i), ScaleFactor: sf, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			ArrivalS: at, TotalSteps: steps, RemainingSteps: steps}, VC: spec.VCs[rng.Intn(len(spec.VCs))].Name}
		if opp && rng.Intn(3) == 0 {
			j.Opportunistic = true
		}
		if !j.Opportunistic && j.VC == "c" && sf > 2 {
			j.ScaleFactor = 2 // c's largest cell is a pair
		}
		out = append(out, j)
	}
	return out
}

// TestNoSharingAnomaly: on seeded random workloads with opportunistic jobs,
// every VC's plans (on its virtual GPUs) are those of its private cluster
// under the same policy, round by round, so its jobs start and finish at
// the same times.
func TestNoSharingAnomaly(t *testing.T) {
	spec := sharedSpec()
	policies := []string{"max_min_fairness_perf", "fifo", "finish_time_fairness_perf"}
	for seed := int64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewSource(seed))
		jobs := randomJobs(rng, spec, 60, true)
		shared, out := run(t, spec, policies, "max_min_fairness_perf", jobs)
		for v, vc := range spec.VCs {
			var own []CellJob
			for _, j := range jobs {
				if j.VC == vc.Name && !j.Opportunistic {
					own = append(own, j)
				}
			}
			private, pout := run(t, privateSpec(spec, v), policies[v:v+1], "", own)
			got := compact(shared[v])
			want := compact(private[0])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d vc %s: shared plans differ from the private cluster's:\n%v\n%v", seed, vc.Name, got, want)
			}
			for _, j := range own {
				if out[j.ID].startS != pout[j.ID].startS || out[j.ID].doneS != pout[j.ID].doneS {
					t.Fatalf("seed %d job %s: shared start/finish %v/%v, private %v/%v", seed, j.ID,
						out[j.ID].startS, out[j.ID].doneS, pout[j.ID].startS, pout[j.ID].doneS)
				}
			}
		}
		for _, j := range out {
			if j.doneS < 0 {
				t.Fatalf("seed %d: job %s never finished", seed, j.ID)
			}
		}
	}
}

// compact drops rounds without a plan and keeps what a VC decided.
func compact(ps []*engine.Plan) []string {
	var out []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		s := fmt.Sprint(p.TimeS)
		for _, a := range p.Assignments {
			s += fmt.Sprintf(" %v@%v:%s", a.Jobs, a.GPUs, a.Action)
		}
		out = append(out, s)
	}
	return out
}

// TestPolicyChangesOrder: on a one-pair VC, three 2-GPU jobs of three
// rounds each: FIFO runs them one after the other; LAS shares the pair
// round by round, so the second job starts before the first finishes.
func TestPolicyChangesOrder(t *testing.T) {
	spec := cells.Spec{Types: v100Types(), Cells: []cells.TopCell{{Name: "n0", Type: "v100-node"}},
		VCs: []cells.VC{{Name: "x", Quota: []cells.Quota{{Type: "v100-pair", Count: 1}}}, {Name: "y", Quota: []cells.Quota{{Type: "v100-pair", Count: 3}}}}}
	var jobs []CellJob
	for i := 0; i < 3; i++ {
		jobs = append(jobs, CellJob{Job: engine.Job{ID: fmt.Sprint(i), ScaleFactor: 2, Throughput: map[string]float64{"v100": 1}, Weight: 1,
			ArrivalS: float64(i), TotalSteps: 3 * roundS, RemainingSteps: 3 * roundS}, VC: "x"})
	}
	_, fifo := run(t, spec, []string{"fifo", "fifo"}, "", jobs)
	_, las := run(t, spec, []string{"max_min_fairness_perf", "fifo"}, "", jobs)
	if fifo["1"].startS < fifo["0"].doneS || fifo["2"].startS < fifo["1"].doneS {
		t.Fatalf("fifo: starts %v %v %v, finishes %v %v", fifo["0"].startS, fifo["1"].startS, fifo["2"].startS, fifo["0"].doneS, fifo["1"].doneS)
	}
	if las["1"].startS >= las["0"].doneS {
		t.Fatalf("las: job 1 starts at %v, after job 0 finished at %v", las["1"].startS, las["0"].doneS)
	}
}

func TestNewChecksEngines(t *testing.T) {
	a, err := cells.New(sharedSpec())
	if err != nil {
		t.Fatal(err)
	}
	e, _ := engine.New(engine.Config{Policy: "fifo"})
	if _, err := NewCellLayer(a, []VC{{Name: "a", Engine: e}}, nil); err == nil {
		t.Fatal("one engine for three VCs accepted")
	}
	if _, err := NewCellLayer(a, []VC{{Name: "a", Engine: e}, {Name: "c", Engine: e}, {Name: "b", Engine: e}}, nil); err == nil {
		t.Fatal("engines out of order accepted")
	}
}

// TestCellsHonourEngineType: a VC whose quota lists its K80 node before its
// V100 node, six 1-GPU jobs on its four GPUs under LAS. The engine moves a
// job to the type it has received no time on; the cells must place it on
// that type (they used to take the first cells that fit, so the job stayed
// on its K80, kept top priority on V100 every round, and the two jobs
// beyond the four GPUs ran only once the others had finished). Every job
// starts within three rounds.
func TestCellsHonourEngineType(t *testing.T) {
	spec := cells.Spec{
		Types: []cells.CellType{{Name: "v100", GPUType: "v100"}, {Name: "v100-node", Child: "v100", Count: 2, Node: true},
			{Name: "k80", GPUType: "k80"}, {Name: "k80-node", Child: "k80", Count: 2, Node: true}},
		Cells: []cells.TopCell{{Name: "a", Type: "v100-node"}, {Name: "b", Type: "k80-node"}},
		VCs:   []cells.VC{{Name: "research", Quota: []cells.Quota{{Type: "k80-node", Count: 1}, {Type: "v100-node", Count: 1}}}},
	}
	var jobs []CellJob
	for i := 0; i < 6; i++ {
		jobs = append(jobs, CellJob{Job: engine.Job{ID: fmt.Sprint("r", i), ScaleFactor: 1, Throughput: map[string]float64{"v100": 4, "k80": 1}, Weight: 1,
			TotalSteps: 12 * roundS, RemainingSteps: 12 * roundS}, VC: "research"})
	}
	_, out := run(t, spec, []string{"max_min_fairness_perf"}, "", jobs)
	for _, j := range jobs {
		if s := out[j.ID].startS; s < 0 || s > 2*roundS {
			t.Errorf("job %s first ran at %v s, want within three rounds (%d s each)", j.ID, s, roundS)
		}
	}
}

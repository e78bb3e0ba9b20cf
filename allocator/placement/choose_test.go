package placement

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// planned returns a fixed plan (intents by engine.Annotate) and records a
// copy of it.
type planned struct {
	plan func(s *engine.Snapshot) *engine.Plan
	last *engine.Plan
}

func (d *planned) Round(s *engine.Snapshot) (*engine.Plan, error) {
	p := d.plan(s)
	engine.Annotate(s, p, nil)
	d.last = clonePlan(p)
	return p, nil
}

func clonePlan(p *engine.Plan) *engine.Plan {
	c := *p
	c.Assignments = make([]engine.Assignment, len(p.Assignments))
	for i, a := range p.Assignments {
		a.Jobs, a.GPUs, a.Servers = slices.Clone(a.Jobs), slices.Clone(a.GPUs), slices.Clone(a.Servers)
		a.Resources = slices.Clone(a.Resources)
		c.Assignments[i] = a
	}
	c.Intents = slices.Clone(p.Intents)
	c.Suspend = slices.Clone(p.Suspend)
	return &c
}

// paperSnapshot is n paper servers of 8 v100s each (s0, s1, ...; GPUs
// s0g0 ... s0g7, ...).
func paperSnapshot(n int) *engine.Snapshot {
	s := &engine.Snapshot{}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		s.Nodes = append(s.Nodes, engine.Node{ID: id, Name: id, Ready: true, Cores: 24, MemGB: 500})
		for g := range 8 {
			s.GPUs = append(s.GPUs, engine.GPU{ID: fmt.Sprintf("%sg%d", id, g), Type: "v100", Server: id})
		}
	}
	return s
}

// TestChooseMostRoom: the mechanism puts a newcomer alexnet (best case 12
// cores) on the last GPU of a server whose kept jobs hold 21 of its 24
// cores; with Choose it goes to the other server, where 20 cores are free,
// and gets its best case; the kept jobs do not move.
func TestChooseMostRoom(t *testing.T) {
	s := paperSnapshot(2)
	for g := range 7 {
		id := fmt.Sprintf("k%d", g)
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Profile: "res18", Started: true})
		s.Running = append(s.Running, engine.Assignment{Jobs: []string{id}, Type: "v100", GPUs: []string{fmt.Sprintf("s0g%d", g)},
			Servers: []string{"s0"}, Resources: []engine.Resources{{Cores: 3, MemGB: 62.5}}})
	}
	for g := range 4 {
		id := fmt.Sprintf("l%d", g)
		s.Jobs = append(s.Jobs, engine.Job{ID: id, ScaleFactor: 1, Profile: "gnmt", Started: true})
		s.Running = append(s.Running, engine.Assignment{Jobs: []string{id}, Type: "v100", GPUs: []string{fmt.Sprintf("s1g%d", g)},
			Servers: []string{"s1"}, Resources: []engine.Resources{{Cores: 1, MemGB: 62.5}}})
	}
	s.Jobs = append(s.Jobs, engine.Job{ID: "new", ScaleFactor: 1, Profile: "alexnet"})
	d := &planned{plan: func(s *engine.Snapshot) *engine.Plan {
		p := &engine.Plan{}
		for _, a := range s.Running {
			a.Action = engine.Keep
			p.Assignments = append(p.Assignments, a)
		}
		p.Assignments = append(p.Assignments, engine.Assignment{Jobs: []string{"new"}, Type: "v100", GPUs: []string{"s0g7"},
			Servers: []string{"s0"}, Action: engine.Start})
		return p
	}}
	for _, choose := range []bool{false, true} {
		st := &Stage{Next: d, Mode: func(string) Mode { return Tune }, Options: Options{Leftover: true, Choose: choose}}
		p, err := st.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		a := p.Assignments[len(p.Assignments)-1]
		want, cores := "s0g7", 3.0
		if choose {
			want, cores = "s1g4", 12
		}
		if !slices.Equal(a.GPUs, []string{want}) || !slices.Equal(a.Servers, []string{want[:2]}) || a.Resources[0].Cores != cores {
			t.Errorf("choose %v: %+v, want on %s with %g cores", choose, a, want, cores)
		}
		in := p.Intents[len(p.Intents)-1]
		if in.Job != "new" || in.Intent != engine.IntentAdmit || !slices.Equal(in.GPUs, a.GPUs) || !slices.Equal(in.Servers, a.Servers) {
			t.Errorf("choose %v: intent %+v", choose, in)
		}
		for i, a := range p.Assignments[:len(p.Assignments)-1] {
			if !slices.Equal(a.GPUs, s.Running[i].GPUs) || p.Intents[i].Intent != engine.IntentKeep {
				t.Errorf("choose %v: kept job moved or retuned: %+v, %+v", choose, a, p.Intents[i])
			}
		}
	}
}

// randomPlans is a decider that keeps some running jobs where they are,
// suspends the others and starts waiting jobs on random free GPUs as a
// mechanism might: most on one server, some over two, some pairs sharing
// a GPU.
func randomPlans(rng *rand.Rand) func(s *engine.Snapshot) *engine.Plan {
	return func(s *engine.Snapshot) *engine.Plan {
		p := &engine.Plan{TimeS: s.TimeS}
		failed, srvOf := map[string]bool{}, map[string]string{}
		for _, g := range s.GPUs {
			failed[g.ID], srvOf[g.ID] = g.Failed, g.Server
		}
		used, placed := map[string]bool{}, map[string]bool{}
		for _, a := range s.Running {
			if rng.Intn(3) > 0 && !slices.ContainsFunc(a.GPUs, func(g string) bool { return failed[g] }) {
				a.Action, a.Resources = engine.Keep, nil
				p.Assignments = append(p.Assignments, a)
				for _, g := range a.GPUs {
					used[g] = true
				}
				for _, id := range a.Jobs {
					placed[id] = true
				}
				continue
			}
			p.Suspend = append(p.Suspend, a.Jobs...)
		}
		free := func() map[string][]string {
			out := map[string][]string{}
			for _, g := range s.GPUs {
				if !g.Failed && !used[g.ID] {
					out[g.Server] = append(out[g.Server], g.ID)
				}
			}
			return out
		}
		var waiting []*engine.Job
		for i := range s.Jobs {
			if !placed[s.Jobs[i].ID] && !slices.Contains(p.Suspend, s.Jobs[i].ID) {
				waiting = append(waiting, &s.Jobs[i])
			}
		}
		for i := 0; i < len(waiting); i++ {
			j := waiting[i]
			fr := free()
			var srvs []string
			for id, gs := range fr {
				if len(gs) >= j.ScaleFactor {
					srvs = append(srvs, id)
				}
			}
			sort.Strings(srvs)
			a := engine.Assignment{Jobs: []string{j.ID}, Type: "v100", Action: engine.Start}
			switch {
			case j.ScaleFactor == 2 && len(fr) >= 2 && rng.Intn(5) == 0:
				var two []string
				for id := range fr {
					two = append(two, id)
				}
				sort.Strings(two)
				a.GPUs = []string{fr[two[0]][0], fr[two[1]][0]}
			case len(srvs) > 0:
				sv := srvs[rng.Intn(len(srvs))]
				a.GPUs = fr[sv][:j.ScaleFactor]
				if j.ScaleFactor == 1 && i+1 < len(waiting) && waiting[i+1].ScaleFactor == 1 && rng.Intn(6) == 0 {
					i++
					a.Jobs = append(a.Jobs, waiting[i].ID)
				}
			default:
				continue
			}
			for _, g := range a.GPUs {
				used[g] = true
				if id := srvOf[g]; !slices.Contains(a.Servers, id) {
					a.Servers = append(a.Servers, id)
				}
			}
			p.Assignments = append(p.Assignments, a)
		}
		return p
	}
}

// TestChooseProperties runs the stage with Choose over random rounds (a
// random mechanism, failed GPUs, jobs leaving and arriving) and checks
// that the same jobs run on as many GPUs of the same type as the mechanism
// chose, that kept, shared and multi-server jobs keep their GPUs and a job
// on one server stays on one, that no GPU is used twice or failed, that
// intents match the assignments (as engine.Annotate derives them), that no
// server is over capacity, and that no starting job TUNE left below its
// best case could have had it on a server with idle GPUs and the room.
func TestChooseProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	names := []string{"alexnet", "res18", "gnmt", "mobilenet", "m5", "transformer", "shufflenet", "deepspeech", "res50", "vae", ""}
	sizes := []int{1, 1, 1, 1, 2, 4}
	runs := 60
	if testing.Short() {
		runs = 15
	}
	moves := 0
	for run := range runs {
		s := paperSnapshot(1 + rng.Intn(4))
		for i := range s.GPUs {
			s.GPUs[i].Failed = rng.Intn(20) == 0
		}
		d := &planned{plan: randomPlans(rng)}
		st := &Stage{Next: d, Mode: func(string) Mode { return Tune }, Options: Options{Leftover: true, Choose: true}}
		next := 0
		for round := range 8 {
			s.TimeS = float64(round) * 300
			for range rng.Intn(len(s.GPUs)/2 + 1) {
				next++
				s.Jobs = append(s.Jobs, engine.Job{ID: fmt.Sprintf("j%d", next), ScaleFactor: sizes[rng.Intn(len(sizes))],
					Profile: names[rng.Intn(len(names))]})
			}
			p, err := st.Round(s)
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("run %d round %d", run, round)
			moves += checkChoice(t, where, st, s, d.last, p)
			// Next round: the plan runs; some jobs finish.
			s.Running = p.Assignments
			ran := map[string]bool{}
			for _, a := range p.Assignments {
				for _, id := range a.Jobs {
					ran[id] = true
				}
			}
			jobs := s.Jobs[:0]
			for _, j := range s.Jobs {
				if ran[j.ID] && rng.Intn(5) == 0 {
					s.Running = slices.DeleteFunc(slices.Clone(s.Running), func(a engine.Assignment) bool { return slices.Contains(a.Jobs, j.ID) })
					continue
				}
				j.Started = j.Started || ran[j.ID]
				jobs = append(jobs, j)
			}
			s.Jobs = jobs
			// A finished job's partner stops too.
			alive := map[string]bool{}
			for _, j := range s.Jobs {
				alive[j.ID] = true
			}
			s.Running = slices.DeleteFunc(s.Running, func(a engine.Assignment) bool {
				return slices.ContainsFunc(a.Jobs, func(id string) bool { return !alive[id] })
			})
		}
	}
	if moves == 0 {
		t.Error("choose never moved a job")
	}
}

// checkChoice checks one round (TestChooseProperties) and returns how many
// jobs choose moved.
func checkChoice(t *testing.T, where string, st *Stage, s *engine.Snapshot, orig, p *engine.Plan) int {
	t.Helper()
	gpu := map[string]engine.GPU{}
	for _, g := range s.GPUs {
		gpu[g.ID] = g
	}
	if len(orig.Assignments) != len(p.Assignments) {
		t.Fatalf("%s: %d assignments, the mechanism's %d", where, len(p.Assignments), len(orig.Assignments))
	}
	moved := 0
	used := map[string]bool{}
	retuned := false
	for _, in := range p.Intents {
		retuned = retuned || in.Intent == engine.IntentRetune
	}
	for i, a := range p.Assignments {
		o := orig.Assignments[i]
		if !slices.Equal(a.Jobs, o.Jobs) || a.Type != o.Type || len(a.GPUs) != len(o.GPUs) {
			t.Fatalf("%s: %+v, the mechanism's %+v", where, a, o)
		}
		fixed := o.Action == engine.Keep || len(o.Jobs) > 1 || len(o.Servers) > 1
		if fixed && !slices.Equal(a.GPUs, o.GPUs) {
			t.Fatalf("%s: %+v moved from %v (kept, shared or multi-server)", where, a, o.GPUs)
		}
		if !slices.Equal(a.GPUs, o.GPUs) {
			moved++
		}
		for _, g := range a.GPUs {
			if used[g] || gpu[g].Failed || gpu[g].Type != a.Type || gpu[g].ID == "" {
				t.Fatalf("%s: %+v: GPU %s used twice, failed, unknown or of another type", where, a, g)
			}
			used[g] = true
			if gpu[g].Server != gpu[a.GPUs[0]].Server && len(o.Servers) == 1 {
				t.Fatalf("%s: %+v: a one-server job over several", where, a)
			}
		}
		if len(o.Servers) == 1 && !slices.Equal(a.Servers, []string{gpu[a.GPUs[0]].Server}) {
			t.Fatalf("%s: %+v: servers", where, a)
		}
	}
	// Intents as engine.Annotate derives them from the final assignments
	// (a retune is a kept job with a new grant).
	re := clonePlan(p)
	engine.Annotate(s, re, nil)
	if len(re.Intents) != len(p.Intents) {
		t.Fatalf("%s: %d intents, Annotate %d", where, len(p.Intents), len(re.Intents))
	}
	for k, in := range p.Intents {
		r := re.Intents[k]
		kind := in.Intent
		if kind == engine.IntentRetune {
			kind = engine.IntentKeep
		}
		if in.Job != r.Job || kind != r.Intent || !slices.Equal(in.GPUs, r.GPUs) || !slices.Equal(in.Servers, r.Servers) || !slices.Equal(in.From, r.From) {
			t.Fatalf("%s: intent %+v, Annotate %+v", where, in, r)
		}
	}
	// Capacity and room.
	type room struct{ c, m float64 }
	free := map[string]*room{}
	for _, n := range s.Nodes {
		free[n.ID] = &room{n.Cores, n.MemGB}
	}
	for _, a := range p.Assignments {
		for k := range a.Jobs {
			for _, g := range a.GPUs {
				f := 1 / float64(len(a.GPUs))
				free[gpu[g].Server].c -= f * a.Resources[k].Cores
				free[gpu[g].Server].m -= f * a.Resources[k].MemGB
			}
		}
	}
	idle := map[string]int{}
	for _, g := range s.GPUs {
		if !g.Failed && !used[g.ID] {
			idle[g.Server]++
		}
	}
	for id, r := range free {
		if r.c < -1e-6 || r.m < -1e-6 {
			t.Fatalf("%s: server %s over capacity by %.3f cores, %.3f GB", where, id, -r.c, -r.m)
		}
	}
	if retuned {
		return moved // a shrink may free more than it needed
	}
	byID := map[string]*engine.Job{}
	for i := range s.Jobs {
		byID[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for i, a := range p.Assignments {
		o := orig.Assignments[i]
		if o.Action == engine.Keep || len(o.Jobs) > 1 || len(o.Servers) > 1 {
			continue
		}
		n := len(a.GPUs)
		pr := synergy.Flat()
		if j := byID[a.Jobs[0]]; j.Profile != "" {
			pr = st.profile(j, n, &Server{GPUs: 8, Cores: 24, MemGB: 500})
		}
		bc, bm := math.Min(pr.CoresPerGPUBest*float64(n), 24), math.Min(pr.MemGBPerGPUBest*float64(n), 500)
		if a.Resources[0].Cores+1e-6 >= bc && a.Resources[0].MemGB+1e-6 >= bm {
			continue
		}
		for id, r := range free {
			if idle[id] >= n && r.c+1e-6 >= bc && r.m+1e-6 >= bm {
				t.Fatalf("%s: %s got %+v below its best case (%g cores, %g GB) while %s has %d idle GPUs, %.2f cores, %.2f GB free",
					where, a.Jobs[0], a.Resources[0], bc, bm, id, idle[id], r.c, r.m)
			}
		}
	}
	return moved
}

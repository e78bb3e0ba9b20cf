package engine

import (
	"fmt"
	"sort"
)

// unit is a schedulable entity: one job, or a pair sharing GPUs.
type unit struct {
	key   string
	jobs  []string
	sf    int
	tput  map[string][2]float64 // per type; [1] unused for a job
	order int
}

type candidate struct {
	u        *unit
	priority float64
	deficit  float64
	x        float64
}

// Round decides one round: it brings the allocation up to date, selects
// units per GPU type in priority order and places them.
func (e *Engine) Round(s *Snapshot) (*Plan, error) {
	recomputed, solveMS, err := e.Allocate(s)
	if err != nil {
		return nil, err
	}
	e.rounds++
	plan := &Plan{TimeS: s.TimeS, Recomputed: recomputed, SolveMS: solveMS, Allocation: e.alloc}

	e.cum = cumulative(s)
	units := e.units(s)
	order := e.typeOrder(s.GPUs)
	free := healthyCounts(s.GPUs)
	selected := e.selectUnits(units, order, free)
	plan.Assignments = e.place(s, order, selected)

	running := map[string]bool{}
	for _, a := range plan.Assignments {
		for _, j := range a.Jobs {
			running[j] = true
		}
	}
	active := map[string]bool{}
	for _, j := range s.Jobs {
		active[j.ID] = true
	}
	seen := map[string]bool{}
	for _, a := range s.Running {
		for _, j := range a.Jobs {
			if active[j] && !running[j] && !seen[j] {
				seen[j] = true
				plan.Suspend = append(plan.Suspend, j)
			}
		}
	}
	return plan, nil
}

// units lists jobs (arrival order) and, when packing, the pairs; a pair
// follows its later job, as in the reference's priority tables.
func (e *Engine) units(s *Snapshot) []*unit {
	var out []*unit
	pos := map[string]int{}
	sf := map[string]int{}
	for i, j := range s.Jobs {
		pos[j.ID] = i
		sf[j.ID] = max(j.ScaleFactor, 1)
		tp := map[string][2]float64{}
		for t, v := range j.Throughput {
			tp[t] = [2]float64{v, 0}
		}
		out = append(out, &unit{key: j.ID, jobs: []string{j.ID}, sf: sf[j.ID], tput: tp, order: 2 * i * len(s.Jobs)})
	}
	if e.packing {
		for _, p := range s.Pairs {
			a, aok := pos[p.Jobs[0]]
			b, bok := pos[p.Jobs[1]]
			if !aok || !bok || sf[p.Jobs[0]] != sf[p.Jobs[1]] {
				continue
			}
			late, early := max(a, b), min(a, b)
			out = append(out, &unit{key: UnitKey(p.Jobs[:]), jobs: []string{p.Jobs[0], p.Jobs[1]},
				sf: sf[p.Jobs[0]], tput: p.Throughput, order: 2*late*len(s.Jobs) + 1 + early})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

var gavelTypeOrder = []string{"v100", "p100", "k80"}

func (e *Engine) typeOrder(gpus []GPU) []string {
	present := map[string]bool{}
	for _, t := range typeNames(gpus) {
		present[t] = true
	}
	pref := e.cfg.TypeOrder
	if pref == nil {
		pref = gavelTypeOrder
	}
	var out []string
	for _, t := range pref {
		if present[t] {
			out = append(out, t)
			delete(present, t)
		}
	}
	for _, t := range typeNames(gpus) {
		if present[t] {
			out = append(out, t)
		}
	}
	if e.shuffle {
		e.shuffler.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// selectUnits is the greedy selection: per type in order, candidates by
// (priority, deficit, X) descending; a job runs at most once per round, a
// unit only where its whole scale factor fits.
func (e *Engine) selectUnits(units []*unit, order []string, free map[string]int) map[string][]*candidate {
	selected := map[string][]*candidate{}
	taken := map[string]bool{}
	for _, t := range order {
		cands := e.candidates(units, t)
		for _, c := range cands {
			if free[t] == 0 {
				break
			}
			u := c.u
			busy := false
			for _, j := range u.jobs {
				busy = busy || taken[j]
			}
			if busy {
				continue
			}
			tp := u.tput[t]
			if tp[0] <= 0 || (len(u.jobs) == 2 && tp[1] <= 0) {
				continue
			}
			if e.fifo && c.priority <= 0 {
				continue
			}
			if u.sf > free[t] {
				continue
			}
			free[t] -= u.sf
			for _, j := range u.jobs {
				taken[j] = true
			}
			selected[t] = append(selected[t], c)
		}
	}
	return selected
}

func (e *Engine) candidates(units []*unit, t string) []*candidate {
	// Fractions of the type's received time since the last recompute.
	recv := make([]float64, len(units))
	total := 0.0
	for i, u := range units {
		recv[i] = e.received(u, t)
		total += recv[i]
	}
	out := make([]*candidate, 0, len(units))
	for i, u := range units {
		x, _ := e.x(u.key, t)
		c := &candidate{u: u, x: x, deficit: e.deficit[u.key][t]}
		tp := u.tput[t]
		switch {
		case x == 0 || tp[0] <= 0 || (len(u.jobs) == 2 && tp[1] <= 0):
			c.priority = 0
		case total == 0 || recv[i] <= 0:
			c.priority = x * 1e9 // never ran on this type since the reset: first
		default:
			c.priority = x / (recv[i] / total)
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if a.deficit != b.deficit {
			return a.deficit > b.deficit
		}
		return a.x > b.x
	})
	return out
}

// received reads the unit's credited time from the current snapshot.
func (e *Engine) received(u *unit, t string) float64 {
	r := e.cum[u.key][t] - e.baseline[u.key][t]
	if e.cfg.GavelCompat {
		r += e.cfg.RoundS / 2
	}
	return r
}

// place assigns GPUs per type, units in decreasing scale factor: first a
// unit keeps its previous GPUs when it stays on the type and they are free,
// then the rest are packed on as few servers as possible. In compat mode,
// jobs absent from the allocation (arrived after the last recompute) are
// selected but not placed, as in the reference.
func (e *Engine) place(s *Snapshot, order []string, selected map[string][]*candidate) []Assignment {
	prev := map[string]Assignment{}
	for _, a := range s.Running {
		prev[UnitKey(a.Jobs)] = a
	}
	var out []Assignment
	for _, t := range order {
		cl := newCluster(s.GPUs, t)
		cands := selected[t]
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].u.sf > cands[j].u.sf })
		for i := 0; i < len(cands); {
			sf := cands[i].u.sf
			end := i
			for end < len(cands) && cands[end].u.sf == sf {
				end++
			}
			group := cands[i:end]
			placed := make([]bool, len(group))
			for k, c := range group {
				if a, ok := prev[c.u.key]; ok && a.Type == t && cl.allFree(a.GPUs) {
					cl.take(a.GPUs)
					out = append(out, cl.assignment(c, t, a.GPUs, Keep))
					placed[k] = true
				}
			}
			for k, c := range group {
				if placed[k] {
					continue
				}
				if e.cfg.GavelCompat {
					if _, ok := e.xIndex[c.u.key]; !ok {
						continue
					}
				}
				ids := cl.pick(sf)
				if ids == nil {
					panic(fmt.Sprintf("engine: cannot place %s on %d %s GPUs", c.u.key, sf, t))
				}
				out = append(out, cl.assignment(c, t, ids, Start))
			}
			i = end
		}
	}
	return out
}

func cumulative(s *Snapshot) map[string]map[string]float64 {
	c := make(map[string]map[string]float64, len(s.Jobs)+len(s.Pairs))
	for _, j := range s.Jobs {
		c[j.ID] = j.ReceivedS
	}
	for _, p := range s.Pairs {
		c[UnitKey(p.Jobs[:])] = p.ReceivedS
	}
	return c
}

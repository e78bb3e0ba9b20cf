package placement

import (
	"math"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
)

// fixedGPUs runs every job of the snapshot on its GPUs (one v100 each,
// all on server s0), keeping those that ran.
type fixedGPUs map[string]string

func (f fixedGPUs) Round(s *engine.Snapshot) (*engine.Plan, error) {
	ran := map[string]bool{}
	for _, a := range s.Running {
		ran[a.Jobs[0]] = true
	}
	p := &engine.Plan{TimeS: s.TimeS}
	for _, j := range s.Jobs {
		a := engine.Assignment{Jobs: []string{j.ID}, Type: "v100", GPUs: []string{f[j.ID]}, Servers: []string{"s0"}, Action: engine.Start}
		in := engine.IntentAdmit
		if ran[j.ID] {
			a.Action, in = engine.Keep, engine.IntentKeep
		}
		p.Assignments = append(p.Assignments, a)
		p.Intents = append(p.Intents, engine.JobIntent{Job: j.ID, Intent: in, Type: "v100", GPUs: a.GPUs})
	}
	return p, nil
}

// learnRounds runs the stage on one paper server (8 GPUs, 24 cores, 500 GB)
// with jobs whose true profiles are truth (by job), none named: each
// round the jobs report their true throughput (10 steps/s at 1.0) under
// last round's grant. It returns the last plan and the retunes per job.
func learnRounds(t *testing.T, st *Stage, truth map[string]*synergy.Profile, order []string, rounds int) (*engine.Plan, map[string]int) {
	t.Helper()
	f := fixedGPUs{}
	snap := &engine.Snapshot{Nodes: []engine.Node{{ID: "s0", Name: "s0", Ready: true, Cores: 24, MemGB: 500}}}
	for i := 0; i < 8; i++ {
		snap.GPUs = append(snap.GPUs, engine.GPU{ID: "g" + string(rune('0'+i)), Type: "v100", Server: "s0"})
	}
	for i, id := range order {
		f[id] = snap.GPUs[i].ID
	}
	st.Next, st.Mode = f, func(string) Mode { return Tune }
	retunes := map[string]int{}
	var p *engine.Plan
	for r := 0; r < rounds; r++ {
		snap.TimeS = float64(r) * 300
		snap.Jobs = nil
		for _, id := range order {
			j := engine.Job{ID: id, ScaleFactor: 1, Throughput: map[string]float64{"v100": 10}}
			for _, a := range snap.Running {
				if a.Jobs[0] == id {
					c, m := a.Resources[0].Cores, a.Resources[0].MemGB
					j.Measured = map[string]float64{"v100": 10 * truth[id].Throughput(c, m)}
				}
			}
			snap.Jobs = append(snap.Jobs, j)
		}
		var err error
		if p, err = st.Round(snap); err != nil {
			t.Fatal(err)
		}
		for _, in := range p.Intents {
			if in.Intent == engine.IntentRetune {
				retunes[in.Job]++
			}
		}
		snap.Running = p.Assignments
	}
	return p, retunes
}

func grantOf(p *engine.Plan, id string) engine.Resources {
	for _, a := range p.Assignments {
		if a.Jobs[0] == id {
			return a.Resources[0]
		}
	}
	return engine.Resources{}
}

// TestStageLearns: an alexnet and a gnmt, both unnamed, on a server with
// room. Both start at the proportional 3 cores (not Flat's 1); alexnet
// climbs a grid step a round (a retune each) to 12 cores, which gains
// nothing over 9, and returns to its learned best, 9; gnmt tries 4 cores,
// gains nothing and returns to 3. Retunes: one per step plus one.
func TestStageLearns(t *testing.T) {
	truth := map[string]*synergy.Profile{"alex": prof(t, "alexnet_1"), "gnmt": prof(t, "gnmt_1")}
	st := &Stage{Learn: &Learning{}, Options: Options{Leftover: true}}
	p, _ := learnRounds(t, st, truth, []string{"alex", "gnmt"}, 1)
	for _, id := range []string{"alex", "gnmt"} {
		if g := grantOf(p, id); g.Cores != 3 || g.MemGB != 62.5 {
			t.Errorf("round 0: %s gets %+v, want the share (3 cores, 62.5 GB)", id, g)
		}
	}
	st = &Stage{Learn: &Learning{}, Options: Options{Leftover: true}}
	p, retunes := learnRounds(t, st, truth, []string{"alex", "gnmt"}, 12)
	if g := grantOf(p, "alex"); g.Cores != 9 || g.MemGB != 62.5 {
		t.Errorf("alexnet holds %+v, want 9 cores, 62.5 GB", g)
	}
	if g := grantOf(p, "gnmt"); g.Cores != 3 {
		t.Errorf("gnmt holds %+v, want 3 cores", g)
	}
	// alexnet: 3→4→5→6→9→12, back to 9: 6 retunes; gnmt: 3→4→3: 2.
	if retunes["alex"] != 6 || retunes["gnmt"] != 2 {
		t.Errorf("retunes %v, want alex 6, gnmt 2", retunes)
	}
	_, pa := st.Learned("alex", "v100")
	_, pg := st.Learned("gnmt", "v100")
	if pa == nil || pa.CoresPerGPUBest != 9 || math.Abs(pa.Speedup-2) > 1e-9 {
		t.Errorf("alexnet learned %+v, want best 9 cores, speedup 2", pa)
	}
	if pg == nil || pg.CoresPerGPUBest != 3 || pg.Speedup != 1 {
		t.Errorf("gnmt learned %+v, want best 3 cores, speedup 1", pg)
	}
}

// TestStageLearnsNoRoom: eight unnamed alexnets fill the server at their
// share: nothing is left to explore with, so nobody is retuned, and
// nothing is learned.
func TestStageLearnsNoRoom(t *testing.T) {
	truth := map[string]*synergy.Profile{}
	var order []string
	for i := 0; i < 8; i++ {
		id := "a" + string(rune('0'+i))
		truth[id], order = prof(t, "alexnet_1"), append(order, id)
	}
	st := &Stage{Learn: &Learning{}, Options: Options{Leftover: true}}
	p, retunes := learnRounds(t, st, truth, order, 5)
	if len(retunes) != 0 {
		t.Errorf("retunes %v, want none", retunes)
	}
	for _, id := range order {
		if g := grantOf(p, id); g.Cores != 3 {
			t.Errorf("%s holds %+v, want 3 cores", id, g)
		}
		if _, pr := st.Learned(id, "v100"); pr != nil {
			t.Errorf("%s learned a profile from one point", id)
		}
	}
}

// TestStageLearnOff: without Learn an unnamed job is insensitive
// (synergy.Flat: 1 core per GPU under TUNE) and nothing is recorded.
func TestStageLearnOff(t *testing.T) {
	truth := map[string]*synergy.Profile{"alex": prof(t, "alexnet_1")}
	st := &Stage{Options: Options{Leftover: true}}
	p, retunes := learnRounds(t, st, truth, []string{"alex"}, 3)
	if g := grantOf(p, "alex"); g.Cores != 1 || len(retunes) != 0 {
		t.Errorf("alexnet holds %+v after %v retunes, want Flat's 1 core and none", g, retunes)
	}
	if s, _ := st.Learned("alex", "v100"); s != nil {
		t.Errorf("recorded %v without Learn", s)
	}
}

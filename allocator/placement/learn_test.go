package placement

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
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

// histNext is a decider keeping a history (as the engine does).
type histNext struct {
	fixedGPUs
	got []byte
}

func (h *histNext) MarshalHistory() ([]byte, error) { return []byte(`{"engine":1}`), nil }
func (h *histNext) UnmarshalHistory(b []byte) error { h.got = b; return nil }

// TestStageLearnHistory: the samples travel in the stage's history,
// wrapped around Next's, so that a restarted agent carries on; at most
// KeepSamples per grant; a history without samples is Next's as it is.
func TestStageLearnHistory(t *testing.T) {
	truth := map[string]*synergy.Profile{"alex": prof(t, "alexnet_1"), "gnmt": prof(t, "gnmt_1")}
	a := &Stage{Learn: &Learning{}}
	learnRounds(t, a, truth, []string{"alex", "gnmt"}, 30)
	sa, pa := a.Learned("alex", "v100")
	at9 := 0
	for _, s := range sa {
		if s.CoresPerGPU == 9 {
			at9++
		}
	}
	if at9 != KeepSamples {
		t.Errorf("%d samples at 9 cores after 30 rounds, want %d", at9, KeepSamples)
	}
	a.Next = &histNext{}
	h, err := a.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), `"next":{"engine":1}`) || !json.Valid(h) {
		t.Fatalf("history %s", h)
	}
	next := &histNext{}
	b := &Stage{Learn: &Learning{}, Next: next}
	if err := b.UnmarshalHistory(h); err != nil {
		t.Fatal(err)
	}
	if string(next.got) != `{"engine":1}` {
		t.Errorf("Next restored %s", next.got)
	}
	sb, _ := b.Learned("alex", "v100")
	if !reflect.DeepEqual(sa, sb) {
		t.Errorf("restored %v, want %v", sb, sa)
	}
	if pb := b.learned(&engine.Job{ID: "alex"}, "v100", 1, &Server{GPUs: 8, Cores: 24, MemGB: 500}); !reflect.DeepEqual(pa, pb) {
		t.Errorf("learned again %+v, want %+v", pb, pa)
	}
	// Without Learn the samples are dropped, Next's part still restored.
	next = &histNext{}
	if err := (&Stage{Next: next}).UnmarshalHistory(h); err != nil || string(next.got) != `{"engine":1}` {
		t.Errorf("without Learn: %v, Next got %s", err, next.got)
	}
	// Nothing learned: Next's history as it is, both ways.
	c := &Stage{Learn: &Learning{}, Next: &histNext{}}
	if h, _ := c.MarshalHistory(); string(h) != `{"engine":1}` {
		t.Errorf("nothing learned: %s", h)
	}
	if err := c.UnmarshalHistory([]byte(`{"x":2}`)); err != nil || string(c.Next.(*histNext).got) != `{"x":2}` {
		t.Errorf("plain history: %v, Next got %s", err, c.Next.(*histNext).got)
	}
}

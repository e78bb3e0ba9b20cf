package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/state"
)

// histCluster is a Durable backend standing for a cluster that keeps
// running while the agent restarts: 2 V100 + 1 K80, five jobs of different
// throughputs (two arrive later), each running job credited one round.
type histCluster struct {
	t       float64
	running []engine.Assignment
	recv    map[string]map[string]float64
	arrival map[string]float64
	plans   []*engine.Plan
}

func newHistCluster() *histCluster {
	return &histCluster{recv: map[string]map[string]float64{}, arrival: map[string]float64{}}
}

var histJobs = []struct {
	id      string
	v, k    float64
	arrives float64
}{{"a", 10, 3, 0}, {"b", 8, 4, 0}, {"c", 5, 4, 0}, {"d", 12, 2, 3}, {"e", 6, 5, 3}}

func (c *histCluster) Observe() (*engine.Snapshot, error) {
	s := &engine.Snapshot{TimeS: c.t, Running: c.running, GPUs: []engine.GPU{
		{ID: "v0", Type: "v100", Server: "n1"}, {ID: "v1", Type: "v100", Server: "n1"}, {ID: "k0", Type: "k80", Server: "n2"}}}
	for _, j := range histJobs {
		if j.arrives > c.t {
			continue
		}
		if _, ok := c.arrival[j.id]; !ok {
			c.arrival[j.id] = c.t
		}
		r := map[string]float64{}
		for k, v := range c.recv[j.id] {
			r[k] = v
		}
		s.Jobs = append(s.Jobs, engine.Job{ID: j.id, ScaleFactor: 1, Weight: 1, ArrivalS: c.arrival[j.id],
			Throughput: map[string]float64{"v100": j.v, "k80": j.k}, TotalSteps: 1e6, RemainingSteps: 1e6, ReceivedS: r})
	}
	return s, nil
}

func (c *histCluster) Enforce(p *engine.Plan) error {
	c.plans = append(c.plans, p)
	for _, a := range p.Assignments {
		if c.recv[a.Jobs[0]] == nil {
			c.recv[a.Jobs[0]] = map[string]float64{}
		}
		c.recv[a.Jobs[0]][a.Type]++
	}
	c.running = p.Assignments
	c.t++
	return nil
}

// Restore keeps the cluster's own accounting: the state's received time is
// as of the last round's observation, and this test is about the engine's
// history, not about crediting the round the agent stopped in.
func (c *histCluster) Restore(epoch time.Time, arrival map[string]float64, received map[string]map[string]float64) {
	for k, v := range arrival {
		c.arrival[k] = v
	}
	for k, v := range received {
		if c.recv[k] == nil {
			c.recv[k] = v
		}
	}
}
func (c *histCluster) Epoch() time.Time                                    { return time.Unix(1000, 0) }
func (c *histCluster) Intents(p *engine.Plan) []state.Intent               { return nil }
func (c *histCluster) Reconcile([]state.Intent) (a, r []string, err error) { return nil, nil, nil }

func histAgent(t *testing.T, c *histCluster, store Store) *Agent {
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Backend: c, Engine: e, Round: time.Second, Store: store})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func planKey(p *engine.Plan) string {
	s := fmt.Sprint(p.Recomputed)
	for _, a := range p.Assignments {
		s += fmt.Sprintf(" %v@%s%v/%s", a.Jobs, a.Type, a.GPUs, a.Action)
	}
	return s
}

// TestEngineHistorySurvivesRestart: an agent stopped after a few rounds
// and started again with a fresh engine on the same durable state (the
// cluster running on meanwhile) makes exactly the decisions of an agent
// that never stopped. With the engine history removed from the state (what
// an agent saving only cumulative received time would keep), it does not.
func TestEngineHistorySurvivesRestart(t *testing.T) {
	const rounds, cut = 14, 6
	ref := newHistCluster()
	ra := histAgent(t, ref, &memStore{})
	for range rounds {
		ra.Step()
	}
	run := func(dropHistory bool) []*engine.Plan {
		c, store := newHistCluster(), &memStore{}
		a1 := histAgent(t, c, store)
		for range cut {
			a1.Step()
		}
		if dropHistory {
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(store.raw, &raw); err != nil {
				t.Fatal(err)
			}
			if _, ok := raw["engine"]; !ok {
				t.Fatalf("the saved state has no engine history: %s", store.raw)
			}
			delete(raw, "engine")
			store.raw, _ = json.Marshal(raw)
		}
		a2 := histAgent(t, c, store) // a fresh engine; a1 is gone
		for range rounds - cut {
			a2.Step()
		}
		return c.plans
	}
	got := run(false)
	for i := range rounds {
		if planKey(got[i]) != planKey(ref.plans[i]) || !reflect.DeepEqual(got[i].Suspend, ref.plans[i].Suspend) {
			t.Errorf("round %d after a restart at round %d:\n got  %s\n want %s", i+1, cut, planKey(got[i]), planKey(ref.plans[i]))
		}
	}
	without := run(true)
	differ := 0
	for i := range rounds {
		if planKey(without[i]) != planKey(ref.plans[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("without the engine history the restarted agent decided the same: the test shows nothing")
	}
	t.Logf("without the engine history, %d of %d rounds after the restart differ", differ, rounds-cut)
}

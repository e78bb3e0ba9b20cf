package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestObserveStreamMatchesRelist: Observe from the event stream's memory
// (Config.Watch) gives the snapshot a re-list gives, against a real Nomad,
// after each step: jobs submitted, a round that starts some, a job stopped,
// one purged, one re-registered, a node made ineligible and eligible again,
// and another round. Each comparison takes the snapshot from the stream,
// then by re-listing, then from the stream again (one backend, so times
// and credits are comparable), until the three agree with Nomad quiet
// between them; the stream must have served the rounds without falling
// back to a re-list.
func TestObserveStreamMatchesRelist(t *testing.T) {
	c := fakeGPUCluster(t, "rondo-bench-stream-", cluster.Options{LogLevel: "WARN",
		ClientCPUMHz: 4000, ClientMemoryMB: 4096, StartTimeout: 120 * time.Second,
		Clients: []cluster.ClientSpec{cluster.UniformClient("c0", "v100", 4), cluster.UniformClient("c1", "k80", 2)}})
	defer cluster.PurgeJobs(c.API, 60*time.Second)
	b, err := rnomad.New(rnomad.Config{Client: c.API, AckTimeout: 2 * time.Minute, Watch: true,
		Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := engine.New(engine.Config{Policy: "max_min_fairness_perf", RoundS: 360})
	if err != nil {
		t.Fatal(err)
	}
	compare := func(step string) *engine.Snapshot {
		t.Helper()
		var last string
		for try := 0; try < 30; try++ {
			from0, _ := b.WatchStats()
			s1 := observe(t, b, true)
			s2 := observe(t, b, false)
			s3 := observe(t, b, true)
			from1, _ := b.WatchStats()
			n1, n2, n3 := normalized(s1), normalized(s2), normalized(s3)
			if n1 == n2 && n2 == n3 && from1-from0 == 2 {
				t.Logf("%s: stream and re-list agree (%d jobs, %d running, %d GPUs; try %d)", step, len(s1.Jobs), len(s1.Running), len(s1.GPUs), try+1)
				return s1
			}
			last = fmt.Sprintf("from stream:\n%s\nre-listed:\n%s\nfrom stream again:\n%s\n(%d of 2 from the stream)", n1, n2, n3, from1-from0)
			time.Sleep(time.Second)
		}
		t.Fatalf("%s: the snapshots never agreed:\n%s", step, last)
		return nil
	}
	round := func(step string) {
		t.Helper()
		snap := observe(t, b, true)
		plan, err := e.Round(snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Enforce(plan); err != nil {
			t.Fatal(err)
		}
		compare(step)
	}
	register := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, _, err := c.API.Jobs().Register(benchJob(id), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	compare("empty cluster")
	register("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7")
	compare("8 jobs submitted")
	round("round 1")
	if _, _, err := c.API.Jobs().Deregister("s1", false, nil); err != nil {
		t.Fatal(err)
	}
	compare("s1 stopped")
	if _, _, err := c.API.Jobs().Deregister("s2", true, nil); err != nil {
		t.Fatal(err)
	}
	compare("s2 purged")
	register("s1")
	compare("s1 re-registered")
	register("s8")
	round("round 2")
	nodes, _, err := c.API.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	var k80 string
	for _, n := range nodes {
		if n.Name == "c1" {
			k80 = n.ID
		}
	}
	if _, err := c.API.Nodes().ToggleEligibility(k80, false, nil); err != nil {
		t.Fatal(err)
	}
	snap := compare("node c1 ineligible")
	for _, n := range snap.Nodes {
		if n.ID == k80 && n.Ready {
			t.Error("ineligible node c1 observed ready")
		}
	}
	if _, err := c.API.Nodes().ToggleEligibility(k80, true, nil); err != nil {
		t.Fatal(err)
	}
	compare("node c1 eligible again")
	round("round 3")
	// The specs a Job event carried (the stream fills the spec cache,
	// which the re-list above shares) against those Nomad's job endpoint
	// gives: a new backend that re-lists and reads every spec sees the
	// same jobs (up to its own clock: arrival and run start).
	fresh, err := rnomad.New(rnomad.Config{Client: c.API, Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		got, want := clockless(observe(t, b, true)), clockless(observe(t, fresh, false))
		if got == want {
			break
		}
		if try == 10 {
			t.Fatalf("specs from events and from the job endpoint differ:\n%s\n%s", got, want)
		}
		time.Sleep(time.Second)
	}
	from, relists := b.WatchStats()
	t.Logf("observed from the stream %d times, re-listed %d times", from, relists)
	if relists > 1 {
		t.Errorf("the watcher re-listed %d times (once expected: the first sync)", relists)
	}
}

// observe is one Observe, from the stream or by re-listing.
func observe(t *testing.T, b *rnomad.Backend, stream bool) *engine.Snapshot {
	t.Helper()
	b.SetWatch(stream)
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// normalized is the snapshot without what moves with the clock alone.
func normalized(s *engine.Snapshot) string {
	c := *s
	c.TimeS = 0
	c.Jobs = append([]engine.Job(nil), s.Jobs...)
	for i := range c.Jobs {
		c.Jobs[i].ReceivedS = nil
	}
	out, _ := json.MarshalIndent(c, "", " ")
	return string(out)
}

// clockless is normalized without the times that count from a backend's
// start.
func clockless(s *engine.Snapshot) string {
	c := *s
	c.Jobs = append([]engine.Job(nil), s.Jobs...)
	for i := range c.Jobs {
		c.Jobs[i].ArrivalS, c.Jobs[i].RunSinceS, c.Jobs[i].DeadlineS = 0, 0, 0
	}
	return normalized(&c)
}

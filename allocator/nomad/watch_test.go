package nomad

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
)

// stream serves a subscription: the frames sent on f.frames, until
// hangup or the client leaves.
func (f *fakeNomad) stream(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case fr := <-f.frames:
			fmt.Fprintln(w, fr)
			w.(http.Flusher).Flush()
		case <-f.hangup:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// publish moves table path's index to idx and, unless silent, sends the
// event (topic, payload key, object) at idx.
func (f *fakeNomad) publish(path string, idx uint64, topic, typ, key string, obj any, silent bool) {
	f.mu.Lock()
	f.index[path] = idx
	f.mu.Unlock()
	if silent {
		return
	}
	payload, _ := json.Marshal(map[string]any{key: obj})
	fr, _ := json.Marshal(map[string]any{"Index": idx, "Events": []map[string]any{
		{"Topic": topic, "Type": typ, "Index": idx, "Payload": json.RawMessage(payload)}}})
	f.frames <- string(fr)
}

// streamed normalizes a snapshot for comparison (the clock's parts).
func streamed(s *engine.Snapshot) string {
	c := *s
	c.TimeS = 0
	c.Jobs = append([]engine.Job(nil), s.Jobs...)
	for i := range c.Jobs {
		c.Jobs[i].ReceivedS = nil
	}
	out, _ := json.Marshal(c)
	return string(out)
}

// allocOnG2 is job a's allocation on GPU n1-g2, created at index 21.
func allocOnG2(status string) *api.Allocation {
	return &api.Allocation{ID: "11111111-0000-0000-0000-000000000001", Namespace: "default", Name: "a.train[0]", JobID: "a",
		TaskGroup: "train", NodeID: "n1", ClientStatus: status, DesiredStatus: "run", CreateIndex: 21, ModifyIndex: 21,
		CreateTime: time.Now().UnixNano(),
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{"train": {
			Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "Tesla V100-SXM2-16GB", DeviceIDs: []string{"n1-g2"}}}}}}}
}

// serveClient serves h and returns a client of it.
func serveClient(t *testing.T, h http.Handler) *api.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// watchedBackend is a backend on f with the watcher on (WatchWait 300 ms).
func watchedBackend(t *testing.T, f *fakeNomad) *Backend {
	t.Helper()
	be, err := New(Config{Client: serveClient(t, f), Watch: true, WatchWait: 300 * time.Millisecond,
		Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	return be
}

// TestObserveFromStream: with Watch, the first Observe subscribes and
// re-lists; later ones list nothing, applying the stream's events (a job
// registered, an allocation placed, a job stopped, a node turned
// ineligible) once the stream reached the server's indexes, and give the
// snapshot a re-list gives. A table index that moves without an event, and
// a stream the server ends, make Observe re-list (and resubscribe).
func TestObserveFromStream(t *testing.T) {
	n1 := modelledNode("n1")
	n1.ModifyIndex = 5
	a := resJob("a")
	a.Namespace, a.CreateIndex, a.ModifyIndex = ptr("default"), ptr(uint64(1)), ptr(uint64(10))
	a.NodePool = ptr("rondo") // admitted: in the pool, pinned
	a.TaskGroups[0].Constraints = append(a.TaskGroups[0].Constraints, api.NewConstraint(nodeTarget, "=", "n1"))
	f := &fakeNomad{nodes: []*api.Node{n1}, jobs: []*api.Job{a},
		index:  map[string]uint64{"/v1/nodes": 5, "/v1/jobs": 10, "/v1/allocations": 1},
		frames: make(chan string, 16), hangup: make(chan struct{})}
	be := watchedBackend(t, f)
	observe := func(watch bool) *engine.Snapshot {
		t.Helper()
		be.SetWatch(watch)
		s, err := be.Observe()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// check: from the stream without a listing, as re-listed.
	check := func(step string) *engine.Snapshot {
		t.Helper()
		lists, from := f.lists.Load(), be.w.fromStream
		s := observe(true)
		if n := f.lists.Load() - lists; n != 0 || be.w.fromStream != from+1 {
			t.Fatalf("%s: %d listings, %d rounds from the stream", step, n, be.w.fromStream-from)
		}
		if got, want := streamed(s), streamed(observe(false)); got != want {
			t.Fatalf("%s: from the stream\n%s\nre-listed\n%s", step, got, want)
		}
		return s
	}
	observe(true) // sync: subscribe, list
	if f.lists.Load() != 3 || !be.w.synced {
		t.Fatalf("first round: %d listings, synced %v", f.lists.Load(), be.w.synced)
	}
	check("steady")

	// Job b registered.
	b := resJob("b")
	b.Namespace, b.CreateIndex, b.ModifyIndex = ptr("default"), ptr(uint64(2)), ptr(uint64(20))
	f.jobs = append(f.jobs, b)
	f.publish("/v1/jobs", 20, "Job", "JobRegistered", "Job", b, false)
	reads := f.reads.Load()
	if s := check("b registered"); len(s.Jobs) != 2 {
		t.Fatalf("b registered: %d jobs", len(s.Jobs))
	}
	if f.reads.Load() != reads {
		t.Errorf("b's spec read %d times: the event carries it", f.reads.Load()-reads)
	}

	// An allocation of a placed on n1-g2.
	al := allocOnG2("running")
	f.allocs = append(f.allocs, al)
	f.publish("/v1/allocations", 21, "Allocation", "PlanResult", "Allocation", al, false)
	if s := check("a placed"); len(s.Running) != 1 || s.Running[0].GPUs[0] != "n1-g2" {
		t.Fatalf("a placed: running %+v", s.Running)
	}

	// b stopped (the job stays listed, Stop set).
	b.Stop, b.ModifyIndex = ptr(true), ptr(uint64(22))
	f.publish("/v1/jobs", 22, "Job", "JobDeregistered", "Job", b, false)
	if s := check("b stopped"); len(s.Jobs) != 1 {
		t.Fatalf("b stopped: %d jobs", len(s.Jobs))
	}

	// n1 ineligible.
	n1.SchedulingEligibility, n1.ModifyIndex = "ineligible", 23
	f.publish("/v1/nodes", 23, "Node", "NodeDrain", "Node", n1, false)
	be.SetWatch(true)
	if s, err := be.Observe(); err != nil || len(s.Nodes) != 1 || s.Nodes[0].Ready || len(s.GPUs) != 0 {
		t.Fatalf("n1 ineligible: %+v, %v", s, err)
	}
	// (The fake lists every node eligible: no comparison here.)
	n1.SchedulingEligibility, n1.ModifyIndex = "eligible", 24
	f.publish("/v1/nodes", 24, "Node", "NodeDrain", "Node", n1, false)
	check("n1 eligible again")

	// The allocations' index moves without an event (Nomad's garbage
	// collection): the wait runs out, Observe re-lists and resubscribes.
	f.publish("/v1/allocations", 30, "", "", "", nil, true)
	lists, relists := f.lists.Load(), be.w.relists
	start := time.Now()
	observe(true)
	if f.lists.Load()-lists != 3 || be.w.relists != relists+1 {
		t.Fatalf("index moved without an event: %d listings, %d re-lists", f.lists.Load()-lists, be.w.relists-relists)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("re-listed after %v, before the wait ran out", d)
	}
	check("after the re-list") // the listing's index covers the silent write

	// The server ends the stream: the next Observe re-lists and
	// subscribes again, and the round after comes from the new stream.
	close(f.hangup)
	deadline := time.Now().Add(5 * time.Second)
	for {
		be.w.mu.Lock()
		failed := be.w.err != nil
		be.w.mu.Unlock()
		if failed || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.hangup = make(chan struct{})
	lists, relists = f.lists.Load(), be.w.relists
	observe(true)
	if f.lists.Load()-lists != 3 || be.w.relists != relists+1 {
		t.Fatalf("stream ended: %d listings, %d re-lists", f.lists.Load()-lists, be.w.relists-relists)
	}
	al.ClientStatus, al.ModifyIndex = "complete", 31
	f.publish("/v1/allocations", 31, "Allocation", "AllocationUpdated", "Allocation", al, false)
	if s := check("on the new stream"); len(s.Running) != 0 {
		t.Fatalf("a's allocation completed: running %+v", s.Running)
	}

	// Updates between rounds queue one event per object, the latest.
	for i := range 5 {
		al.ModifyIndex = uint64(32 + i)
		f.publish("/v1/allocations", al.ModifyIndex, "Allocation", "AllocationUpdated", "Allocation", al, false)
	}
	time.Sleep(50 * time.Millisecond)
	be.w.mu.Lock()
	queued := len(be.w.pending)
	be.w.mu.Unlock()
	if queued != 1 {
		t.Errorf("5 updates of one allocation queued %d events", queued)
	}
	check("after 5 updates")
	if got := be.w.allocs[al.ID].ModifyIndex; got != 36 {
		t.Errorf("allocation at index %d, want 36", got)
	}

	// Garbage collection: Nomad reaps a's allocation without an event,
	// then deletes the job (JobBatchDeregistered): the allocation goes too.
	f.jobs, f.allocs = f.jobs[1:], nil
	f.publish("/v1/allocations", 40, "", "", "", nil, true)
	f.mu.Lock()
	f.index["/v1/jobs"] = 41
	f.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{"Job": a, "Deleted": true})
	fr, _ := json.Marshal(map[string]any{"Index": 41, "Events": []map[string]any{
		{"Topic": "Job", "Type": "JobBatchDeregistered", "Index": 41, "Payload": json.RawMessage(payload)}}})
	f.frames <- string(fr)
	if s := check("a collected"); len(s.Jobs) != 0 || len(be.w.allocs) != 0 || len(be.w.jobs) != 1 {
		t.Fatalf("a collected: %d jobs observed, %d allocations and %d jobs kept", len(s.Jobs), len(be.w.allocs), len(be.w.jobs))
	}
}

// TestStreamOutlivesRequestTimeout: the agent's client bounds each request
// (-nomad-timeout); the stream, one request for hours, is read through
// StreamClient and is not cut by that bound. A stream that sends nothing
// for WatchIdle (no heartbeat: a server gone silent) is dropped, and the
// next Observe re-lists and subscribes again.
func TestStreamOutlivesRequestTimeout(t *testing.T) {
	n1 := modelledNode("n1")
	n1.ModifyIndex = 5
	f := &fakeNomad{nodes: []*api.Node{n1},
		index:  map[string]uint64{"/v1/nodes": 5, "/v1/jobs": 1, "/v1/allocations": 1},
		frames: make(chan string, 16), hangup: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	short, err := api.NewClient(&api.Config{Address: srv.URL, HttpClient: &http.Client{Timeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	long, err := api.NewClient(&api.Config{Address: srv.URL, HttpClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	be, err := New(Config{Client: short, StreamClient: long, Watch: true, WatchWait: 300 * time.Millisecond,
		WatchIdle: 800 * time.Millisecond, Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	observe := func() {
		t.Helper()
		if _, err := be.Observe(); err != nil {
			t.Fatal(err)
		}
	}
	streamErr := func() error {
		be.w.mu.Lock()
		defer be.w.mu.Unlock()
		return be.w.err
	}
	observe() // sync
	// Heartbeats for 3x the request timeout: the stream stays, rounds
	// come from memory.
	for range 6 {
		time.Sleep(100 * time.Millisecond)
		f.frames <- "{}"
	}
	if err := streamErr(); err != nil {
		t.Fatalf("stream failed under heartbeats: %v", err)
	}
	relists := be.w.relists
	observe()
	if be.w.relists != relists {
		t.Fatalf("re-listed with a live stream")
	}
	// Silence: the idle bound cuts the stream.
	time.Sleep(1200 * time.Millisecond)
	err = streamErr()
	if err == nil || !strings.Contains(err.Error(), "nothing received for 800ms") {
		t.Fatalf("silent stream: error %v, want the idle cut", err)
	}
	observe()
	if be.w.relists != relists+1 {
		t.Fatalf("after the idle cut: %d re-lists, want 1", be.w.relists-relists)
	}
	if err := streamErr(); err != nil {
		t.Fatalf("not subscribed again: %v", err)
	}
}

// TestAckAllocsFromStream: enforcement's allocation reads (ackAllocs, every
// 250 ms of a wait for its writes) come from the watcher's memory once the
// stream has delivered the allocation table up to the server's index, with
// no listing, and equal a listing's; a table index the stream does not
// reach within WatchWait, or the watcher off, falls back to a listing.
func TestAckAllocsFromStream(t *testing.T) {
	n1 := modelledNode("n1")
	n1.ModifyIndex = 5
	a := resJob("a")
	a.Namespace, a.CreateIndex, a.ModifyIndex = ptr("default"), ptr(uint64(1)), ptr(uint64(10))
	f := &fakeNomad{nodes: []*api.Node{n1}, jobs: []*api.Job{a},
		index:  map[string]uint64{"/v1/nodes": 5, "/v1/jobs": 10, "/v1/allocations": 1},
		frames: make(chan string, 16), hangup: make(chan struct{})}
	be := watchedBackend(t, f)
	if _, err := be.Observe(); err != nil || !be.w.synced {
		t.Fatalf("sync: %v, synced %v", err, be.w != nil && be.w.synced)
	}
	// ack reads as enforcement does (under the backend's lock); the
	// listing's answer for comparison.
	ack := func() allocsByJob {
		t.Helper()
		be.mu.Lock()
		defer be.mu.Unlock()
		by, err := be.ackAllocs()
		if err != nil {
			t.Fatal(err)
		}
		return by
	}
	listed := func() allocsByJob {
		t.Helper()
		by, err := be.allAllocs()
		if err != nil {
			t.Fatal(err)
		}
		return by
	}
	gpus := func(by allocsByJob) string {
		n, running, got := liveGPUs(by["a"])
		return fmt.Sprintf("%d live, %d running, %v", n, running, got)
	}
	fromMemory := func(step string, want string) {
		t.Helper()
		lists, reads := f.lists.Load(), be.AckReads()
		by := ack()
		if n := f.lists.Load() - lists; n != 0 || be.AckReads() != reads+1 {
			t.Fatalf("%s: %d listings, %d reads from memory", step, n, be.AckReads()-reads)
		}
		if got, l := gpus(by), gpus(listed()); got != want || l != want {
			t.Fatalf("%s: from memory %s, listed %s, want %s", step, got, l, want)
		}
	}
	fromMemory("nothing placed", "0 live, 0 running, []")

	// a placed (pending), then running on n1-g2.
	al := allocOnG2("pending")
	f.allocs = append(f.allocs, al)
	f.publish("/v1/allocations", 21, "Allocation", "PlanResult", "Allocation", al, false)
	fromMemory("a placed", "1 live, 0 running, [n1-g2]")
	al.ClientStatus, al.ModifyIndex = "running", 22
	f.publish("/v1/allocations", 22, "Allocation", "AllocationUpdated", "Allocation", al, false)
	fromMemory("a running", "1 live, 1 running, [n1-g2]")

	// The table moves without an event: the read falls back to a listing
	// after WatchWait (and leaves re-syncing to Observe).
	al.ClientStatus, al.ModifyIndex = "complete", 23
	f.publish("/v1/allocations", 23, "", "", "", nil, true)
	lists, reads := f.lists.Load(), be.AckReads()
	start := time.Now()
	if got := gpus(ack()); got != "0 live, 0 running, []" {
		t.Fatalf("silent write: %s", got)
	}
	if n := f.lists.Load() - lists; n != 1 || be.AckReads() != reads {
		t.Fatalf("silent write: %d listings, %d reads from memory", n, be.AckReads()-reads)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("listed after %v, before the wait ran out", d)
	}

	// Watch off: a listing.
	be.SetWatch(false)
	lists = f.lists.Load()
	ack()
	if n := f.lists.Load() - lists; n != 1 {
		t.Fatalf("watch off: %d listings", n)
	}
}

package nomad

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Observing from Nomad's event stream (Config.Watch).
//
// Re-listing every round (listAll: nodes, jobs with their meta, every
// allocation with its resources) costs time in proportion to the cluster.
// With Watch set, a watcher follows the event stream (topics Job,
// Allocation, Node; Evaluation for its position only) and keeps those three lists in memory; Observe builds
// its snapshot from them. The rules:
//
//   - Sync: subscribe first (from the oldest event the server still
//     buffers), then re-list; each table's listing index is its floor:
//     the stream's events at or below it are already in the listing and are
//     dropped, later ones are applied in order. Nothing published after the
//     subscription can be missed, so there is no gap between the two.
//   - Fresh: every Observe first learns the server's current index of each
//     table (a list call with a prefix no id has: only QueryMeta.LastIndex
//     comes back) and waits (WatchWait) until the stream has delivered events
//     up to them. A write to a table that publishes no event (Nomad's
//     garbage collection of allocations and nodes, job stability) is then
//     never caught up with: Observe re-lists (a sync), and the floor covers
//     it from then on.
//   - Any stream error, a closed stream or a wait that runs out marks the
//     watcher unsynced: the round re-lists, and subscribes again unless the
//     stream is alive and delivered events during the wait (only slow: the
//     new listing's floors drop what it delivers late).
//   - A full re-list at least every WatchResync, for what no event or index
//     reveals (allocations collected while later events moved the table's
//     index past the collection).
//
// Events are decoded on the watcher's goroutine and queued; Observe applies
// the queue under the backend's lock, so the lists change only there.

// Watch defaults.
const (
	DefaultWatchWait   = 500 * time.Millisecond
	DefaultWatchResync = 10 * time.Minute
	// Nomad sends a heartbeat frame every 10 s on an idle stream.
	DefaultWatchIdle = 30 * time.Second
)

// Tables the watcher keeps.
const (
	tJobs = iota
	tAllocs
	tNodes
	nTables
)

// lists are the three listings Observe reads, as Nomad lists them (jobs with
// their meta, allocations with their resources), in the listing's order.
type lists struct {
	nodes  []*api.NodeListStub
	jobs   []*api.JobListStub
	allocs []*api.AllocationListStub
	index  [nTables]uint64 // each table's index (QueryMeta.LastIndex)
}

// wevent is one decoded event.
type wevent struct {
	table   int
	index   uint64
	typ     string
	deleted bool
	job     *api.Job                // whole: it fills the spec cache
	alloc   *api.AllocationListStub // stubs: what Observe reads, not the
	node    *api.NodeListStub       // placement metrics and the rest
}

type watcher struct {
	// Filled by the stream goroutine, read by Observe.
	mu sync.Mutex
	// pending: the events not yet applied, the latest per object (each
	// carries the whole object), so the queue is bounded by the objects
	// however long between rounds; gcs: the index of the latest
	// garbage-collection delete per job (allocations below it go).
	pending map[string]wevent
	gcs     map[jobRef]uint64
	pos     uint64        // index of the last event frame received
	err     error         // the stream failed: unsynced
	ready   bool          // the server answered the subscription
	wake    chan struct{} // closed and replaced on every change of the above
	cancel  context.CancelFunc
	gen     int

	// Observe's (under Backend.mu).
	synced   bool
	floor    [nTables]uint64
	resynced time.Time
	jobs     map[jobRef]*api.JobListStub
	allocs   map[string]*api.AllocationListStub
	nodes    map[string]*api.NodeListStub
	// Stats: rounds served from memory, re-lists since New, and
	// enforcement's allocation reads served from memory (ackAllocs).
	fromStream, relists, ackReads int
}

func newWatcher() *watcher {
	return &watcher{wake: make(chan struct{}), pending: map[string]wevent{}, gcs: map[jobRef]uint64{}}
}

// notify wakes waiters; w.mu held.
func (w *watcher) notify() {
	close(w.wake)
	w.wake = make(chan struct{})
}

// stop ends the subscription.
func (w *watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
	w.gen++
}

// listAll re-lists the three tables (Observe's fallback and the watcher's
// sync).
func (b *Backend) listAll() (*lists, error) {
	var l lists
	nodes, qm, err := b.cfg.Client.Nodes().List(nil)
	if err != nil {
		return nil, fmt.Errorf("nomad: list nodes: %w", err)
	}
	l.nodes, l.index[tNodes] = nodes, qm.LastIndex
	jobs, qm, err := b.cfg.Client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, b.listOpts())
	if err != nil {
		return nil, fmt.Errorf("nomad: list jobs: %w", err)
	}
	l.jobs, l.index[tJobs] = jobs, qm.LastIndex
	q := b.listOpts()
	q.Params = map[string]string{"resources": "true"}
	allocs, qm, err := b.cfg.Client.Allocations().List(q)
	if err != nil {
		return nil, fmt.Errorf("nomad: list allocations: %w", err)
	}
	l.allocs, l.index[tAllocs] = allocs, qm.LastIndex
	return &l, nil
}

// Prefixes no job, allocation or node id has (the last two are UUIDs, and
// their prefixes must be hex): listing them returns nothing but the table's
// index.
const (
	noSuchJob  = "\x00rondo index probe"
	noSuchUUID = "00000000-0000-0000-0000-00000000d0d0"
)

// allocIndex is the server's current index of the allocation table.
func (b *Backend) allocIndex() (uint64, error) {
	q := b.listOpts()
	q.Prefix = noSuchUUID
	_, qm, err := b.cfg.Client.Allocations().List(q)
	if err != nil {
		return 0, err
	}
	return qm.LastIndex, nil
}

// serverIndexes are the server's current index of each table.
func (b *Backend) serverIndexes() ([nTables]uint64, error) {
	jobs := b.listOpts()
	jobs.Prefix = noSuchJob
	probes := [nTables]func() (uint64, error){
		tJobs: func() (uint64, error) {
			_, qm, err := b.cfg.Client.Jobs().List(jobs)
			if err != nil {
				return 0, err
			}
			return qm.LastIndex, nil
		},
		tAllocs: b.allocIndex,
		tNodes: func() (uint64, error) {
			_, qm, err := b.cfg.Client.Nodes().List(&api.QueryOptions{Prefix: noSuchUUID})
			if err != nil {
				return 0, err
			}
			return qm.LastIndex, nil
		},
	}
	var idx [nTables]uint64
	var errs [nTables]error
	var wg sync.WaitGroup
	for t, probe := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx[t], errs[t] = probe()
		}()
	}
	wg.Wait()
	return idx, errors.Join(errs[:]...)
}

// observeLists returns the three listings: re-listed (Watch off, or the
// watcher unsynced or behind), or from the watcher's memory.
func (b *Backend) observeLists() (*lists, error) {
	if !b.cfg.Watch {
		return b.listAll()
	}
	if b.w == nil {
		b.w = newWatcher()
	}
	w := b.w
	restart := false
	if w.synced && b.cfg.Now().Sub(w.resynced) < b.cfg.WatchResync {
		l, stuck, why := b.fromStream()
		if l != nil {
			w.fromStream++
			return l, nil
		}
		b.log.Debug("observe: re-list", "why", why)
		// A stream that delivered nothing while behind the server is
		// subscribed again; a slow one is kept (the listing's floors
		// drop what it delivers late).
		w.synced, restart = false, stuck
	}
	return b.resync(restart)
}

// fromStream is the listings from memory once the stream has caught up
// with the server's indexes; nil and the reason when it has not (a stream
// error, or the wait ran out).
func (b *Backend) fromStream() (l *lists, stuck bool, why string) {
	w := b.w
	srv, err := b.serverIndexes()
	if err != nil {
		return nil, false, "index probe: " + err.Error()
	}
	// Wait WatchWait for the stream to move, and on while it moves, up to
	// 4×WatchWait in all: a stream busy with a rotation's events catches
	// up sooner than a re-list would be done.
	deadline := time.NewTimer(b.cfg.WatchWait)
	defer deadline.Stop()
	hard := time.Now().Add(4 * b.cfg.WatchWait)
	w.mu.Lock()
	pos0 := w.pos
	w.mu.Unlock()
	mark := pos0
	for {
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return nil, true, "stream: " + err.Error()
		}
		caught := true
		for t := range nTables {
			if max(w.pos, w.floor[t]) < srv[t] {
				caught = false
			}
		}
		if caught {
			pending, gcs := w.take()
			w.mu.Unlock()
			b.applyAll(pending, gcs)
			return w.lists(), false, ""
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			w.mu.Lock()
			pos := w.pos
			w.mu.Unlock()
			if left := time.Until(hard); pos > mark && left > 0 {
				mark = pos
				deadline.Reset(min(left, b.cfg.WatchWait))
				continue
			}
			return nil, pos == pos0, fmt.Sprintf("stream at index %d behind the server's %v", pos, srv)
		}
	}
}

// ackAllocs is every allocation by job, for enforcement's waits (each
// polls every 250 ms until its writes took effect): from the watcher's
// memory once the stream has delivered the allocation table up to the
// server's current index (one index probe), else a full listing. A listing
// per poll is what the server serves between its writes: at a thousand
// jobs, a rotation's waits re-listed thousands of allocations four times a
// second while the server was placing them.
func (b *Backend) ackAllocs() (allocsByJob, error) {
	if by := b.streamAllocs(); by != nil {
		return by, nil
	}
	return b.allAllocs()
}

// streamAllocs is ackAllocs from memory, nil where the watcher is off,
// unsynced or failed, or has not caught up with the allocation table
// within WatchWait (Observe decides about re-syncing; this only falls back).
func (b *Backend) streamAllocs() allocsByJob {
	w := b.w
	if !b.cfg.Watch || w == nil || !w.synced {
		return nil
	}
	idx, err := b.allocIndex()
	if err != nil {
		return nil
	}
	deadline := time.NewTimer(b.cfg.WatchWait)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		if w.err != nil {
			w.mu.Unlock()
			return nil
		}
		if max(w.pos, w.floor[tAllocs]) >= idx {
			pending, gcs := w.take()
			w.mu.Unlock()
			b.applyAll(pending, gcs)
			w.ackReads++
			return b.byJob(w.sortedAllocs())
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			return nil
		}
	}
}

// resync subscribes afresh (restart, or no live subscription) and
// re-lists; the listing seeds the watcher's memory. A subscription the
// server has not answered within WatchWait leaves the watcher unsynced (the
// next round tries again); the listing serves this round either way.
func (b *Backend) resync(restart bool) (*lists, error) {
	w := b.w
	w.relists++
	w.mu.Lock()
	live := w.cancel != nil && w.err == nil
	gen := w.gen
	w.mu.Unlock()
	if restart || !live {
		gen = b.subscribe()
	}
	// Only a subscription the server answered before the listing began
	// is sure to deliver every event the listing misses.
	ready := b.waitReady(gen)
	l, err := b.listAll()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	ok := ready && w.gen == gen && w.err == nil
	pending, gcs := w.take()
	w.mu.Unlock()
	if !ok {
		b.log.Debug("observe: event stream not ready; re-listing until it is")
		return l, nil
	}
	w.floor = l.index
	w.jobs = make(map[jobRef]*api.JobListStub, len(l.jobs))
	for _, s := range l.jobs {
		w.jobs[jobRef{s.Namespace, s.ID}] = s
	}
	w.allocs = make(map[string]*api.AllocationListStub, len(l.allocs))
	for _, a := range l.allocs {
		w.allocs[a.ID] = a
	}
	w.nodes = make(map[string]*api.NodeListStub, len(l.nodes))
	for _, n := range l.nodes {
		w.nodes[n.ID] = n
	}
	b.applyAll(pending, gcs)
	w.synced, w.resynced = true, b.cfg.Now()
	return l, nil
}

// waitReady waits (WatchWait at most) until the server answered the
// subscription gen.
func (b *Backend) waitReady(gen int) bool {
	w := b.w
	deadline := time.NewTimer(b.cfg.WatchWait)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ready, done := w.ready && w.gen == gen && w.err == nil, w.gen != gen || w.err != nil || w.ready
		wake := w.wake
		w.mu.Unlock()
		if done {
			return ready
		}
		select {
		case <-wake:
		case <-deadline.C:
			return false
		}
	}
}

// subscribe starts a subscription from the oldest buffered event,
// ending any earlier one, and returns its generation.
func (b *Backend) subscribe() int {
	w := b.w
	w.mu.Lock()
	if w.cancel != nil {
		w.cancel()
	}
	w.gen++
	gen := w.gen
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.pending, w.gcs, w.pos, w.err, w.ready = map[string]wevent{}, map[jobRef]uint64{}, 0, nil, false
	w.notify()
	w.mu.Unlock()
	if b.cfg.Done != nil {
		go func() {
			select {
			case <-b.cfg.Done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	go b.stream(ctx, w, gen, b.listOpts())
	return gen
}

// streamFrame is one line of the event stream.
type streamFrame struct {
	Index  uint64
	Events []struct {
		Topic   string
		Type    string
		Index   uint64
		Payload json.RawMessage
	}
}

type streamPayload struct {
	Job        *api.Job
	Deleted    bool
	Allocation *allocEvent
	Node       *api.Node
}

// allocEvent is what an Allocation event's payload is decoded into: the
// stub's fields Observe reads and a few more, not the placement metrics,
// task states and the rest (decoding those kept the stream behind the
// server under a full rotation of 1,000 jobs).
type allocEvent struct {
	ID, EvalID, Name, Namespace, NodeID, NodeName, JobID, TaskGroup    string
	AllocatedResources                                                 *api.AllocatedResources
	DesiredStatus, DesiredDescription, ClientStatus, ClientDescription string
	FollowupEvalID, NextAllocation, PreemptedByAllocation              string
	PreemptedAllocations                                               []string
	CreateIndex, ModifyIndex                                           uint64
	CreateTime, ModifyTime                                             int64
}

// stream reads the subscription gen until it fails or is cancelled,
// queueing decoded events.
func (b *Backend) stream(ctx context.Context, w *watcher, gen int, q *api.QueryOptions) {
	fail := func(err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.gen == gen && w.err == nil {
			w.err = err
			w.notify()
		}
	}
	v := url.Values{}
	v.Set("index", "0")
	// Evaluations too, though none is kept: an evaluation's update writes
	// the job summaries, whose index the job list reports (the max of both
	// tables'), with no Job event; its frame moves the stream's position
	// past it.
	for _, t := range []api.Topic{api.TopicJob, api.TopicAllocation, api.TopicNode, api.TopicEvaluation} {
		v.Add("topic", string(t)+":*")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A stream silent for WatchIdle (a server gone without closing the
	// connection) is cut; every frame, heartbeats too, re-arms the timer.
	idle := time.AfterFunc(b.cfg.WatchIdle, func() {
		cancel(fmt.Errorf("event stream: nothing received for %v", b.cfg.WatchIdle))
	})
	defer idle.Stop()
	body, err := b.cfg.StreamClient.Raw().Response("/v1/event/stream?"+v.Encode(), q.WithContext(ctx))
	if err != nil {
		fail(cmp.Or(context.Cause(ctx), err))
		return
	}
	defer body.Close()
	w.mu.Lock()
	if w.gen == gen {
		w.ready = true
		w.notify()
	}
	w.mu.Unlock()
	dec := json.NewDecoder(bufio.NewReaderSize(body, 1<<16))
	for {
		var f streamFrame
		if err := dec.Decode(&f); err != nil {
			switch cause := context.Cause(ctx); {
			case ctx.Err() == nil:
				fail(fmt.Errorf("event stream: %w", err))
			case cause != context.Canceled:
				fail(cause) // idle
			}
			return
		}
		idle.Reset(b.cfg.WatchIdle)
		if f.Index == 0 && len(f.Events) == 0 {
			continue // heartbeat
		}
		evs := make([]wevent, 0, len(f.Events))
		for _, e := range f.Events {
			if e.Topic == string(api.TopicEvaluation) {
				continue
			}
			var p streamPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				fail(fmt.Errorf("event stream: %s event at %d: %w", e.Topic, e.Index, err))
				return
			}
			ev := wevent{index: e.Index, typ: e.Type, deleted: p.Deleted}
			switch {
			case e.Topic == string(api.TopicJob) && p.Job != nil:
				ev.table, ev.job = tJobs, p.Job
			case e.Topic == string(api.TopicAllocation) && p.Allocation != nil:
				ev.table, ev.alloc = tAllocs, allocStub(p.Allocation)
			case e.Topic == string(api.TopicNode) && p.Node != nil:
				ev.table, ev.node = tNodes, nodeStub(p.Node)
				ev.deleted = e.Type == "NodeDeregistration"
			default:
				continue
			}
			if ev.index == 0 {
				ev.index = f.Index
			}
			evs = append(evs, ev)
		}
		w.mu.Lock()
		if w.gen != gen {
			w.mu.Unlock()
			return
		}
		for _, e := range evs {
			w.queue(e)
		}
		w.pos = max(w.pos, f.Index)
		w.notify()
		w.mu.Unlock()
	}
}

// queue keeps e unless a later event of its object is queued (w.mu held).
func (w *watcher) queue(e wevent) {
	var key string
	switch e.table {
	case tJobs:
		ref := jobRef{deref(e.job.Namespace), deref(e.job.ID)}
		key = "j\x00" + ref.ns + "\x00" + ref.id
		if e.deleted && e.typ == "JobBatchDeregistered" {
			w.gcs[ref] = max(w.gcs[ref], e.index)
		}
	case tAllocs:
		key = "a\x00" + e.alloc.ID
	case tNodes:
		key = "n\x00" + e.node.ID
	}
	if old, ok := w.pending[key]; !ok || old.index <= e.index {
		w.pending[key] = e
	}
}

// take empties the queue (w.mu held).
func (w *watcher) take() ([]wevent, map[jobRef]uint64) {
	evs := make([]wevent, 0, len(w.pending))
	for _, e := range w.pending {
		evs = append(evs, e)
	}
	gcs := w.gcs
	w.pending, w.gcs = map[string]wevent{}, map[jobRef]uint64{}
	return evs, gcs
}

// applyAll applies the events taken from the queue, in index order, and
// drops the allocations of garbage-collected jobs: Nomad reaps them
// without events just before it deletes the job (JobBatchDeregistered).
func (b *Backend) applyAll(evs []wevent, gcs map[jobRef]uint64) {
	w := b.w
	slices.SortStableFunc(evs, func(x, y wevent) int { return cmp.Compare(x.index, y.index) })
	for _, e := range evs {
		b.apply(e)
	}
	if len(gcs) == 0 {
		return
	}
	for id, a := range w.allocs {
		if at, ok := gcs[jobRef{a.Namespace, a.JobID}]; ok && a.ModifyIndex < at {
			delete(w.allocs, id)
		}
	}
}

// apply folds one event into the lists (Backend.mu held). Events at or
// below their table's floor are in the listing already; an object is
// replaced only by a newer version of itself.
func (b *Backend) apply(e wevent) {
	w := b.w
	if e.table == tJobs && !e.deleted {
		// The event carries the whole job: the spec cache takes it, so
		// that readJobs need not read it again (also below the floor: a
		// spec is the job at its ModifyIndex, which readJobs compares
		// with the listing's).
		ref := jobRef{deref(e.job.Namespace), deref(e.job.ID)}
		if k := b.Key(ref.ns, ref.id); b.watched(ref.ns) {
			if s := b.specs[k]; s == nil || deref(s.ModifyIndex) < deref(e.job.ModifyIndex) {
				b.specs[k] = e.job
			}
		}
	}
	if e.index <= w.floor[e.table] {
		return
	}
	switch e.table {
	case tJobs:
		j := e.job
		ref := jobRef{deref(j.Namespace), deref(j.ID)}
		if old := w.jobs[ref]; old != nil && old.ModifyIndex > deref(j.ModifyIndex) {
			return
		}
		if e.deleted {
			delete(w.jobs, ref)
			return
		}
		w.jobs[ref] = jobStub(j)
	case tAllocs:
		a := e.alloc
		if old := w.allocs[a.ID]; old != nil && old.ModifyIndex > a.ModifyIndex {
			return
		}
		w.allocs[a.ID] = a
	case tNodes:
		n := e.node
		if old := w.nodes[n.ID]; old != nil && old.ModifyIndex > n.ModifyIndex {
			return
		}
		if e.deleted {
			delete(w.nodes, n.ID)
			return
		}
		w.nodes[n.ID] = n
	}
}

// lists is the watcher's memory in the listings' order: jobs by namespace
// and id, allocations by creation index and id, nodes by id.
func (w *watcher) lists() *lists {
	l := &lists{index: w.floor}
	for _, s := range w.jobs {
		l.jobs = append(l.jobs, s)
	}
	slices.SortFunc(l.jobs, func(a, b *api.JobListStub) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	l.allocs = w.sortedAllocs()
	for _, n := range w.nodes {
		l.nodes = append(l.nodes, n)
	}
	slices.SortFunc(l.nodes, func(a, b *api.NodeListStub) int { return strings.Compare(a.ID, b.ID) })
	return l
}

// sortedAllocs are the allocations in memory by creation index and id.
func (w *watcher) sortedAllocs() []*api.AllocationListStub {
	out := make([]*api.AllocationListStub, 0, len(w.allocs))
	for _, a := range w.allocs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *api.AllocationListStub) int {
		return cmp.Or(cmp.Compare(a.CreateIndex, b.CreateIndex), strings.Compare(a.ID, b.ID))
	})
	return out
}

// jobStub is the job's list stub as Nomad builds it (structs.Job.Stub,
// with the meta), less the summary.
func jobStub(j *api.Job) *api.JobListStub {
	return &api.JobListStub{
		ID: deref(j.ID), ParentID: deref(j.ParentID), Name: deref(j.Name), Namespace: deref(j.Namespace),
		Datacenters: j.Datacenters,
		Type:        deref(j.Type), Priority: deref(j.Priority),
		Periodic: j.Periodic != nil, ParameterizedJob: j.ParameterizedJob != nil && !j.Dispatched,
		Stop: deref(j.Stop), Status: deref(j.Status), StatusDescription: deref(j.StatusDescription),
		CreateIndex: deref(j.CreateIndex), ModifyIndex: deref(j.ModifyIndex), JobModifyIndex: deref(j.JobModifyIndex),
		SubmitTime: deref(j.SubmitTime), Meta: j.Meta,
	}
}

// allocStub is the allocation's list stub with its resources
// (structs.Allocation.Stub), less the task states and the job's type and
// version (not in an event).
func allocStub(a *allocEvent) *api.AllocationListStub {
	return &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID, NodeName: a.NodeName,
		JobID: a.JobID, TaskGroup: a.TaskGroup, AllocatedResources: a.AllocatedResources,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		FollowupEvalID: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		PreemptedAllocations: a.PreemptedAllocations, PreemptedByAllocation: a.PreemptedByAllocation,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

// nodeStub is the node's list stub (structs.Node.Stub), the fields Observe
// reads and a few more.
func nodeStub(n *api.Node) *api.NodeListStub {
	return &api.NodeListStub{
		ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodeClass: n.NodeClass, NodePool: n.NodePool,
		Version: n.Attributes["nomad.version"], Drain: n.Drain, SchedulingEligibility: n.SchedulingEligibility,
		Status: n.Status, StatusDescription: n.StatusDescription,
		CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

// WatchStats are the rounds Observe served from the event stream's memory
// and the re-lists (syncs and fallbacks) since New.
func (b *Backend) WatchStats() (fromStream, relists int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return 0, 0
	}
	return b.w.fromStream, b.w.relists
}

// AckReads is how many of enforcement's allocation reads (ackAllocs) the
// event stream's memory served since New, in place of a listing.
func (b *Backend) AckReads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return 0
	}
	return b.w.ackReads
}

// Close ends the event stream subscription, if any.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		b.w.stop()
	}
}

// SetWatch turns Config.Watch on or off from the next Observe (to compare
// the two ways of observing). Turned off, the subscription stays and its
// events queue until it is turned on again.
func (b *Backend) SetWatch(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.Watch = on
}

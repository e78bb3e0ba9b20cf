package nomad

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/hcl"
)

// liveNomad is a small stateful stand-in for Nomad's HTTP API: jobs are
// registered and scaled, and each write places or stops allocations as
// Nomad does — a group's count change or constraint change keeps running
// allocations that still fit (in place), a shrink stops the highest
// indexes, a change to a group's tasks or to the job's meta replaces every
// allocation of the group (a restart). Allocations run at once.
type liveNomad struct {
	mu     sync.Mutex
	nodes  []*api.Node
	jobs   map[string]*api.Job
	allocs []*api.Allocation
	n      int    // allocation ids handed out
	index  uint64 // modify index
}

func newLiveNomad(nodes ...*api.Node) *liveNomad {
	return &liveNomad{nodes: nodes, jobs: map[string]*api.Job{}, index: 10}
}

// submit registers a job as `nomad job run` does (no enforce index).
func (f *liveNomad) submit(job *api.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.register(job)
}

func (f *liveNomad) register(job *api.Job) {
	old := f.jobs[*job.ID]
	f.index++
	job.JobModifyIndex = ptr(f.index)
	f.jobs[*job.ID] = job
	for _, tg := range job.TaskGroups {
		replace := false
		if old != nil {
			og := groupOf(old, *tg.Name)
			replace = og == nil || !reflect.DeepEqual(old.Meta, job.Meta) || !sameJSON(og.Tasks, tg.Tasks) ||
				deref(old.NodePool) != deref(job.NodePool)
		}
		f.reconcile(job, tg, replace)
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (f *liveNomad) live(job, group string) []*api.Allocation {
	var out []*api.Allocation
	for _, a := range f.allocs {
		if a.JobID == job && a.TaskGroup == group && a.DesiredStatus == "run" && a.ClientStatus == "running" {
			out = append(out, a)
		}
	}
	return out
}

func (f *liveNomad) stop(a *api.Allocation) {
	a.DesiredStatus, a.ClientStatus = "stop", "complete"
}

// fits reports whether node n satisfies the group's node pin and the
// job's pool.
func fits(job *api.Job, tg *api.TaskGroup, n *api.Node) bool {
	if n.NodePool != deref(job.NodePool) {
		return false
	}
	for _, c := range tg.Constraints {
		if c.LTarget == nodeTarget && !slices.Contains(strings.Split(c.RTarget, ","), n.ID) {
			return false
		}
	}
	return true
}

func gpuCount(tg *api.TaskGroup) int {
	n := 0
	for _, t := range tg.Tasks {
		if t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if isGPURequest(d.Name) {
				n += int(deref(d.Count))
			}
		}
	}
	return n
}

func (f *liveNomad) reconcile(job *api.Job, tg *api.TaskGroup, replace bool) {
	count := deref(tg.Count)
	have := map[int]bool{}
	for _, a := range f.live(*job.ID, *tg.Name) {
		i := allocIndex(a.Name)
		node := f.node(a.NodeID)
		if replace || i >= count || !fits(job, tg, node) {
			f.stop(a)
			continue
		}
		have[i] = true
	}
	for i := 0; i < count; i++ {
		if !have[i] {
			f.place(job, tg, i)
		}
	}
}

func (f *liveNomad) node(id string) *api.Node {
	for _, n := range f.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// place puts instance i of the group on the first node that fits with
// enough free GPUs; nothing when none does (pending, not listed).
func (f *liveNomad) place(job *api.Job, tg *api.TaskGroup, i int) {
	want := gpuCount(tg)
	held := map[string]bool{}
	for _, a := range f.allocs {
		if a.DesiredStatus == "run" {
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					for _, id := range d.DeviceIDs {
						held[id] = true
					}
				}
			}
		}
	}
	for _, n := range f.nodes {
		if !fits(job, tg, n) {
			continue
		}
		var ids []string
		if n.NodeResources != nil {
			for _, d := range n.NodeResources.Devices {
				for _, in := range d.Instances {
					if len(ids) < want && !held[in.ID] {
						ids = append(ids, in.ID)
					}
				}
			}
		}
		if len(ids) < want {
			continue
		}
		f.n++
		a := &api.Allocation{ID: fmt.Sprintf("alloc-%d", f.n), Name: fmt.Sprintf("%s.%s[%d]", *job.ID, *tg.Name, i),
			Namespace: "default", JobID: *job.ID, TaskGroup: *tg.Name, NodeID: n.ID, DesiredStatus: "run", ClientStatus: "running",
			AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{}}}
		if want > 0 {
			a.AllocatedResources.Tasks[tg.Tasks[0].Name] = &api.AllocatedTaskResources{
				Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", DeviceIDs: ids}}}
		}
		f.allocs = append(f.allocs, a)
		return
	}
}

func (f *liveNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("X-Nomad-Index", fmt.Sprint(f.index))
	w.Header().Set("X-Nomad-LastContact", "0")
	w.Header().Set("X-Nomad-KnownLeader", "true")
	var out any
	p := r.URL.Path
	switch {
	case p == "/v1/nodes":
		var stubs []*api.NodeListStub
		for _, n := range f.nodes {
			stubs = append(stubs, &api.NodeListStub{ID: n.ID, Name: n.Name, NodePool: n.NodePool, Status: "ready", SchedulingEligibility: "eligible"})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/node/"):
		out = f.node(strings.TrimPrefix(p, "/v1/node/"))
	case p == "/v1/jobs" && r.Method == http.MethodGet:
		var stubs []*api.JobListStub
		for _, id := range slicesSorted(f.jobs) {
			j := f.jobs[id]
			stubs = append(stubs, &api.JobListStub{ID: id, Type: "batch", Meta: j.Meta, CreateIndex: 1})
		}
		out = stubs
	case p == "/v1/jobs":
		var req api.JobRegisterRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if old := f.jobs[*req.Job.ID]; req.EnforceIndex && (old == nil || *old.JobModifyIndex != req.JobModifyIndex) {
			http.Error(w, "Enforcing job modify index", 500)
			return
		}
		f.register(req.Job)
		out = api.JobRegisterResponse{JobModifyIndex: f.index}
	case strings.HasPrefix(p, "/v1/job/") && strings.HasSuffix(p, "/scale"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/job/"), "/scale")
		var req api.ScalingRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		job := f.jobs[id]
		tg := groupOf(job, req.Target["Group"])
		if tg == nil {
			http.Error(w, "no group", 400)
			return
		}
		n := int(*req.Count)
		tg.Count = &n
		f.index++
		job.JobModifyIndex = ptr(f.index)
		f.reconcile(job, tg, false)
		out = api.JobRegisterResponse{JobModifyIndex: f.index}
	case strings.HasPrefix(p, "/v1/job/"):
		if j := f.jobs[strings.TrimPrefix(p, "/v1/job/")]; j != nil {
			var cp api.Job // a copy: the backend edits what it reads
			b, _ := json.Marshal(j)
			json.Unmarshal(b, &cp)
			out = &cp
		}
	case p == "/v1/allocations":
		var stubs []*api.AllocationListStub
		for _, a := range f.allocs {
			stubs = append(stubs, &api.AllocationListStub{ID: a.ID, Name: a.Name, JobID: a.JobID, TaskGroup: a.TaskGroup, NodeID: a.NodeID,
				ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus, AllocatedResources: a.AllocatedResources})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/allocation/"):
		for _, a := range f.allocs {
			if a.ID == strings.TrimPrefix(p, "/v1/allocation/") {
				out = a
			}
		}
	}
	if out == nil {
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(out)
}

func slicesSorted(m map[string]*api.Job) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// byIndex returns a group's running allocations by index.
func (f *liveNomad) byIndex(job, group string) map[int]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]string{}
	for _, a := range f.live(job, group) {
		out[allocIndex(a.Name)] = a.ID
	}
	return out
}

func (f *liveNomad) job(id string) *api.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

// dl2Job is a two-role job as submitted: workers of one GPU (1..3), a CPU
// parameter-server group "ps" (1..2) of half a core on the test nodes'
// 2596 MHz cores, 10 epochs, a total batch of 256.
func dl2Job(id string, scaling string) *api.Job {
	job := gpuJob(1, 1)
	job.ID, job.Name = ptr(id), ptr(id)
	job.TaskGroups[0].Tasks[0].Resources.CPU = ptr(2596)
	ps := api.NewTaskGroup("ps", 1)
	t := api.NewTask("ps", "raw_exec")
	t.Resources = &api.Resources{CPU: ptr(1298), MemoryMB: ptr(64)}
	ps.AddTask(t)
	job.AddTaskGroup(ps)
	job.NodePool = ptr("default")
	job.Meta = map[string]string{hcl.MetaVC: "research", hcl.MetaElastic: "1:3", hcl.MetaPS: "1:2", hcl.MetaPSGroup: "ps",
		hcl.MetaEpochs: "10", hcl.MetaBatchSize: "256", hcl.MetaModel: "ResNet-50 (batch size 64)"}
	if scaling != "" {
		job.Meta[hcl.MetaScaling] = scaling
	}
	return job
}

// gpuNode is a modelled node with n GPUs of its own ids (id-g0, ...).
func gpuNode(id string, n int) *api.Node {
	node := modelledNode(id)
	ins := node.NodeResources.Devices[0].Instances[:0]
	for i := 0; i < n; i++ {
		ins = append(ins, &api.NodeDevice{ID: fmt.Sprintf("%s-g%d", id, i), Healthy: true})
	}
	node.NodeResources.Devices[0].Instances = ins
	return node
}

// events records the backend's OnEvent calls.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) on(job, event string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, event)
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

func newTwoRoleBackend(t *testing.T, f *liveNomad, ev *events, epochs float64) *Backend {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: c, Progress: func(*api.Job) (float64, bool) { return 0, false },
		Epochs:  func(*api.Job) (float64, bool) { return epochs, epochs > 0 },
		OnEvent: ev.on, AckTimeout: 2e9, Logger: hclog.NewNullLogger(), LeaseAddr: "127.0.0.1:4680", CheckpointRoot: "/ck"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func observe(t *testing.T, b *Backend) *engine.Snapshot {
	t.Helper()
	s, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roles asks the backend what each live allocation of the job learns
// from its lease, by group and index.
func roles(t *testing.T, b *Backend, f *liveNomad, job string) map[string]lease.Roles {
	t.Helper()
	out := map[string]lease.Roles{}
	for _, g := range []string{"train", "ps"} {
		for i, id := range f.byIndex(job, g) {
			r, err := b.Roles(context.Background(), "default", job, id)
			if err != nil || r == nil {
				t.Fatalf("roles of %s[%d]: %v %v", g, i, r, err)
			}
			out[fmt.Sprintf("%s[%d]", g, i)] = *r
		}
	}
	return out
}

// TestObserveTwoRole: a two-role job's snapshot entry: the worker group's
// GPUs per worker and range, the parameter servers' range and cores, the
// workers' cores, the batch; progress in epochs. A job whose ps group is
// missing or requests GPUs is left out.
func TestObserveTwoRole(t *testing.T) {
	f := newLiveNomad(gpuNode("n1", 3))
	f.submit(dl2Job("dl2", ""))
	missing := dl2Job("missing", "")
	missing.Meta[hcl.MetaPSGroup] = "server"
	f.submit(missing)
	gpuPS := dl2Job("gpups", "")
	gpuPS.TaskGroups[1].Tasks[0].Resources.Devices = []*api.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(1))}}
	f.submit(gpuPS)
	b := newTwoRoleBackend(t, f, &events{}, 4)
	s := observe(t, b)
	if len(s.Jobs) != 1 || s.Jobs[0].ID != "dl2" {
		t.Fatalf("jobs %+v, want only dl2", s.Jobs)
	}
	j := s.Jobs[0]
	want := &engine.Elastic{StepGPUs: 1, MaxGPUs: 3, PS: &engine.PSGroup{Min: 1, Max: 2, Cores: 0.5}, WorkerCores: 1, Batch: 256}
	if !reflect.DeepEqual(j.Elastic, want) {
		t.Errorf("elastic %+v (ps %+v), want %+v (ps %+v)", j.Elastic, j.Elastic.PS, want, want.PS)
	}
	if j.ScaleFactor != 1 || j.TotalSteps != 10 || j.RemainingSteps != 6 || j.Model != "ResNet-50 (batch size 64)" || j.Started {
		t.Errorf("job %+v", j)
	}
	// Without an epochs report: steps × epochs / rondo.steps.
	b.cfg.Epochs = func(*api.Job) (float64, bool) { return 0, false }
	b.cfg.Progress = func(*api.Job) (float64, bool) { return 250, true }
	dl := f.job("dl2")
	dl.Meta[hcl.MetaSteps] = "1000"
	if j := observe(t, b).Jobs[0]; j.RemainingSteps != 7.5 {
		t.Errorf("remaining %g epochs from 250 of 1000 steps, want 7.5", j.RemainingSteps)
	}
}

// TestEnforceTwoRoleLive: admitted with its workers and parameter servers
// (node pins, no GPU pin, env on both groups, the GPU pool), grown and
// shrunk in place (worker 0 and parameter server 0 keep their
// allocations; a shrink stops the highest indexes), the lease API's roles
// and batch split follow the counts in force, a suspension stops both
// groups, and a restarted backend reads the counts back.
func TestEnforceTwoRoleLive(t *testing.T) {
	f := newLiveNomad(gpuNode("n1", 3), gpuNode("n2", 2))
	f.submit(dl2Job("dl2", ""))
	ev := &events{}
	b := newTwoRoleBackend(t, f, ev, 1)
	observe(t, b)
	start := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"dl2"}, Type: "v100", GPUs: []string{"n1-g0"},
		Servers: []string{"n1"}, Action: engine.Start, PS: 1, PSServers: []string{"n2"}}}}
	if err := b.Enforce(start); err != nil {
		t.Fatal(err)
	}
	job := f.job("dl2")
	w, ps := groupOf(job, "train"), groupOf(job, "ps")
	if *w.Count != 1 || nodePin(w) != "n1" || pinnedGPUs(w) != "" || *ps.Count != 1 || nodePin(ps) != "n2" || *job.NodePool != "rondo" {
		t.Fatalf("admitted: workers %d on %q (gpus %q), ps %d on %q, pool %s", *w.Count, nodePin(w), pinnedGPUs(w), *ps.Count, nodePin(ps), *job.NodePool)
	}
	for _, tg := range []*api.TaskGroup{w, ps} {
		if tg.Tasks[0].Env[LeaseAddrEnv] == "" || tg.Tasks[0].Env[CheckpointEnv] == "" || len(tg.Tasks[0].Identities) != 1 {
			t.Errorf("group %s: env %v identities %d", *tg.Name, tg.Tasks[0].Env, len(tg.Tasks[0].Identities))
		}
	}
	if _, ok := job.Meta[MetaGPUs]; ok {
		t.Error("meta written at an elastic start")
	}
	if got := ev.take(); !slices.Equal(got, []string{"admit"}) {
		t.Errorf("events %v", got)
	}
	s := observe(t, b)
	if r := s.Running; len(r) != 1 || r[0].PS != 1 || !slices.Equal(r[0].PSServers, []string{"n2"}) || len(r[0].GPUs) != 1 || !s.Jobs[0].Started {
		t.Fatalf("running %+v", r)
	}
	if got := roles(t, b, f, "dl2"); got["train[0]"] != (lease.Roles{Role: "worker", Workers: 1, PS: 1, Batch: 256, TotalBatch: 256}) ||
		got["ps[0]"] != (lease.Roles{Role: "ps", Workers: 1, PS: 1, TotalBatch: 256}) {
		t.Errorf("roles at 1 worker: %+v", got)
	}
	w0, ps0 := f.byIndex("dl2", "train")[0], f.byIndex("dl2", "ps")[0]

	// Grow to 3 workers on two servers and 2 parameter servers: in place.
	grow := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"dl2"}, Type: "v100", GPUs: []string{"n1-g0", "n1-g1", "n2-g0"},
		Servers: []string{"n1", "n2"}, Action: engine.Keep, PS: 2, PSServers: []string{"n2", "n1"}}}}
	if err := b.Enforce(grow); err != nil {
		t.Fatal(err)
	}
	ws, pss := f.byIndex("dl2", "train"), f.byIndex("dl2", "ps")
	if len(ws) != 3 || len(pss) != 2 || ws[0] != w0 || pss[0] != ps0 {
		t.Fatalf("grown: workers %v (worker 0 was %s), ps %v (ps 0 was %s)", ws, w0, pss, ps0)
	}
	if ps := groupOf(f.job("dl2"), "ps"); nodePin(ps) != "n1,n2" {
		t.Errorf("ps pin %q", nodePin(ps))
	}
	if got := ev.take(); !slices.Equal(got, []string{"grow"}) {
		t.Errorf("events %v", got)
	}
	got := roles(t, b, f, "dl2")
	for i, want := range []int{86, 85, 85} {
		if r := got[fmt.Sprintf("train[%d]", i)]; r.Batch != want || r.Workers != 3 || r.PS != 2 || r.Role != "worker" {
			t.Errorf("worker %d: %+v, want batch %d of 3 workers, 2 ps", i, r, want)
		}
	}
	s = observe(t, b)
	if r := s.Running[0]; r.PS != 2 || len(r.GPUs) != 3 {
		t.Fatalf("running %+v", r)
	}

	// Shrink to 2 workers and 1 parameter server: the highest indexes stop.
	shrink := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"dl2"}, Type: "v100", GPUs: s.Running[0].GPUs[:2],
		Servers: []string{"n1"}, Action: engine.Keep, PS: 1, PSServers: []string{"n2"}}}}
	if err := b.Enforce(shrink); err != nil {
		t.Fatal(err)
	}
	ws2, pss2 := f.byIndex("dl2", "train"), f.byIndex("dl2", "ps")
	if len(ws2) != 2 || ws2[0] != w0 || ws2[1] != ws[1] || len(pss2) != 1 || pss2[0] != ps0 {
		t.Fatalf("shrunk: workers %v, ps %v", ws2, pss2)
	}
	if got := ev.take(); !slices.Equal(got, []string{"shrink"}) {
		t.Errorf("events %v", got)
	}
	got = roles(t, b, f, "dl2")
	if got["train[0]"].Batch != 128 || got["train[1]"].Batch != 128 || got["train[1]"].Workers != 2 || got["ps[0]"].PS != 1 {
		t.Errorf("roles at 2 workers: %+v", got)
	}
	// The worker the shrink stopped learns batch 0 (the counts in force).
	if r, _ := b.Roles(context.Background(), "default", "dl2", ws[2]); r == nil || r.Batch != 0 || r.Workers != 2 {
		t.Errorf("stopped worker: %+v", r)
	}
	// Nothing changes: nothing is written.
	s = observe(t, b)
	idx := *f.job("dl2").JobModifyIndex
	keep := &engine.Plan{Assignments: []engine.Assignment{s.Running[0]}}
	if err := b.Enforce(keep); err != nil {
		t.Fatal(err)
	}
	// The engine (no sizer) keeping the job leaves the parameter servers
	// as they are.
	keep.Assignments[0].PS, keep.Assignments[0].PSServers = 0, nil
	if err := b.Enforce(keep); err != nil {
		t.Fatal(err)
	}
	if *f.job("dl2").JobModifyIndex != idx || len(ev.take()) != 0 {
		t.Errorf("a kept job was rewritten")
	}

	// An agent restart: a new backend reads the counts in force.
	b2 := newTwoRoleBackend(t, f, ev, 1)
	s = observe(t, b2)
	if r := s.Running[0]; r.PS != 1 || len(r.GPUs) != 2 || !slices.Equal(r.PSServers, []string{"n2"}) {
		t.Fatalf("after a restart: running %+v", r)
	}
	if got := roles(t, b2, f, "dl2"); got["train[1]"].Batch != 128 || got["train[1]"].Workers != 2 || got["ps[0]"].PS != 1 {
		t.Errorf("roles after a restart: %+v", got)
	}

	// Suspended: both groups at 0.
	if err := b2.Enforce(&engine.Plan{Suspend: []string{"dl2"}}); err != nil {
		t.Fatal(err)
	}
	if job := f.job("dl2"); *groupOf(job, "train").Count != 0 || *groupOf(job, "ps").Count != 0 ||
		len(f.byIndex("dl2", "train"))+len(f.byIndex("dl2", "ps")) != 0 {
		t.Fatalf("suspended: %d workers, %d ps", len(f.byIndex("dl2", "train")), len(f.byIndex("dl2", "ps")))
	}
	if r, _ := b2.Roles(context.Background(), "default", "dl2", w0); r == nil || r.Workers != 0 || r.Batch != 0 {
		t.Errorf("suspended roles %+v", r)
	}
}

// TestEnforceTwoRoleCheckpoint: with rondo.scaling = "checkpoint" a resize
// stops the job (its tasks checkpoint) and restarts it at the new counts:
// every allocation is new.
func TestEnforceTwoRoleCheckpoint(t *testing.T) {
	f := newLiveNomad(gpuNode("n1", 3))
	f.submit(dl2Job("dl2", hcl.ScalingCheckpoint))
	ev := &events{}
	b := newTwoRoleBackend(t, f, ev, 1)
	observe(t, b)
	if err := b.Enforce(&engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"dl2"}, Type: "v100", GPUs: []string{"n1-g0"},
		Servers: []string{"n1"}, Action: engine.Start, PS: 1, PSServers: []string{"n1"}}}}); err != nil {
		t.Fatal(err)
	}
	w0 := f.byIndex("dl2", "train")[0]
	observe(t, b)
	grow := &engine.Plan{Assignments: []engine.Assignment{{Jobs: []string{"dl2"}, Type: "v100", GPUs: []string{"n1-g0", "n1-g1"},
		Servers: []string{"n1"}, Action: engine.Keep, PS: 2, PSServers: []string{"n1", "n1"}}},
		Intents: []engine.JobIntent{{Job: "dl2", Intent: engine.IntentResize}}}
	// Recorded as an intent (settled like a start after a crash).
	if in := b.Intents(grow); len(in) != 1 || in[0].Action != "resize" || in[0].JobModifyIndex != *f.job("dl2").JobModifyIndex ||
		len(in[0].GPUs) != 2 {
		t.Errorf("intents %+v", in)
	}
	if err := b.Enforce(grow); err != nil {
		t.Fatal(err)
	}
	ws, pss := f.byIndex("dl2", "train"), f.byIndex("dl2", "ps")
	if len(ws) != 2 || len(pss) != 2 || ws[0] == w0 {
		t.Fatalf("resized by a restart: workers %v (worker 0 was %s), ps %v", ws, w0, pss)
	}
	if got := ev.take(); !slices.Equal(got, []string{"admit", "grow"}) {
		t.Errorf("events %v", got)
	}
}

// TestGateTwoRolePS: a two-role job waiting for admission outside the GPU
// pool does not run its parameter servers there.
func TestGateTwoRolePS(t *testing.T) {
	cpu := realNode("cpu1")
	cpu.NodePool, cpu.NodeResources.Devices = "default", nil
	f := newLiveNomad(gpuNode("n1", 1), cpu)
	f.submit(dl2Job("dl2", ""))
	if len(f.byIndex("dl2", "ps")) != 1 {
		t.Fatal("the fake did not place the parameter server in the default pool")
	}
	ev := &events{}
	b := newTwoRoleBackend(t, f, ev, 1)
	observe(t, b)
	if err := b.Enforce(&engine.Plan{}); err != nil {
		t.Fatal(err)
	}
	if len(f.byIndex("dl2", "ps")) != 0 || *groupOf(f.job("dl2"), "ps").Count != 0 {
		t.Fatal("parameter servers of a waiting job still run")
	}
	if got := ev.take(); !slices.Equal(got, []string{"gate"}) {
		t.Errorf("events %v", got)
	}
}

func TestPinPS(t *testing.T) {
	job := dl2Job("j", "")
	ps := groupOf(job, "ps")
	ps.Constraints = []*api.Constraint{api.NewConstraint("${attr.kernel.name}", "=", "linux")}
	if err := PinPS(job, "ps", 3, []string{"n2", "n1", "n2"}); err != nil {
		t.Fatal(err)
	}
	if *ps.Count != 3 || nodePin(ps) != "n1,n2" || len(ps.Constraints) != 2 || ps.Constraints[1].Operand != "set_contains_any" {
		t.Fatalf("pinned: %d %+v", *ps.Count, ps.Constraints)
	}
	if err := PinPS(job, "ps", 1, []string{"n1"}); err != nil || nodePin(ps) != "n1" || ps.Constraints[1].Operand != "=" {
		t.Fatalf("one server: %v %+v", err, ps.Constraints)
	}
	if err := PinPS(job, "ps", 1, nil); err != nil || nodePin(ps) != "" || len(ps.Constraints) != 1 {
		t.Fatalf("unpinned: %v %+v", err, ps.Constraints)
	}
	if PinPS(job, "nope", 1, nil) == nil {
		t.Fatal("a missing group pinned")
	}
}

package nomad

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/synergy"
	"github.com/rondo-sched/rondo/hcl"
)

// fakeNomad answers the read endpoints Observe and the fit check use, from
// full objects.
type fakeNomad struct {
	nodes  []*api.Node
	jobs   []*api.Job
	allocs []*api.Allocation
	reads  atomic.Int32 // job specs read (GET /v1/job/ID)
	nreads atomic.Int32 // nodes read (GET /v1/node/ID)
	// The event stream (watch_test.go): each table's index by list path
	// (1 where unset), the full listings served, and the frames a
	// subscription sends (hangup ends it).
	mu     sync.Mutex
	index  map[string]uint64
	lists  atomic.Int32
	frames chan string
	hangup chan struct{}
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	f.mu.Lock()
	idx := f.index[p]
	f.mu.Unlock()
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(max(idx, 1), 10))
	w.Header().Set("X-Nomad-LastContact", "0")
	w.Header().Set("X-Nomad-KnownLeader", "true")
	var out any
	switch {
	case p == "/v1/event/stream":
		f.stream(w, r)
		return
	case r.URL.Query().Get("prefix") != "" && (p == "/v1/nodes" || p == "/v1/jobs" || p == "/v1/allocations"):
		out = []any{} // an index probe
	case p == "/v1/nodes" || p == "/v1/jobs" || p == "/v1/allocations":
		f.lists.Add(1)
	}
	switch {
	case out != nil:
	case p == "/v1/nodes":
		var stubs []*api.NodeListStub
		for _, n := range f.nodes {
			stubs = append(stubs, &api.NodeListStub{ID: n.ID, Name: n.Name, NodePool: n.NodePool, Status: "ready", SchedulingEligibility: "eligible",
				ModifyIndex: n.ModifyIndex})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/node/") && strings.HasSuffix(p, "/allocations"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/node/"), "/allocations")
		var as []*api.Allocation
		for _, a := range f.allocs {
			if a.NodeID == id {
				as = append(as, a)
			}
		}
		out = as
	case strings.HasPrefix(p, "/v1/node/"):
		f.nreads.Add(1)
		for _, n := range f.nodes {
			if n.ID == strings.TrimPrefix(p, "/v1/node/") {
				out = n
			}
		}
	case p == "/v1/jobs":
		var stubs []*api.JobListStub
		for i, j := range f.jobs {
			stubs = append(stubs, &api.JobListStub{ID: *j.ID, Namespace: "default", Type: "batch", Meta: j.Meta, CreateIndex: uint64(i + 1),
				ModifyIndex: deref(j.ModifyIndex), Stop: deref(j.Stop)})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/job/"):
		f.reads.Add(1)
		for _, j := range f.jobs {
			if *j.ID == strings.TrimPrefix(p, "/v1/job/") {
				out = j
			}
		}
	case p == "/v1/allocations":
		var stubs []*api.AllocationListStub
		for _, a := range f.allocs {
			stubs = append(stubs, &api.AllocationListStub{ID: a.ID, Namespace: "default", JobID: a.JobID, Name: a.Name,
				CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, TaskGroup: a.TaskGroup, NodeID: a.NodeID,
				ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus, AllocatedResources: a.AllocatedResources,
				CreateTime: a.CreateTime})
		}
		out = stubs
	}
	if out == nil {
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(out)
}

// A Synergy-like server modelled on a small machine: 17 cores' worth of
// compute (cpu_total_compute) on 2 real cores of 2596 MHz, one core and
// 1 GB reserved: 16 cores and 256 GB offered, in 4 GPUs.
func modelledNode(id string) *api.Node {
	return &api.Node{ID: id, Name: id, NodePool: "rondo", Status: "ready", SchedulingEligibility: "eligible",
		Attributes: map[string]string{"cpu.frequency": "2596", "cpu.numcores": "2"},
		NodeResources: &api.NodeResources{
			Cpu:    api.NodeCpuResources{CpuShares: 17 * 2596, TotalCpuCores: 2, ReservableCpuCores: []uint16{0, 1}},
			Memory: api.NodeMemoryResources{MemoryMB: 257 * 1024},
			Devices: []*api.NodeDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "Tesla V100-SXM2-16GB",
				Instances: []*api.NodeDevice{{ID: id + "-g0", Healthy: true}, {ID: id + "-g1", Healthy: true},
					{ID: id + "-g2", Healthy: true}, {ID: id + "-g3", Healthy: true}}}}},
		ReservedResources: &api.NodeReservedResources{Cpu: api.NodeReservedCpuResources{CpuShares: 2596},
			Memory: api.NodeReservedMemoryResources{MemoryMB: 1024}}}
}

// A real 32-core machine of 3000 MHz cores (its compute is its cores').
func realNode(id string) *api.Node {
	cores := make([]uint16, 32)
	for i := range cores {
		cores[i] = uint16(i)
	}
	n := modelledNode(id)
	n.Attributes = map[string]string{"cpu.frequency": "3000", "cpu.numcores": "32"}
	n.NodeResources.Cpu = api.NodeCpuResources{CpuShares: 32 * 3000, TotalCpuCores: 32, ReservableCpuCores: cores}
	n.NodeResources.Memory.MemoryMB = 512 * 1024
	n.ReservedResources = nil
	return n
}

func TestNodeCapacity(t *testing.T) {
	c, ok := nodeCapOf(modelledNode("n1"))
	if !ok || c.Cores() != 16 || c.MemGB() != 256 || c.CoreMHz != 2596 || c.RealCores || c.Reservable != 2 {
		t.Errorf("modelled node: %+v (cores %g, GB %g), ok %v", c, c.Cores(), c.MemGB(), ok)
	}
	c, ok = nodeCapOf(realNode("n2"))
	if !ok || c.Cores() != 32 || c.MemGB() != 512 || !c.RealCores || c.Reservable != 32 {
		t.Errorf("real node: %+v, ok %v", c, ok)
	}
	// No frequency fingerprinted: the compute per core Nomad counts.
	n := realNode("n3")
	n.Attributes = nil
	if c, ok = nodeCapOf(n); !ok || c.CoreMHz != 3000 || c.Cores() != 32 {
		t.Errorf("no frequency: %+v, ok %v", c, ok)
	}
	if _, ok := nodeCapOf(&api.Node{ID: "x"}); ok {
		t.Error("a node without resources has a capacity")
	}
}

// resJob is a one-GPU-task job with a sidecar, its own resources set.
func resJob(id string) *api.Job {
	job := gpuJob(1, 1)
	job.ID, job.Name = ptr(id), ptr(id)
	train := job.TaskGroups[0].Tasks[0]
	train.Resources.CPU, train.Resources.MemoryMB, train.Resources.MemoryMaxMB = ptr(500), ptr(1024), ptr(2048)
	side := api.NewTask("sidecar", "raw_exec")
	side.Resources = &api.Resources{CPU: ptr(100), MemoryMB: ptr(64)}
	job.TaskGroups[0].AddTask(side)
	job.Meta = map[string]string{hcl.MetaVC: "research"}
	return job
}

// testBackend serves f and knows its nodes and jobs as Observe left them.
func testBackend(t *testing.T, f *fakeNomad) *Backend {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: c, Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Observe(); err != nil {
		t.Fatal(err)
	}
	return b
}

func taskOf(job *api.Job, name string) *api.Task {
	for _, t := range job.TaskGroups[0].Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func assign(id string, gpus []string, server string, g engine.Resources) engine.Assignment {
	return engine.Assignment{Jobs: []string{id}, Type: "v100", GPUs: gpus, Servers: []string{server}, Action: engine.Start,
		Resources: []engine.Resources{g}}
}

// TestResourcesPerIntent: what the rewritten spec holds when a job is
// admitted, retuned, moved to a machine with real cores, resumed there
// with other cores, and started with no grant.
func TestResourcesPerIntent(t *testing.T) {
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1"), realNode("n2")}, jobs: []*api.Job{resJob("alex")}}
	b := testBackend(t, f)
	st := b.jobs["alex"]
	if st == nil {
		t.Fatal("job not observed")
	}
	start := func(a engine.Assignment) (*api.Job, *TaskResources) {
		t.Helper()
		res := b.planResources([]engine.Assignment{a})
		job := f.jobs[0]
		if err := b.rewrite(job, st, a, res["alex"]); err != nil {
			t.Fatal(err)
		}
		st.job = job
		return job, res["alex"]
	}
	check := func(what string, job *api.Job, cpu, cores, mem int, envCores string) {
		t.Helper()
		tr := taskOf(job, "train")
		if deref(tr.Resources.CPU) != cpu || deref(tr.Resources.Cores) != cores || deref(tr.Resources.MemoryMB) != mem ||
			tr.Env[EnvCores] != envCores || (envCores != "" && tr.Env[EnvMemMB] != itoa(mem)) {
			t.Errorf("%s: train cpu %d cores %d memory %d env %v; want cpu %d cores %d memory %d cores env %q",
				what, deref(tr.Resources.CPU), deref(tr.Resources.Cores), deref(tr.Resources.MemoryMB), tr.Env, cpu, cores, mem, envCores)
		}
		if side := taskOf(job, "sidecar"); deref(side.Resources.CPU) != 100 || deref(side.Resources.MemoryMB) != 64 || side.Env[EnvCores] != "" {
			t.Errorf("%s: the sidecar changed: %+v %v", what, side.Resources, side.Env)
		}
	}

	// Admit on the modelled node: 12 cores are more than its 2 real ones,
	// so cpu = 12 × 2596 MHz; 125 GB.
	job, _ := start(assign("alex", []string{"n1-g0"}, "n1", engine.Resources{Cores: 12, MemGB: 125}))
	check("admit", job, 12*2596, 0, 125*1024, "12")
	if job.Meta[MetaCores] != "12" || job.Meta[MetaMemGB] != "125" ||
		job.Meta[MetaOwnResources] != `{"train":{"cpu":500,"memory":1024,"memory_max":2048}}` {
		t.Errorf("admit meta %v", job.Meta)
	}
	if mx := deref(taskOf(job, "train").Resources.MemoryMaxMB); mx != 125*1024 {
		t.Errorf("memory_max %d below memory", mx)
	}
	if g := grantOf(job); g == nil || *g != (engine.Resources{Cores: 12, MemGB: 125}) {
		t.Errorf("grant read back %+v", g)
	}

	// Retune: same GPU, 4 cores and 64 GB; the own resources recorded at
	// admission stay.
	job, _ = start(assign("alex", []string{"n1-g0"}, "n1", engine.Resources{Cores: 4, MemGB: 64}))
	check("retune", job, 4*2596, 0, 64*1024, "4")
	if job.Meta[MetaCores] != "4" || !strings.Contains(job.Meta[MetaOwnResources], `"cpu":500`) {
		t.Errorf("retune meta %v", job.Meta)
	}

	// Migrate to the real machine: 4 whole cores it has free are reserved.
	job, _ = start(assign("alex", []string{"n2-g1"}, "n2", engine.Resources{Cores: 4, MemGB: 64}))
	check("migrate", job, 0, 4, 64*1024, "4")

	// Resume there with 2.5 cores: not whole, so MHz.
	job, _ = start(assign("alex", []string{"n2-g1"}, "n2", engine.Resources{Cores: 2.5, MemGB: 30}))
	check("resume", job, 7500, 0, 30*1024, "2.5")

	// A start with no grant: the job's own resources again, no env, no
	// grant recorded.
	a := assign("alex", []string{"n2-g1"}, "n2", engine.Resources{})
	a.Resources = nil
	job, r := start(a)
	if r != nil {
		t.Fatalf("no grant planned %+v", r)
	}
	check("no grant", job, 500, 0, 1024, "")
	if _, ok := job.Meta[MetaCores]; ok || grantOf(job) != nil || deref(taskOf(job, "train").Resources.MemoryMaxMB) != 2048 {
		t.Errorf("no grant: meta %v", job.Meta)
	}
}

// A two-GPU job on one node splits its grant over its tasks: two
// allocations of one GPU task each when its GPUs are spread one per
// allocation, or one task holding it all.
func TestResourcesSplitOverTasks(t *testing.T) {
	job := resJob("big")
	job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count = ptr(uint64(2))
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1"), modelledNode("m1")}, jobs: []*api.Job{job}}
	b := testBackend(t, f)
	st := b.jobs["big"]
	// Two GPUs on two nodes: one allocation per node, half each.
	a := engine.Assignment{Jobs: []string{"big"}, Type: "v100", GPUs: []string{"n1-g0", "m1-g0"}, Servers: []string{"n1", "m1"},
		Action: engine.Start, Resources: []engine.Resources{{Cores: 6, MemGB: 40}}}
	r := b.planResources([]engine.Assignment{a})["big"]
	if err := b.rewrite(job, st, a, r); err != nil {
		t.Fatal(err)
	}
	tr := taskOf(job, "train")
	if *job.TaskGroups[0].Count != 2 || deref(tr.Resources.CPU) != 3*2596 || deref(tr.Resources.MemoryMB) != 20*1024 || tr.Env[EnvCores] != "3" {
		t.Errorf("count %d, cpu %d, memory %d, env %v", *job.TaskGroups[0].Count, deref(tr.Resources.CPU), deref(tr.Resources.MemoryMB), tr.Env)
	}
	if job.Meta[MetaCores] != "6" {
		t.Errorf("the job's grant is recorded whole: %v", job.Meta)
	}
}

// TestFitCheck: grants are checked against Nomad's accounting of the node
// (capacity minus reservations minus every live allocation but those of
// the jobs restarting): one that does not fit shrinks to what is free, one
// for which not even the job's own request is free falls back to it, and
// whole cores another allocation holds are not reserved twice.
func TestFitCheck(t *testing.T) {
	jobs := []*api.Job{resJob("alex"), resJob("gnmt"), resJob("res18"), resJob("late")}
	foreign := &api.Allocation{ID: "f1", JobID: "web", TaskGroup: "web", NodeID: "n1", ClientStatus: "running", DesiredStatus: "run",
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"web": {Cpu: api.AllocatedCpuResources{CpuShares: 2596}, Memory: api.AllocatedMemoryResources{MemoryMB: 8192}}}}}
	// alex's old allocation (it is retuned) does not count; a finished one
	// neither.
	old := &api.Allocation{ID: "a0", JobID: "alex", TaskGroup: "train", NodeID: "n1", ClientStatus: "running", DesiredStatus: "stop",
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"train": {Cpu: api.AllocatedCpuResources{CpuShares: 12 * 2596}, Memory: api.AllocatedMemoryResources{MemoryMB: 128000}}}}}
	done := &api.Allocation{ID: "d0", JobID: "gone", TaskGroup: "x", NodeID: "n1", ClientStatus: "complete", DesiredStatus: "run",
		AllocatedResources: old.AllocatedResources}
	// n2 lets tasks reserve 6 of its 32 cores (client reservable_cores);
	// a job holds 4 of them.
	n2 := realNode("n2")
	n2.NodeResources.Cpu.ReservableCpuCores = n2.NodeResources.Cpu.ReservableCpuCores[:6]
	pinned := api.NewServiceJob("db", "db", "global", 50)
	dbTask := api.NewTask("db", "raw_exec")
	dbTask.Resources = &api.Resources{Cores: ptr(4), MemoryMB: ptr(1024)}
	pinned.AddTaskGroup(api.NewTaskGroup("db", 1).AddTask(dbTask))
	db := &api.Allocation{ID: "db0", JobID: "db", TaskGroup: "db", NodeID: "n2", ClientStatus: "running", DesiredStatus: "run", Job: pinned,
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"db": {Cpu: api.AllocatedCpuResources{CpuShares: 4 * 3000}, Memory: api.AllocatedMemoryResources{MemoryMB: 1024}}}}}
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1"), n2}, jobs: jobs, allocs: []*api.Allocation{foreign, old, done, db}}
	b := testBackend(t, f)

	// n1 offers 16 cores, 256 GB; the web job holds 1 core and 8 GB. Each
	// start also carries its sidecar (100 MHz, 64 MB).
	starts := []engine.Assignment{
		assign("alex", []string{"n1-g0"}, "n1", engine.Resources{Cores: 4, MemGB: 64}),
		assign("gnmt", []string{"n1-g1"}, "n1", engine.Resources{Cores: 1, MemGB: 20}),
		assign("res18", []string{"n1-g2"}, "n1", engine.Resources{Cores: 11, MemGB: 64}),
		assign("late", []string{"n2-g0"}, "n2", engine.Resources{Cores: 4, MemGB: 64}),
	}
	res := b.planResources(starts)
	if r := res["alex"]; r == nil || r.Shrunk || r.CPU != 4*2596 || r.MemoryMB != 64*1024 {
		t.Errorf("alex %+v", r)
	}
	if r := res["gnmt"]; r == nil || r.Shrunk || r.CPU != 2596 {
		t.Errorf("gnmt %+v", r)
	}
	// Free for res18's 11 cores: 16 − 1 (web) − 4 − 1 cores in MHz, minus
	// three sidecars' 100 MHz.
	wantCPU := 10*2596 - 300
	if r := res["res18"]; r == nil || !r.Shrunk || r.CPU != wantCPU || r.MemoryMB != 64*1024 ||
		r.Grant != (engine.Resources{Cores: 11, MemGB: 64}) || math.Abs(r.Cores-float64(wantCPU)/2596) > 1e-9 {
		t.Errorf("res18 %+v, want shrunk to %d MHz", r, wantCPU)
	}
	// n2's free reservable cores (2) cannot hold 4: MHz instead.
	if r := res["late"]; r == nil || r.ReservedCores != 0 || r.CPU != 12000 || r.Shrunk {
		t.Errorf("late %+v, want 12000 MHz", r)
	}

	// The web job grows to hold all but 400 MHz: res18's own request
	// (500 MHz) is not free, it falls back to it.
	foreign.AllocatedResources.Tasks["web"].Cpu.CpuShares = 16*2596 - 400 - 4*2596 - 2596 - 300
	res = b.planResources(starts)
	if r, ok := res["res18"]; !ok || r != nil {
		t.Errorf("res18 %+v, want its own resources", r)
	}
	if res["alex"] == nil || res["gnmt"] == nil {
		t.Error("alex and gnmt fitted before res18")
	}
	// No grant in the plan: nothing to plan or read.
	starts[0].Resources, starts[1].Resources, starts[2].Resources, starts[3].Resources = nil, nil, nil, nil
	if res := b.planResources(starts); res != nil {
		t.Errorf("planned %v without grants", res)
	}
}

// TestObserveResources: the nodes' cores and memory, the job's profile and
// the grant its running allocation holds reach the snapshot; a job whose
// tasks Rondo did not size holds none.
func TestObserveResources(t *testing.T) {
	alex, gnmt := resJob("alex"), resJob("gnmt")
	alex.Meta[hcl.MetaProfile] = "alexnet"
	for i, job := range []*api.Job{alex, gnmt} {
		if err := Pin(job, "train", engine.Assignment{GPUs: []string{"n1-g" + itoa(i)}, Servers: []string{"n1"}}, func(string) string { return "n1" }); err != nil {
			t.Fatal(err)
		}
		job.NodePool = ptr("rondo")
	}
	if err := SetResources(alex, "train", &TaskResources{Grant: engine.Resources{Cores: 12, MemGB: 125}, Cores: 12, CPU: 12 * 2596, MemoryMB: 128000}); err != nil {
		t.Fatal(err)
	}
	alloc := func(job string, gpu string) *api.Allocation {
		return &api.Allocation{ID: job + "-0", JobID: job, TaskGroup: "train", NodeID: "n1", ClientStatus: "running", DesiredStatus: "run",
			AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{"train": {
				Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", DeviceIDs: []string{gpu}}}}}}}
	}
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}, jobs: []*api.Job{alex, gnmt},
		allocs: []*api.Allocation{alloc("alex", "n1-g0"), alloc("gnmt", "n1-g1")}}
	b := testBackend(t, f)
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Cores != 16 || snap.Nodes[0].MemGB != 256 {
		t.Errorf("nodes %+v", snap.Nodes)
	}
	if len(snap.Jobs) != 2 || snap.Jobs[0].Profile != "alexnet" || snap.Jobs[1].Profile != "" {
		t.Errorf("jobs %+v", snap.Jobs)
	}
	held := map[string][]engine.Resources{}
	for _, a := range snap.Running {
		held[a.Jobs[0]] = a.Resources
	}
	if len(snap.Running) != 2 || len(held["alex"]) != 1 || held["alex"][0] != (engine.Resources{Cores: 12, MemGB: 125}) || held["gnmt"] != nil {
		t.Errorf("running %+v", snap.Running)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A job naming an unknown rondo.profile is ignored (bad meta), named in
// one warning; the others run.
func TestUnknownProfileIgnored(t *testing.T) {
	bad, gnmt := resJob("bad"), resJob("gnmt")
	bad.Meta[hcl.MetaProfile] = "alexnett"
	gnmt.Meta[hcl.MetaProfile] = "gnmt"
	f := &fakeNomad{nodes: []*api.Node{modelledNode("n1")}, jobs: []*api.Job{bad, gnmt}}
	b := testBackend(t, f)
	b.cfg.CheckProfile = synergy.Default().Known
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Jobs) != 1 || snap.Jobs[0].ID != "gnmt" {
		t.Errorf("jobs %+v, want only gnmt", snap.Jobs)
	}
	if !b.warned["bad"] {
		t.Error("no warning for the unknown profile")
	}
}

// left: a purged job (404) or a stopped one has left, a live one has not;
// the wait for started jobs counts those that left as settled.
func TestLeftJobs(t *testing.T) {
	stop := true
	f := &fakeNomad{jobs: []*api.Job{{ID: ptr("live")}, {ID: ptr("stopped"), Stop: &stop}}}
	b := testBackend(t, f)
	for id, want := range map[string]bool{"live": false, "stopped": true, "purged": true} {
		if got := b.left(id); got != want {
			t.Errorf("left(%s) = %v, want %v", id, got, want)
		}
	}
}

package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/estimator"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// fleetNomad answers the reads of the Nomad backend's Observe: GPU nodes
// with the device plugin's groups (name and memory attribute) and opted-in
// jobs, nothing running.
type fleetNomad struct {
	nodes []*api.Node
	jobs  []*api.Job
}

func (f *fleetNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Nomad-Index", "1")
	var out any = []any{}
	switch p := r.URL.Path; {
	case p == "/v1/nodes":
		var stubs []*api.NodeListStub
		for _, n := range f.nodes {
			stubs = append(stubs, &api.NodeListStub{ID: n.ID, Name: n.Name, NodePool: "rondo", Status: "ready", SchedulingEligibility: "eligible"})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/node/"):
		for _, n := range f.nodes {
			if n.ID == strings.TrimPrefix(p, "/v1/node/") {
				out = n
			}
		}
	case p == "/v1/jobs":
		var stubs []*api.JobListStub
		for i, j := range f.jobs {
			stubs = append(stubs, &api.JobListStub{ID: *j.ID, Type: "batch", Meta: j.Meta, CreateIndex: uint64(i + 1)})
		}
		out = stubs
	case strings.HasPrefix(p, "/v1/job/"):
		for _, j := range f.jobs {
			if *j.ID == strings.TrimPrefix(p, "/v1/job/") {
				out = j
			}
		}
	case p == "/v1/allocations":
	default:
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(out)
}

func gpuNode(id, model string, memMiB int64) *api.Node {
	return &api.Node{ID: id, Name: id, NodePool: "rondo", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: model,
			Attributes: map[string]*api.Attribute{"memory": {IntVal: &memMiB, Unit: "MiB"}},
			Instances:  []*api.NodeDevice{{ID: id + "-g0", Healthy: true}, {ID: id + "-g1", Healthy: true}}}}}}
}

func modelJob(id, model string) *api.Job {
	job := api.NewBatchJob(id, id, "global", 50)
	tg := api.NewTaskGroup("train", 1)
	task := api.NewTask("train", "raw_exec")
	n := uint64(1)
	task.Require(&api.Resources{Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &n}}})
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	job.Meta = map[string]string{rhcl.MetaVC: "research", rhcl.MetaModel: model, rhcl.MetaSteps: "1000"}
	return job
}

// TestAgentThroughputsFile: the agent's round decides on the operator's
// throughputs file and gpu_type mapping. A fleet of H100 (mapped by the
// config to "h100"), A100 80GB and L40S nodes (derived: "a100-80gb",
// "l40s-48gb" from the memory attribute); the file profiles ResNet-50 on
// h100 and a100-80gb. Through the agent's own load and backend wiring,
// Observe and the Estimating stage before the engine: ResNet-50 decides
// on the file's values (table); its L40S value is estimated from the
// file's ResNet-18 L40S/A100 ratio (400 x 150/200: a profiled
// configuration is a row of the completion like a job); a model nobody
// profiled is defaulted to 1, never 0 ("cannot run") on the file's new
// types.
func TestAgentThroughputsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("fleet.json", `{
  "h100":      {"('ResNet-50 (batch size 64)', 1)": {"null": 20}},
  "a100-80gb": {"('ResNet-50 (batch size 64)', 1)": {"null": 10}, "('ResNet-18 (batch size 64)', 1)": {"null": 50}},
  "l40s-48gb": {"('ResNet-18 (batch size 64)', 1)": {"null": 40}}
}`)
	cfgPath := write("cluster.hcl", `gpu_type "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
throughputs = "fleet.json"
`)
	c := newAgentCmd()
	c.config = cfgPath
	s, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	f := &fleetNomad{nodes: []*api.Node{gpuNode("h", "NVIDIA H100 80GB HBM3", 81559), gpuNode("a", "NVIDIA A100-SXM4-80GB", 81920),
		gpuNode("l", "NVIDIA L40S", 46068)},
		jobs: []*api.Job{modelJob("r50", "ResNet-50 (batch size 64)"), modelJob("lm", "LM (batch size 80)"), modelJob("my", "MyNet (batch size 32)")}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	client, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := rnomad.New(rnomad.Config{Client: client, Progress: func(*api.Job) (float64, bool) { return 0, false },
		TypeNames: s.cfg.TypeNames(), Throughputs: s.tput})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.Observe()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDecider(s, hclog.NewNullLogger(), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := estimatingStage(s, d, estimator.NewOnline(0, nil), round.NewPairEstimates(s.tput)).Round(snap); err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, g := range snap.GPUs {
		types[g.Type] = true
	}
	if len(types) != 3 || !types["h100"] || !types["a100-80gb"] || !types["l40s-48gb"] {
		t.Fatalf("GPU types %v, want h100 (mapped), a100-80gb, l40s-48gb", types)
	}
	jobs := map[string]engine.Job{}
	for _, j := range snap.Jobs {
		jobs[j.ID] = j
	}
	r50, lm, my := jobs["r50"], jobs["lm"], jobs["my"]
	for typ, want := range map[string]float64{"h100": 20, "a100-80gb": 10} {
		if r50.Throughput[typ] != want || r50.ThroughputSource[typ] != engine.SourceTable {
			t.Errorf("ResNet-50 on %s: %v (%s), want the file's %v (table)", typ, r50.Throughput[typ], r50.ThroughputSource[typ], want)
		}
	}
	if v, src := r50.Throughput["l40s-48gb"], r50.ThroughputSource["l40s-48gb"]; src != engine.SourceEstimated || math.Abs(v/8-1) > 0.1 {
		t.Errorf("ResNet-50 on l40s-48gb: %v (%s), want about 8 (10 x ResNet-18's 40/50) estimated", v, src)
	}
	// LM: only Gavel's v100, p100 and k80 values, which carry its speed
	// over to every type of the fleet through the other rows' ratios.
	for typ := range types {
		if lm.ThroughputSource[typ] != engine.SourceEstimated || !(lm.Throughput[typ] > 1) {
			t.Errorf("LM on %s: %v (%s), want an estimate from its v100 value", typ, lm.Throughput[typ], lm.ThroughputSource[typ])
		}
	}
	if !(lm.Throughput["h100"] > lm.Throughput["a100-80gb"]) {
		t.Errorf("LM: h100 %v not above a100-80gb %v, against every known ratio", lm.Throughput["h100"], lm.Throughput["a100-80gb"])
	}
	for typ := range types {
		if my.Throughput[typ] != 1 || my.ThroughputSource[typ] != engine.SourceDefaulted {
			t.Errorf("MyNet on %s: %v (%s), want 1 defaulted (nobody profiled it; not 0)", typ, my.Throughput[typ], my.ThroughputSource[typ])
		}
	}

	// A bad file is an error at the attribute; config validate says so too.
	fleet := write("fleet.json", `{"h100": {"not a key": {"null": 1}}}`)
	if _, err := c.load(); err == nil || err.Error() != cfgPath+":4:15: Invalid throughputs; throughputs: "+fleet+`:1:11: h100: job key "not a key": not a tuple` {
		t.Errorf("bad file: %v", err)
	}
	// A syntax error or a negative value: the line and column in the file.
	write("fleet.json", "{\n  \"h100\": {\n    \"('A', 1)\": {\"null\": 1,}}}")
	if _, err := c.load(); err == nil || !strings.HasSuffix(err.Error(), "throughputs: "+fleet+":3:28: invalid character '}' looking for beginning of object key string") {
		t.Errorf("syntax error: %v", err)
	}
	write("fleet.json", "{\n  \"h100\": {\n    \"('A', 1)\": {\"null\": -3}}}")
	if _, err := c.load(); err == nil || !strings.Contains(err.Error(), "throughputs: "+fleet+":3:26: h100 ('A', 1) isolated throughput: -3 is negative") {
		t.Errorf("negative: %v", err)
	}
	os.Remove(filepath.Join(dir, "fleet.json"))
	if _, err := c.load(); err == nil || !strings.Contains(err.Error(), cfgPath+":4:15: Invalid throughputs; throughputs: open ") {
		t.Errorf("missing file: %v", err)
	}
	var tb *throughputs.Table = s.tput
	if _, ok := tb.Lookup("ResNet-50 (batch size 64)", 1, "v100"); !ok {
		t.Error("the merged table lost Gavel's v100 values")
	}
}

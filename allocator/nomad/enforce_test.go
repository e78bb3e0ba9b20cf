package nomad

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/state"
)

// A wait that saw Nomad fail, then timed out although Nomad answered again,
// still reports the failure: the agent marks the next round to recompute.
func TestWaitTimeoutKeepsOutage(t *testing.T) {
	b := &Backend{cfg: Config{AckTimeout: 600 * time.Millisecond}}
	polls := 0
	err := b.waitUntil("starts", func() (bool, error) {
		polls++
		if polls == 1 {
			return false, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		}
		return false, nil
	})
	if err == nil || !strings.Contains(err.Error(), "timed out") || !state.Transient(err) {
		t.Fatalf("err = %v, want a timeout that state.Transient recognises", err)
	}
	// A plain timeout (Nomad answered throughout) is not transient.
	err = b.waitUntil("starts", func() (bool, error) { return false, nil })
	if err == nil || state.Transient(err) {
		t.Fatalf("err = %v, want a timeout that is not transient", err)
	}
}

// A pair's member k is pinned to share k of each of its GPUs, one
// allocation per GPU, requesting nvidia/gpu-share; pinned back to
// exclusive use it requests nvidia/gpu again.
func TestPinShared(t *testing.T) {
	job := &api.Job{TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Tasks: []*api.Task{{Name: "t",
		Resources: &api.Resources{Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(2))}}}}}}}}
	shares := map[string][]string{"G1": {"G1/mps-50/0", "G1/mps-50/1"}, "G2": {"G2/mps-50/0", "G2/mps-50/1"}}
	a := engine.Assignment{Jobs: []string{"a", "b"}, Type: "v100", GPUs: []string{"G1", "G2"}, Servers: []string{"n1"}}
	if err := PinShared(job, "g", a, 1, shares); err != nil {
		t.Fatal(err)
	}
	tg := job.TaskGroups[0]
	d := tg.Tasks[0].Resources.Devices[0]
	if *tg.Count != 2 || d.Name != "nvidia/gpu-share" || *d.Count != 1 ||
		d.Constraints[0].RTarget != "G1/mps-50/1,G2/mps-50/1" || tg.Constraints[0].RTarget != "n1" {
		t.Fatalf("count %d, device %s x%d %+v, node %+v", *tg.Count, d.Name, *d.Count, d.Constraints[0], tg.Constraints[0])
	}
	if gpuOf("G1/mps-50/1") != "G1" || gpuOf("G1") != "G1" || !isGPURequest(d.Name) {
		t.Fatal("share ids and requests")
	}
	setPartner(job, "g", "a", "LM (batch size 20)")
	if tg.Tasks[0].Env[EnvPartner] != "a" {
		t.Fatalf("env %v", tg.Tasks[0].Env)
	}
	if err := PinShared(job, "g", engine.Assignment{Jobs: []string{"a", "b"}, GPUs: []string{"G3"}, Servers: []string{"n1"}}, 0, shares); err == nil {
		t.Fatal("a GPU without shares was pinned")
	}
	a.Jobs = []string{"b"}
	if err := Pin(job, "g", a, func(string) string { return "n1" }); err != nil {
		t.Fatal(err)
	}
	setPartner(job, "g", "", "")
	d = tg.Tasks[0].Resources.Devices[0]
	if d.Name != "nvidia/gpu" || *d.Count != 2 || *tg.Count != 1 || d.Constraints[0].RTarget != "G1,G2" || len(tg.Tasks[0].Env) != 0 {
		t.Fatalf("exclusive again: %s x%d count %d %+v env %v", d.Name, *d.Count, *tg.Count, d.Constraints[0], tg.Tasks[0].Env)
	}
}

func ptr[T any](v T) *T { return &v }

package nomad

import (
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/hcl"
)

// TestCarryPlacement: a user's new version of a job Rondo admitted keeps
// Rondo's count (here 0: suspended), pins, pool, priority, env and meta,
// and the user's own changes; a job Rondo has not admitted is left alone.
func TestCarryPlacement(t *testing.T) {
	old := gpuJob(2, 1)
	old.Meta = map[string]string{hcl.MetaVC: "a", MetaGPUs: "2"}
	srv := func(string) string { return "n1" }
	if err := Pin(old, "train", engine.Assignment{GPUs: []string{"g1", "g2"}, Servers: []string{"n1"}}, srv); err != nil {
		t.Fatal(err)
	}
	AddTaskEnv(old, "train", "/ckpt", "http://lease:4701")
	pool, prio, zero := "rondo", GuaranteedPriority, 0
	old.NodePool, old.Priority = &pool, &prio
	old.TaskGroups[0].Count = &zero // suspended

	upd := gpuJob(2, 1)
	upd.Meta = map[string]string{hcl.MetaVC: "a", hcl.MetaSteps: "5000"}
	upd.TaskGroups[0].Tasks[0].Env = map[string]string{"LR": "0.1"}
	if ok, _ := CarryPlacement(gpuJob(2, 1), upd); ok {
		t.Fatal("carried from a job Rondo did not admit")
	}
	if ok, notes := CarryPlacement(old, upd); !ok || len(notes) != 0 {
		t.Fatalf("admitted job: carried %v, notes %q", ok, notes)
	}
	tg := upd.TaskGroups[0]
	if *tg.Count != 0 || deref(upd.NodePool) != "rondo" || deref(upd.Priority) != GuaranteedPriority {
		t.Fatalf("count %d pool %s priority %d", *tg.Count, deref(upd.NodePool), deref(upd.Priority))
	}
	if !hasNodePin(tg) || pinnedGPUs(tg) != "g1,g2" {
		t.Fatalf("pins: %+v, gpus %q", tg.Constraints, pinnedGPUs(tg))
	}
	env := tg.Tasks[0].Env
	if env["LR"] != "0.1" || env[CheckpointEnv] != "/ckpt/${NOMAD_JOB_ID}" || env[LeaseAddrEnv] != "http://lease:4701" {
		t.Fatalf("env %v", env)
	}
	if upd.Meta[MetaGPUs] != "2" || upd.Meta[hcl.MetaSteps] != "5000" {
		t.Fatalf("meta %v", upd.Meta)
	}
	if len(tg.Tasks[0].Identities) != 1 {
		t.Fatalf("identities %+v", tg.Tasks[0].Identities)
	}
	var kernel int
	for _, c := range tg.Constraints {
		if c.LTarget == "${attr.kernel.name}" {
			kernel++
		}
	}
	if kernel != 1 {
		t.Fatalf("user constraints %+v", tg.Constraints)
	}
	// Opting out (no rondo.vc): nothing carried.
	out := gpuJob(2, 1)
	if ok, _ := CarryPlacement(old, out); ok || out.NodePool != nil {
		t.Fatal("carried into a job that opted out")
	}
	// More GPUs in all: noted, Rondo's kept.
	more := gpuJob(2, 2)
	more.Meta = map[string]string{hcl.MetaVC: "a"}
	if _, notes := CarryPlacement(old, more); len(notes) != 1 || !strings.Contains(notes[0], `group "train": the file asks 4 GPUs in all, the admitted job was sized at 2`) ||
		*more.TaskGroups[0].Count != 0 || *more.TaskGroups[0].Tasks[0].Resources.Devices[0].Count != 2 {
		t.Fatalf("resize: notes %q", notes)
	}
	// An elastic job: its GPUs per worker.
	el := gpuJob(1, 1)
	el.Meta = map[string]string{hcl.MetaVC: "a", hcl.MetaElastic: "1:3"}
	if err := PinElastic(el, "train", engine.Assignment{GPUs: []string{"g1", "g2"}, Servers: []string{"n1"}}, 1); err != nil {
		t.Fatal(err)
	}
	el.NodePool = &pool
	wide := gpuJob(1, 2)
	wide.Meta = map[string]string{hcl.MetaVC: "a", hcl.MetaElastic: "1:3"}
	if _, notes := CarryPlacement(el, wide); len(notes) != 1 || !strings.Contains(notes[0], "asks 2 GPUs per worker, the admitted job runs 1") || *wide.TaskGroups[0].Count != 2 {
		t.Fatalf("elastic resize: notes %q", notes)
	}
	same := gpuJob(1, 1)
	same.Meta = map[string]string{hcl.MetaVC: "a", hcl.MetaElastic: "1:4"}
	if _, notes := CarryPlacement(el, same); len(notes) != 0 || *same.TaskGroups[0].Count != 2 {
		t.Fatalf("elastic, new max: notes %q", notes)
	}
}

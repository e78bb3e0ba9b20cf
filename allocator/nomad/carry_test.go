package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
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
	if CarryPlacement(gpuJob(2, 1), upd) {
		t.Fatal("carried from a job Rondo did not admit")
	}
	if !CarryPlacement(old, upd) {
		t.Fatal("admitted job not recognised")
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
	_ = api.Job{}
}

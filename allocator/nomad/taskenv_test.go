package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
	leaseclient "github.com/rondo-sched/rondo/allocator/lease/client"
)

// TestAddTaskEnv: what a task sets is kept, what it lacks is added, the
// other groups are left alone, and a second call changes nothing (so a
// resumed job's allocations are not replaced for it).
func TestAddTaskEnv(t *testing.T) {
	job := gpuJob(1, 1)
	own := api.NewTask("sidecar", "raw_exec")
	own.Env = map[string]string{CheckpointEnv: "/mine", LeaseAddrEnv: "http://mine:1"}
	own.Identities = []*api.WorkloadIdentity{{Name: leaseclient.IdentityName, Audience: []string{"custom"}}}
	job.TaskGroups[0].AddTask(own)
	other := api.NewTaskGroup("other", 1)
	other.AddTask(api.NewTask("x", "raw_exec"))
	job.AddTaskGroup(other)

	if !AddTaskEnv(job, "train", "/shared/ckpt", "http://10.0.0.5:4701") {
		t.Fatal("nothing added")
	}
	train := job.TaskGroups[0].Tasks[0]
	if got := train.Env[CheckpointEnv]; got != "/shared/ckpt/${NOMAD_JOB_ID}" {
		t.Errorf("checkpoint dir %q", got)
	}
	if got := train.Env[LeaseAddrEnv]; got != "http://10.0.0.5:4701" {
		t.Errorf("lease addr %q", got)
	}
	if len(train.Identities) != 1 || train.Identities[0].Name != leaseclient.IdentityName ||
		len(train.Identities[0].Audience) != 1 || train.Identities[0].Audience[0] != leaseclient.Audience || !train.Identities[0].File {
		t.Errorf("identities %+v", train.Identities)
	}
	if own.Env[CheckpointEnv] != "/mine" || own.Env[LeaseAddrEnv] != "http://mine:1" ||
		len(own.Identities) != 1 || own.Identities[0].Audience[0] != "custom" {
		t.Errorf("a task's own settings were changed: env %v identities %+v", own.Env, own.Identities)
	}
	if x := job.TaskGroups[1].Tasks[0]; len(x.Env) != 0 || len(x.Identities) != 0 {
		t.Errorf("another group's task changed: %v %v", x.Env, x.Identities)
	}
	if AddTaskEnv(job, "train", "/shared/ckpt", "http://10.0.0.5:4701") {
		t.Error("a second call changed the job")
	}
	// The checkpoint directory the backend reads is the one added.
	job.ID = ptrTo("j7")
	if got := CheckpointDir(job); got != "/shared/ckpt/j7" {
		t.Errorf("CheckpointDir = %q", got)
	}

	// Nothing configured: nothing added.
	bare := gpuJob(1, 1)
	if AddTaskEnv(bare, "train", "", "") || len(bare.TaskGroups[0].Tasks[0].Env) != 0 {
		t.Error("added env with nothing configured")
	}
}

func ptrTo[T any](v T) *T { return &v }

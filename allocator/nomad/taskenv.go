package nomad

import (
	"path"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
	leaseclient "github.com/rondo-sched/rondo/allocator/lease/client"
)

// LeaseAddrEnv is the task env var naming the lease API (the client package
// reads it).
const LeaseAddrEnv = "RONDO_LEASE_ADDR"

// AddTaskEnv gives every task of job's group what a Rondo job needs and
// does not set itself: RONDO_CHECKPOINT_DIR = root/<job id> (root "" adds
// none), RONDO_LEASE_ADDR = leaseAddr and a workload identity "rondo" with
// the lease API's audience, written to the task's secrets (leaseAddr ""
// adds neither). What a task sets is kept. It reports whether it changed
// the job.
//
// Env and identities are part of the task: changing them replaces running
// allocations, so the backend calls this only when it (re)starts a job
// anyway (admission, resume, migration) — once added the values stay the
// same, and later starts change nothing more.
func AddTaskEnv(job *api.Job, group, root, leaseAddr string) bool {
	changed := false
	for _, tg := range job.TaskGroups {
		if deref(tg.Name) != group {
			continue
		}
		for _, t := range tg.Tasks {
			if root != "" && t.Env[CheckpointEnv] == "" {
				setEnv(t, CheckpointEnv, path.Join(root, "${NOMAD_JOB_ID}"))
				changed = true
			}
			if leaseAddr == "" {
				continue
			}
			if t.Env[LeaseAddrEnv] == "" {
				setEnv(t, LeaseAddrEnv, leaseAddr)
				changed = true
			}
			has := slices.ContainsFunc(t.Identities, func(w *api.WorkloadIdentity) bool {
				return w != nil && w.Name == leaseclient.IdentityName
			})
			if !has {
				t.Identities = append(t.Identities, &api.WorkloadIdentity{Name: leaseclient.IdentityName,
					Audience: []string{leaseclient.Audience}, File: true, TTL: identityTTL})
				changed = true
			}
		}
	}
	return changed
}

// identityTTL: Nomad renews the token file before it expires.
const identityTTL = time.Hour

func setEnv(t *api.Task, k, v string) {
	if t.Env == nil {
		t.Env = map[string]string{}
	}
	t.Env[k] = v
}

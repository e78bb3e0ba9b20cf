package nomad

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// ProgressFunc reports the steps a job has done; ok is false when unknown.
// It is the one place the backend learns progress, so that the checkpoint
// reader below can be swapped for the lease/progress API.
type ProgressFunc func(job *api.Job) (steps float64, ok bool)

// CheckpointEnv is the task env var naming the job's checkpoint directory, a
// host path that survives rescheduling (the alloc dir does not).
const CheckpointEnv = "RONDO_CHECKPOINT_DIR"

// CheckpointFile is the trainer's checkpoint inside that directory.
const CheckpointFile = "checkpoint.json"

// Checkpoint is what rondo-trainer writes.
type Checkpoint struct {
	Steps float64 `json:"steps"`
	Total float64 `json:"total"`
	// Epochs is the epochs done, written by a two-role job's trainer (its
	// job declares rondo.epochs); absent otherwise.
	Epochs *float64 `json:"epochs,omitempty"`
}

// CheckpointDir returns the job's checkpoint directory from its tasks' env,
// with the job id, name and namespace interpolated; "" if no task sets it.
func CheckpointDir(job *api.Job) string {
	id := deref(job.ID)
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			if d := t.Env[CheckpointEnv]; d != "" {
				r := strings.NewReplacer("${NOMAD_JOB_ID}", id, "${NOMAD_JOB_NAME}", deref(job.Name),
					"${NOMAD_NAMESPACE}", deref(job.Namespace))
				return r.Replace(d)
			}
		}
	}
	return ""
}

// CheckpointProgress reads the trainer's checkpoint file. It works when the
// allocator shares a file system with the clients (tests, the demo).
func CheckpointProgress(job *api.Job) (float64, bool) {
	dir := CheckpointDir(job)
	if dir == "" {
		return 0, false
	}
	c, err := ReadCheckpoint(dir)
	if err != nil {
		return 0, false
	}
	return c.Steps, true
}

// CheckpointEpochs reads the epochs done from the trainer's checkpoint
// file (ok false when it has none).
func CheckpointEpochs(job *api.Job) (float64, bool) {
	dir := CheckpointDir(job)
	if dir == "" {
		return 0, false
	}
	c, err := ReadCheckpoint(dir)
	if err != nil || c.Epochs == nil {
		return 0, false
	}
	return *c.Epochs, true
}

// ReadCheckpoint reads dir/checkpoint.json.
func ReadCheckpoint(dir string) (Checkpoint, error) {
	var c Checkpoint
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		return c, err
	}
	err = json.Unmarshal(b, &c)
	return c, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestObserveJobEntity: the job's rondo.entity meta reaches the snapshot's
// job (with its VC and user, which the engine falls back to); a bad entity
// value leaves the job out as any bad rondo meta does.
func TestObserveJobEntity(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: client, Progress: func(*api.Job) (float64, bool) { return 0, false }})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{"v100": true}
	for _, tc := range []struct {
		meta   map[string]string
		ok     bool
		entity string
	}{
		{map[string]string{"rondo.vc": "research", "rondo.user": "alice", "rondo.entity": "team-a"}, true, "team-a"},
		{map[string]string{"rondo.vc": "research", "rondo.user": "alice"}, true, ""},
		{map[string]string{"rondo.vc": "research", "rondo.user": "alice", "rondo.entity": " team-a"}, false, ""},
	} {
		job := gpuJob(1, 1)
		job.Meta = tc.meta
		st, ok := b.observeJob("j", job, 0, types, nil)
		if ok != tc.ok {
			t.Fatalf("meta %v: observed %v", tc.meta, ok)
		}
		if !ok {
			continue
		}
		j := st.engineJob("j")
		if j.Entity != tc.entity || j.User != "alice" || j.VC != "research" {
			t.Errorf("meta %v: job entity %q user %q vc %q", tc.meta, j.Entity, j.User, j.VC)
		}
	}
}

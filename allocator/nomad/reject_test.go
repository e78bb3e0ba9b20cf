package nomad

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestObserveJobRejects: every opted-in job Rondo will not schedule as
// submitted is a rejection with its reason (the bad key and value, the
// unknown profile, no GPU request, a dispatched job), warned once, listed
// every round.
func TestObserveJobRejects(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: client, Progress: func(*api.Job) (float64, bool) { return 0, false },
		CheckProfile: func(p string) error {
			if p != "known" {
				return errors.New("unknown profile " + p)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{"v100": true}
	noGPU := gpuJob(1, 0)
	noGPU.TaskGroups[0].Tasks[0].Resources.Devices = nil
	dispatched := gpuJob(1, 1)
	dispatched.Dispatched = true
	for _, tc := range []struct {
		name string
		job  *api.Job
		meta map[string]string
		want string
	}{
		{"bad steps", gpuJob(1, 1), map[string]string{"rondo.vc": "research", "rondo.user": "ann", "rondo.steps": "abc"},
			`bad rondo meta: meta rondo.steps = "abc": `},
		{"unknown profile", gpuJob(1, 1), map[string]string{"rondo.vc": "research", "rondo.profile": "nope"},
			"bad rondo meta: rondo.profile: unknown profile nope"},
		{"no GPU", noGPU, map[string]string{"rondo.vc": "research"}, "no nvidia/gpu device request"},
		{"dispatched", dispatched, map[string]string{"rondo.vc": "research"}, "a dispatched job cannot be re-registered"},
	} {
		tc.job.Meta = tc.meta
		ns := "team"
		tc.job.Namespace = &ns
		for round := range 2 {
			b.rejects = nil
			if _, ok := b.observeJob(tc.name, tc.job, 0, types, nil); ok {
				t.Fatalf("%s: observed", tc.name)
			}
			if len(b.rejects) != 1 {
				t.Fatalf("%s, round %d: rejections %+v", tc.name, round, b.rejects)
			}
			r := b.rejects[0]
			if r.Job != tc.name || r.Namespace != "team" || r.VC != "research" || r.User != tc.meta["rondo.user"] ||
				!strings.HasPrefix(r.Reason, tc.want) {
				t.Errorf("%s: %+v, want reason %q", tc.name, r, tc.want)
			}
		}
	}
	// A good job is no rejection.
	b.rejects = nil
	good := gpuJob(1, 1)
	good.Meta = map[string]string{"rondo.vc": "research"}
	if _, ok := b.observeJob("good", good, 0, types, nil); !ok || b.rejects != nil {
		t.Errorf("good job: %v %+v", ok, b.rejects)
	}
}
